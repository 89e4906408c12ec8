"""Per-job answers kept from one session to the next for the jobs a session has not touched.

Some questions are asked of every job of the cluster in every session although the answer is a
pure function of the job's tasks and fixed fields under the configuration in force: JobStarving,
asked by preempt and reclaim of every job not pending, is the one that costs (two plugin calls
per job and action at every cycle, for a cluster where almost no job changes).

A `JobMemo` answers such a question from the session before when

* the job is an unmaterialised copy-on-write clone (`JobInfo.cow_origin` set): it still shares
  its tasks, status index and counts with the snapshot's JobInfo, so whatever is derived from
  them is the origin's (writes to tasks always materialise the clone first, model/job.py);
* the snapshot holds the same JobInfo object the answer was derived from (the owner of the cache,
  model/node_derived.py `jobs`, promises never to change a JobInfo in place once a session saw
  it: the daemon's freeze builds a new one for a changed job);
* the session runs under the same configuration object (plugins and their arguments decide the
  answer; the daemon keeps one object until the configuration changes).

Otherwise it asks the plugins and keeps the answer for the next session.  A memo keeps only the
jobs asked in the session at hand, so it holds at most one entry per job of the cluster.  The
answers are exactly the plugins' (tests/scheduler/framework/test_job_memo_cold_warm.py runs warm
and cold sessions side by side on random changes); without a kept store (`Session.kept_jobs` is
None: bench/core.py, the study engine, `fumarole schedule`) every question goes to the plugins.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

from fumarole.daemon.scheduler.model.job import JobInfo

__all__ = ["JobMemo", "open_job_memo"]

Entry = tuple[JobInfo, bool]


class JobMemo:
    """One session's view of one kept question: `answer(job, ask)`."""

    __slots__ = ("fresh", "kept")

    def __init__(self, kept: dict[str, Entry], fresh: dict[str, Entry]) -> None:
        self.kept = kept
        self.fresh = fresh

    def answer(self, job: JobInfo, ask: Callable[[JobInfo], bool]) -> bool:
        """`ask(job)`, or the answer kept for the same snapshot job while `job` is untouched."""
        origin = job.cow_origin
        if origin is None:
            return ask(job)
        uid = job.uid
        hit = self.fresh.get(uid)
        if hit is None or hit[0] is not origin:
            hit = self.kept.get(uid)
            if hit is None or hit[0] is not origin:
                hit = (origin, ask(job))
            self.fresh[uid] = hit
        return hit[1]


def open_job_memo(kept_jobs: dict[str, Any] | None, name: str, conf: object) -> JobMemo | None:
    """The memo `name` for a session under the configuration `conf`; None without a store.

    The store keeps (configuration, answers) per name; the session's answers replace the old ones.
    """
    if kept_jobs is None:
        return None
    before = kept_jobs.get(name)
    kept: dict[str, Entry] = before[1] if before is not None and before[0] is conf else {}
    fresh: dict[str, Entry] = {}
    kept_jobs[name] = (conf, fresh)
    return JobMemo(kept, fresh)
