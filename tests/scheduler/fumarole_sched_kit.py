"""Builders shared by the scheduler-core tests: nodes, tasks, jobs, queues, confs and sessions.

Test modules import it after putting this directory on sys.path (there are no __init__.py
files in the test tree):

    sys.path.insert(0, str(Path(__file__).resolve().parents[1]))
    from fumarole_sched_kit import ...
"""

from __future__ import annotations

from typing import Any

import yaml

from fumarole.daemon.scheduler.framework import registry
from fumarole.daemon.scheduler.framework.conf import SchedulerConf, parse_conf
from fumarole.daemon.scheduler.framework.run import SessionResult, run_session
from fumarole.daemon.scheduler.framework.session import Session
from fumarole.daemon.scheduler.model.job import JobInfo
from fumarole.daemon.scheduler.model.node import NodeInfo
from fumarole.daemon.scheduler.model.queue import QueueInfo
from fumarole.daemon.scheduler.model.resources import Resource
from fumarole.daemon.scheduler.model.snapshot import ClusterSnapshot
from fumarole.daemon.scheduler.model.task import PodFacts, TaskInfo, TaskStatus

GI = 1024**3


def rl(**quantities: Any) -> Resource:
    """A Resource from a ResourceList given as keyword quantities (cpu="2", memory="1Gi", ...).

    Scalar names with characters that are not valid Python identifiers go through `rl_map`.
    """
    return Resource.from_resource_list({k: v for k, v in quantities.items() if v is not None})


def rl_map(m: dict[str, Any]) -> Resource:
    return Resource.from_resource_list(m)


def pod_req(
    cpu: str | None = "1", memory: str | None = "1Gi", extra: dict[str, Any] | None = None
) -> Resource:
    """A pod's request as Volcano computes it: the containers' requests plus scalar pods: 1."""
    m: dict[str, Any] = {}
    if cpu is not None:
        m["cpu"] = cpu
    if memory is not None:
        m["memory"] = memory
    m.update(extra or {})
    m["pods"] = "1"
    return Resource.from_resource_list(m)


def mk_node(
    name: str,
    cpu: str = "4",
    memory: str = "8Gi",
    pods: str | None = "110",
    extra: dict[str, Any] | None = None,
) -> NodeInfo:
    m: dict[str, Any] = {"cpu": cpu, "memory": memory}
    if pods is not None:
        m["pods"] = pods
    m.update(extra or {})
    return NodeInfo(name, Resource.from_resource_list(m))


def mk_task(
    job: JobInfo | str,
    name: str,
    cpu: str | None = "1",
    memory: str | None = "1Gi",
    *,
    status: TaskStatus = TaskStatus.PENDING,
    node: str = "",
    priority: int = 1,
    role: str = "",
    creation: float = 0.0,
    extra: dict[str, Any] | None = None,
    resreq: Resource | None = None,
    pod: PodFacts | None = None,
    namespace: str | None = None,
    preemptable: bool = True,
    add: bool = True,
) -> TaskInfo:
    """A task of `job` (added to it unless add=False). cpu=None and memory=None make it best-effort."""
    job_uid = job.uid if isinstance(job, JobInfo) else job
    ns = namespace if namespace is not None else (job.namespace if isinstance(job, JobInfo) else "default")
    t = TaskInfo(
        uid=f"{ns}-{name}",
        name=name,
        namespace=ns,
        job=job_uid,
        resreq=resreq if resreq is not None else pod_req(cpu, memory, extra),
        status=status,
        node_name=node,
        priority=priority,
        role=role,
        preemptable=preemptable,
        creation=creation,
        pod=pod,
    )
    if add and isinstance(job, JobInfo):
        job.add_task(t)
    return t


def mk_job(
    name: str,
    queue: str = "default",
    *,
    min_available: int = 1,
    phase: str = "Inqueue",
    namespace: str = "default",
    priority: int = 0,
    min_resources: Resource | None = None,
    task_min: dict[str, int] | None = None,
    creation: float = 0.0,
) -> JobInfo:
    return JobInfo(
        uid=f"{namespace}/{name}",
        name=name,
        namespace=namespace,
        queue=queue,
        min_available=min_available,
        task_min_available=task_min,
        priority=priority,
        min_resources=min_resources,
        phase=phase,
        creation=creation,
    )


def add_tasks(
    job: JobInfo,
    n: int,
    cpu: str | None = "1",
    memory: str | None = "1Gi",
    *,
    status: TaskStatus = TaskStatus.PENDING,
    node: str = "",
    prefix: str | None = None,
    start: int = 0,
    **kw: Any,
) -> list[TaskInfo]:
    p = prefix if prefix is not None else job.name
    return [
        mk_task(job, f"{p}-{i}", cpu, memory, status=status, node=node, **kw) for i in range(start, start + n)
    ]


