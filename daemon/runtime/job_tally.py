"""What a cycle reads from every job of its snapshot outside the session, kept across cycles.

Around each session the daemon needs three figures of the whole snapshot: the number of tasks
(`CycleClosed.tasks`), the bound and pending tasks (the progress line), and the task and job of
each pod key its decision events name (`fumarole.daemon.runtime.cycle._task_index`: the first task with
that key, in job then task order).  Recomputed, each is a pass over every task of every job
(~2 ms a cycle at 2,000 nodes and ~20k tasks).  A freeze hands out the very same JobInfo object
for a job that did not change (snapshots are read-only: sessions work on clones), so
`JobTally.update(snapshot)` only re-reads the jobs whose object is new (when the snapshot has the
same jobs in the same order as the last one, the objects are compared at C speed, ~0.1 ms for
2,700 jobs), and keeps, per pod key, the jobs that hold it; a lookup then goes straight to them.

When the caller passes the projection's `generation` and it is the one of the last update, the
jobs are the same objects (the projection's contract, which `session_memo.py` relies on too) and
the pass is skipped.  `tests/cache/test_cache_job_tally.py` checks every figure against the
recomputation over random event sequences.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from itertools import compress
from operator import is_not

from fumarole.daemon.scheduler.model.job import JobInfo
from fumarole.daemon.scheduler.model.snapshot import ClusterSnapshot
from fumarole.daemon.scheduler.model.task import TaskInfo, TaskStatus

__all__ = ["BOUND_STATUSES", "JobTally"]

BOUND_STATUSES = frozenset(
    {TaskStatus.BOUND, TaskStatus.BINDING, TaskStatus.RUNNING, TaskStatus.ALLOCATED, TaskStatus.RELEASING}
)


class _Job:
    """One job's figures, valid while the snapshot holds this very JobInfo object."""

    __slots__ = ("bound", "by_key", "job", "pending", "tasks")

    def __init__(self, job: JobInfo) -> None:
        self.job = job
        tasks = job.peek_tasks()
        self.tasks = len(tasks)
        bound = pending = 0
        by_key: dict[str, TaskInfo] = {}
        for t in tasks.values():
            status = t.status
            if status in BOUND_STATUSES:
                bound += 1
            elif status == TaskStatus.PENDING:
                pending += 1
            by_key.setdefault(t.key, t)
        self.bound = bound
        self.pending = pending
        self.by_key = by_key


class JobTally:
    """The snapshot's task figures and pod-key index, updated job by job (see the module notes)."""

    def __init__(self) -> None:
        self._jobs: dict[str, _Job] = {}
        self._holders: dict[str, list[str]] = {}  # pod key -> uids of the jobs holding it
        self._generation: int | None = None
        # The uids and JobInfo objects of the last update, in snapshot order.
        self._uids: list[str] = []
        self._objs: list[JobInfo] = []
        self.jobs: Mapping[str, JobInfo] | None = None
        """The jobs of the snapshot last updated with (what `lookup` answers about)."""
        self.tasks = 0
        self.bound = 0
        self.pending = 0

    def update(self, snapshot: ClusterSnapshot, generation: int | None = None) -> None:
        """Take `snapshot`'s jobs; `generation`: the projection's, when the caller knows it."""
        if generation is not None and generation == self._generation:
            self.jobs = snapshot.jobs
            return
        uids = list(snapshot.jobs)
        objs = list(snapshot.jobs.values())
        if uids == self._uids:
            # The same jobs in the same order (the common case): compared object by object at C
            # speed, and only the replaced ones re-read.
            self._replace(uids, objs, list(compress(range(len(objs)), map(is_not, objs, self._objs))))
        else:
            self._rebuild(snapshot)
        self._uids, self._objs = uids, objs
        self.jobs = snapshot.jobs
        self._generation = generation

    def _replace(self, uids: list[str], objs: list[JobInfo], changed: list[int]) -> None:
        jobs = self._jobs
        for i in changed:
            uid = uids[i]
            old = jobs[uid]
            self._forget(uid, old)
            new = jobs[uid] = _Job(objs[i])
            self._hold(uid, new)
            self.tasks += new.tasks - old.tasks
            self.bound += new.bound - old.bound
            self.pending += new.pending - old.pending

    def _rebuild(self, snapshot: ClusterSnapshot) -> None:
        known = self._jobs
        kept: dict[str, _Job] = {}
        tasks = bound = pending = seen = 0
        for uid, job in snapshot.jobs.items():
            hit = known.get(uid)
            if hit is not None:
                seen += 1
            if hit is None or hit.job is not job:
                if hit is not None:
                    self._forget(uid, hit)
                hit = _Job(job)
                self._hold(uid, hit)
            kept[uid] = hit
            tasks += hit.tasks
            bound += hit.bound
            pending += hit.pending
        if seen < len(known):  # some jobs are gone
            for uid in known.keys() - kept.keys():
                self._forget(uid, known[uid])
        self._jobs = kept
        self.tasks, self.bound, self.pending = tasks, bound, pending

    def lookup(self, keys: Iterable[str]) -> dict[str, tuple[TaskInfo, JobInfo]]:
        """The first task (in job, then task order) of each pod key in `keys`, with its job."""
        jobs = self._jobs
        out: dict[str, tuple[TaskInfo, JobInfo]] = {}
        order: dict[str, int] | None = None
        for key in keys:
            holders = self._holders.get(key)
            if not holders:
                continue
            uid = holders[0]
            if len(holders) > 1:
                if order is None:
                    order = {u: i for i, u in enumerate(jobs)}
                uid = min(holders, key=order.__getitem__)
            entry = jobs[uid]
            out[key] = (entry.by_key[key], entry.job)
        return out

    def _hold(self, uid: str, entry: _Job) -> None:
        holders = self._holders
        for key in entry.by_key:
            h = holders.get(key)
            if h is None:
                holders[key] = [uid]
            else:
                h.append(uid)

    def _forget(self, uid: str, entry: _Job) -> None:
        holders = self._holders
        for key in entry.by_key:
            h = holders[key]
            h.remove(uid)
            if not h:
                del holders[key]
