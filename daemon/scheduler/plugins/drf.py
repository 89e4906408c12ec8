"""The drf plugin: dominant-resource-fairness job order and share-based preemption victims.

Hierarchical DRF (`enableHierarchy: true`) is not implemented: the flag is accepted with a
warning and the plugin behaves as plain drf.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping
from typing import Any

from fumarole.daemon.scheduler.framework import combinators as cb
from fumarole.daemon.scheduler.framework.session import EventHandler, Session
from fumarole.daemon.scheduler.model.job import JobInfo
from fumarole.daemon.scheduler.model.resources import Resource, share
from fumarole.daemon.scheduler.model.task import TaskInfo

NAME = "drf"
SHARE_DELTA = 0.000001


def dominant_share(allocated: Resource, total: Resource) -> float:
    res = 0.0
    for rn in total.resource_names():
        s = share(allocated.get(rn), total.get(rn))
        if s > res:
            res = s
    return res


def dominant_share_of(total: Resource) -> Callable[[Resource], float]:
    """`dominant_share(allocated, total)` for a fixed `total`: its dimensions are read once."""
    dims = [(rn, total.get(rn)) for rn in total.resource_names()]

    def dominant(allocated: Resource) -> float:
        res = 0.0
        for rn, tv in dims:
            s = share(allocated.get(rn), tv)
            if s > res:
                res = s
        return res

    return dominant


class JobAttr:
    __slots__ = ("allocated", "share")

    def __init__(self) -> None:
        self.allocated = Resource()
        self.share = 0.0


class JobAttrs(dict[str, JobAttr]):
    """Each session job's attr, made at its first lookup from the job as the session opened it.

    An attr is the job's allocated sum at open plus the allocations and deallocations the
    session's events reported since; the snapshot's job is the job at open (the session never
    writes to it) and any event builds the attr before applying itself, so making it late gives
    what making every job's at open gave, without a pass over the cluster's jobs at each open.
    """

    def __init__(
        self,
        jobs: Mapping[str, JobInfo],
        opened: Mapping[str, JobInfo],
        share_of: Callable[[Resource], float],
    ) -> None:
        super().__init__()
        self._jobs = jobs
        self._opened = opened
        self._share_of = share_of

    def __missing__(self, uid: str) -> JobAttr:
        if uid not in self._jobs:
            raise KeyError(uid)
        attr = JobAttr()
        # The sum of the job's allocated-status requests as the session's copy of the job starts
        # with it (JobInfo.cow_clone: shared, or summed again for a job cloned whole).
        attr.allocated = self._opened[uid].cow_clone().allocated.clone()
        attr.share = self._share_of(attr.allocated)
        self[uid] = attr
        return attr

    def get(self, uid: str, default: JobAttr | None = None) -> JobAttr | None:  # type: ignore[override]
        try:
            return self[uid]
        except KeyError:
            return default


class DrfPlugin:
    name = NAME

    def __init__(self, arguments: dict[str, Any]) -> None:
        self.arguments = arguments
        self.attrs: dict[str, JobAttr] = {}

    def on_session_open(self, ssn: Session) -> None:
        total = ssn.total_resource.clone()
        opt = ssn.plugin_option(NAME)
        if opt is not None and opt.flags.get("hierarchy"):
            ssn.warnings.append(
                "drf: enableHierarchy (hierarchical DRF) is not implemented; plain drf is used"
            )
        share_of = dominant_share_of(total)
        attrs = JobAttrs(ssn.jobs, ssn.snapshot_jobs, share_of)
        self.attrs = attrs

        def preemptable(preemptor: TaskInfo, preemptees: list[TaskInfo]) -> tuple[list[TaskInfo], int]:
            latt = attrs.get(preemptor.job)
            if latt is None:
                return [], cb.PERMIT
            ls = dominant_share(latt.allocated.clone().add(preemptor.resreq), total)
            allocations: dict[str, Resource] = {}
            victims = []
            for p in preemptees:
                if p.job not in allocations:
                    ratt = attrs.get(p.job)
                    if ratt is None:
                        continue
                    allocations[p.job] = ratt.allocated.clone()
                ralloc = allocations[p.job].sub(p.resreq)
                rs = dominant_share(ralloc, total)
                if ls < rs or abs(ls - rs) <= SHARE_DELTA:
                    victims.append(p)
            return victims, cb.PERMIT

        def job_order(l: JobInfo, r: JobInfo) -> int:
            ls, rs = attrs[l.uid].share, attrs[r.uid].share
            if ls == rs:
                return 0
            return -1 if ls < rs else 1

        def on_allocate(task: TaskInfo) -> None:
            attr = attrs.get(task.job)
            if attr is None:
                return
            attr.allocated.add(task.resreq)
            attr.share = share_of(attr.allocated)

        def on_deallocate(task: TaskInfo) -> None:
            attr = attrs.get(task.job)
            if attr is None:
                return
            attr.allocated.sub(task.resreq)
            attr.share = share_of(attr.allocated)

        ssn.register(cb.PREEMPTABLE, NAME, preemptable)
        ssn.register(cb.JOB_ORDER, NAME, job_order)
        ssn.add_event_handler(EventHandler(on_allocate, on_deallocate))

    def on_session_close(self, ssn: Session) -> None:
        self.attrs = {}


def new(arguments: dict[str, Any]) -> DrfPlugin:
    return DrfPlugin(arguments)