def mk_queue(
    name: str,
    weight: int = 1,
    *,
    capability: Resource | None = None,
    guarantee: Resource | None = None,
    priority: int = 0,
    state: str = "Open",
    creation: float = 0.0,
) -> QueueInfo:
    return QueueInfo(
        name,
        weight=weight,
        capability=capability,
        guarantee=guarantee,
        priority=priority,
        state=state,
        creation=creation,
    )


_ON_NODE = frozenset(
    {
        TaskStatus.ALLOCATED,
        TaskStatus.PIPELINED,
        TaskStatus.BINDING,
        TaskStatus.BOUND,
        TaskStatus.RUNNING,
        TaskStatus.RELEASING,
    }
)


def mk_snapshot(
    nodes: list[NodeInfo],
    jobs: list[JobInfo],
    queues: list[QueueInfo] | None = None,
    *,
    session_id: str = "session-0",
) -> ClusterSnapshot:
    """A snapshot; tasks with a node and an occupying status are put on their node (as the cache does)."""
    by_name = {n.name: n for n in nodes}
    for j in jobs:
        for t in j.tasks.values():
            if t.node_name and t.status in _ON_NODE and t.uid not in by_name[t.node_name].tasks:
                by_name[t.node_name].add_task(t)
    if queues is None:
        names = sorted({j.queue for j in jobs} | {"default"})
        queues = [mk_queue(n) for n in names]
    return ClusterSnapshot(
        nodes=nodes,
        jobs={j.uid: j for j in jobs},
        queues={q.name: q for q in queues},
        session_id=session_id,
    )


def mk_conf(
    actions: str, *tiers: list[Any], configurations: list[dict[str, Any]] | None = None
) -> SchedulerConf:
    """A conf parsed from YAML (so unset flags default to true).

    Each tier is a list of plugin names or plugin dicts ({"name": ..., "enableJobOrder": False, ...}).
    """
    data: dict[str, Any] = {
        "actions": actions,
        "tiers": [{"plugins": [p if isinstance(p, dict) else {"name": p} for p in tier]} for tier in tiers],
    }
    if configurations:
        data["configurations"] = configurations
    return parse_conf(yaml.safe_dump(data, sort_keys=False))


def open_session(snapshot: ClusterSnapshot, conf: SchedulerConf) -> Session:
    """A session with every configured plugin opened and the chains compiled (as run_session does)."""
    ssn = Session(snapshot, conf)
    for tier in conf.tiers:
        for opt in tier.plugins:
            factory = registry.PLUGINS.get(opt.name)
            if factory is None:
                continue
            plugin = factory(dict(opt.arguments))
            plugin.on_session_open(ssn)
            ssn.plugins.setdefault(opt.name, plugin)
    ssn.compile_chains()
    return ssn


def run_actions(ssn: Session, *names: str) -> None:
    for name in names:
        ssn.current_action = name
        registry.ACTIONS[name]().execute(ssn)
    ssn.current_action = ""


def run(snapshot: ClusterSnapshot, conf: SchedulerConf) -> SessionResult:
    return run_session(snapshot, conf, explain=True)


def task_of(ssn: Session, job_uid: str, name: str) -> TaskInfo:
    job = ssn.jobs[job_uid]
    for t in job.tasks.values():
        if t.name == name:
            return t
    raise KeyError(name)


def statuses(ssn: Session, job_uid: str) -> dict[str, TaskStatus]:
    return {t.name: t.status for t in ssn.jobs[job_uid].tasks.values()}


# ----------------------------------------------------------------------------- manifests
def priority_class_manifests(
    classes: tuple[tuple[str, int], ...] = (("low", 10), ("high", 100)),
) -> list[dict[str, Any]]:
    """PriorityClass manifests (the random-cluster tests' `low` 10 and `high` 100 by default)."""
    return [
        {"apiVersion": "scheduling.k8s.io/v1", "kind": "PriorityClass", "metadata": {"name": n}, "value": v}
        for n, v in classes
    ]


def queue_manifest(name: str, spec: dict[str, Any]) -> dict[str, Any]:
    """A Volcano Queue manifest."""
    return {
        "apiVersion": "scheduling.volcano.sh/v1beta1",
        "kind": "Queue",
        "metadata": {"name": name},
        "spec": spec,
    }


def first_fit(free: list[int], cpu: int, size: int) -> list[int]:
    """Places for up to `size` pods of `cpu` each, first fit over `free` (taken from it): the
    random-cluster builders' running jobs."""
    spots: list[int] = []
    for _ in range(size):
        spot = next((i for i, f in enumerate(free) if f >= cpu), None)
        if spot is None:
            break
        free[spot] -= cpu
        spots.append(spot)
    return spots
