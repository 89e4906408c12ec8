"""Kubernetes/Volcano YAML manifests -> the scheduler's model objects (a ClusterSnapshot).

`load_objects` reads files or directories; `build_snapshot` turns the objects into what
Volcano's scheduler cache would hold (pkg/scheduler/cache) after its controllers ran:

* Pod -> TaskInfo as api.NewTaskInfo: request = sum of containers, max with every init
  container (restartable "sidecar" init containers add to the running sum), pod-level
  requests, + overhead, + `pods: 1`; status from phase/nodeName/deletionTimestamp (an
  absent phase is Pending, what the API server stores on create); priority = spec.priority,
  else the value of the pod's PriorityClass (the Priority admission plugin), else 1, then
  the `volcano.sh/task-priority` annotation if it parses as int32; role and preemptable
  from annotation, then label.  Container requests default to limits per resource, as the
  API server's defaulting does.  Pods of other schedulers are kept (in `other_tasks`) only
  when bound to a node; they join no job.  Bound, not finished tasks occupy their node.
* A pod of ours without `scheduling.k8s.io/group-name` gets the PodGroup Volcano's
  PodGroup controller creates: `podgroup-<controller owner uid, else pod uid>`, minMember 1,
  queue from the pod's `scheduling.volcano.sh/queue-name` annotation, priorityClassName and
  preemptable annotation/label of the pod, minResources = the pod's quota usage, phase
  Pending (owners' `group-min-member` annotations are not read: owners are not loaded).
  An explicit PodGroup of that name wins.
* Pods naming a PodGroup that is not loaded stay in a JobInfo with has_pod_group=False.
* PodGroup -> JobInfo("<ns>/<name>"): minMember absent = 0 (the CRD has no default),
  empty queue -> default queue, priority = PriorityClass value, else the globalDefault
  class's value, else 0.  Queue: weight default 1, state default Open.  `root` (weight 1,
  reclaimable false) and the default queue (weight 1, reclaimable true) are created when
  missing, as cache.newDefaultAndRootQueue does.  The built-in PriorityClasses
  system-cluster-critical and system-node-critical exist unless given.
* batch.volcano.sh Job -> what the mutating webhook and the job controller create:
  task names default `default<i>`, task minAvailable default replicas (or
  minPartitions*partitionSize), job minAvailable default = sum of task minAvailable,
  queue default = the default queue, schedulerName default = first scheduler name; the
  PodGroup `<job>-<metadata.uid>` (the plain job name, the controller's legacy name, when the
  manifest has no uid) with the job's labels/annotations, minTaskMember, priorityClassName
  and minResources from calcPGMinResources (template requests, not defaulted: the CRD's pod
  template is not defaulted); pods `<job>-<task>-<index>` (uid `<ns>-<pod>`), Pending and
  unbound, with the controller's labels and annotations.  Simplified: the controller only
  creates pods once the PodGroup leaves Pending (here they exist at once, which gang and
  allocate treat alike); Job status, policies, plugins, volumes, dependsOn and job
  forwarding are ignored; tasks with equal priority keep their order (Go's unstable sort
  does the same for up to 12 tasks).
Not modelled: in-place resize status, node oversubscription, owners' annotations,
topologySpreadConstraints (PodFacts has no field for them).
"""

from __future__ import annotations

import json
import re
from collections.abc import Callable, Iterable, Iterator, Mapping, Sequence
from dataclasses import dataclass, field, replace
from datetime import UTC, date, datetime
from fractions import Fraction
from pathlib import Path
from typing import Any, NoReturn, TypeVar

import yaml

from daemon.scheduler.framework.conf import GO_PARSE_BOOL
from daemon.scheduler.model.devices import pod_extended_resources
from daemon.scheduler.model.job import Condition, JobInfo
from daemon.scheduler.model.node import NodeFacts, NodeInfo
from daemon.scheduler.model.quantity import QuantityError, parse_quantity
from daemon.scheduler.model.queue import (
    DEFAULT_QUEUE,
    QUEUE_OPEN,
    ROOT_QUEUE,
    NamespaceInfo,
    NodeGroupAffinity,
    PodDisruptionBudgetInfo,
    PriorityClassInfo,
    QueueInfo,
    ResourceQuotaInfo,
)
from daemon.scheduler.model.resources import PODS, Resource
from daemon.scheduler.model.snapshot import ClusterSnapshot
from daemon.scheduler.model.task import (
    COMPLETED_STATUSES,
    HostPort,
    PodFacts,
    Taint,
    TaskInfo,
    Toleration,
    status_from_pod,
)

__all__ = [
    "SUPPORTED_KINDS",
    "ManifestError",
    "ObjectDecoder",
    "build_snapshot",
    "expand_job",
    "load_objects",
    "load_snapshot",
]

Obj = dict[str, Any]
T = TypeVar("T")

GROUP_NAME_KEY = "scheduling.k8s.io/group-name"
QUEUE_NAME_ANNOTATION = "scheduling.volcano.sh/queue-name"
TASK_SPEC_KEY = "volcano.sh/task-spec"
TASK_INDEX_KEY = "volcano.sh/task-index"
JOB_NAME_KEY = "volcano.sh/job-name"
JOB_NAMESPACE_KEY = "volcano.sh/job-namespace"
JOB_QUEUE_KEY = "volcano.sh/queue-name"
PREEMPTABLE_KEY = "volcano.sh/preemptable"
TASK_PRIORITY_KEY = "volcano.sh/task-priority"
COOLDOWN_KEY = "volcano.sh/cooldown-time"
REVOCABLE_ZONE_KEY = "volcano.sh/revocable-zone"
JDB_MIN_AVAILABLE = "volcano.sh/jdb-min-available"
JDB_MAX_UNAVAILABLE = "volcano.sh/jdb-max-unavailable"
DEFAULT_SCHEDULER = "default-scheduler"

# (API group, kind) -> (apiVersion shown in messages, namespaced).
SUPPORTED_KINDS: dict[tuple[str, str], tuple[str, bool]] = {
    ("", "Node"): ("v1", False),
    ("", "Pod"): ("v1", True),
    ("", "Namespace"): ("v1", False),
    ("", "ResourceQuota"): ("v1", True),
    ("policy", "PodDisruptionBudget"): ("policy/v1", True),
    ("scheduling.k8s.io", "PriorityClass"): ("scheduling.k8s.io/v1", False),
    ("scheduling.volcano.sh", "Queue"): ("scheduling.volcano.sh/v1beta1", False),
    ("scheduling.volcano.sh", "PodGroup"): ("scheduling.volcano.sh/v1beta1", True),
    ("batch.volcano.sh", "Job"): ("batch.volcano.sh/v1alpha1", True),
}
_KIND_GROUPS = {kind: group for group, kind in SUPPORTED_KINDS}
BUILTIN_PRIORITY_CLASSES = (
    PriorityClassInfo("system-cluster-critical", 2000000000, False, "PreemptLowerPriority"),
    PriorityClassInfo("system-node-critical", 2000001000, False, "PreemptLowerPriority"),
)
QUEUE_STATES = ("Open", "Closed", "Closing", "Unknown")
PODGROUP_PHASES = ("Pending", "Running", "Unknown", "Inqueue", "Completed")
INT32_MIN, INT32_MAX = -(1 << 31), (1 << 31) - 1
_INT_RE = re.compile(r"[+-]?[0-9]+", re.ASCII)
_GO_BOOLS = GO_PARSE_BOOL  # strconv.ParseBool
_MANIFEST_SUFFIXES = (".yaml", ".yml", ".json")
_NANO = 10**9


class ManifestError(ValueError):
    """Bad input; the message names the file, the document (0-based), the object and the field."""

    def __init__(
        self, file: str, reason: str, *, document: int | None = None, obj: str = "", field: str = ""
    ) -> None:
        self.file = file
        self.document = document
        self.obj = obj
        self.field = field
        self.reason = reason
        where = file
        if document is not None:
            where += f": document {document}"
            if obj:
                where += f" ({obj})"
        if field:
            where += f": {field}"
        super().__init__(f"{where}: {reason}")


# =============================================================================================
# loading


def load_objects(path: str | Path) -> list[tuple[str, int, Obj]]:
    """(file, document index, object) for a manifest file or every *.yaml/*.yml/*.json under a directory.

    Directories are walked recursively in sorted path order, skipping hidden entries.  Empty
    documents are skipped; `kind: List` (and typed lists such as PodList) are flattened, the
    items keeping their list's document index.
    """
    p = Path(path)
    if p.is_dir():
        files = sorted(
            (
                f
                for f in p.rglob("*")
                if f.suffix in _MANIFEST_SUFFIXES
                and f.is_file()
                and not any(part.startswith(".") for part in f.relative_to(p).parts)
            ),
            key=lambda f: f.relative_to(p).as_posix(),
        )
    elif p.is_file():
        files = [p]
    else:
        raise ManifestError(str(p), "no such file or directory")
    out: list[tuple[str, int, Obj]] = []
    for f in files:
        name = str(f)
        for index, doc in _read_documents(f, name):
            if doc is None:
                continue
            out.extend((name, index, o) for o in _flatten(name, index, doc))
    return out


def load_snapshot(
    path: str | Path, *, scheduler_names: Sequence[str] = ("volcano",), default_queue: str = DEFAULT_QUEUE
) -> ClusterSnapshot:
    """build_snapshot(load_objects(path))."""
    return build_snapshot(load_objects(path), scheduler_names=scheduler_names, default_queue=default_queue)


def _read_documents(f: Path, name: str) -> Iterator[tuple[int, Any]]:
    try:
        text = f.read_text(encoding="utf-8")
    except (OSError, UnicodeDecodeError) as e:
        raise ManifestError(name, f"cannot read: {e}") from e
    if f.suffix == ".json":
        try:
            yield 0, json.loads(text) if text.strip() else None
        except json.JSONDecodeError as e:
            raise ManifestError(name, f"line {e.lineno}, column {e.colno}: JSON syntax error: {e.msg}") from e
        return
    loader: Any = getattr(yaml, "CSafeLoader", yaml.SafeLoader)
    count = 0
    try:
        for doc in yaml.load_all(text, Loader=loader):
            yield count, doc
            count += 1
    except yaml.YAMLError as e:
        mark = getattr(e, "problem_mark", None) or getattr(e, "context_mark", None)
        where = f"line {mark.line + 1}, column {mark.column + 1}: " if mark is not None else ""
        problem = getattr(e, "problem", None) or str(e)
        raise ManifestError(name, f"{where}YAML syntax error: {problem}", document=count) from e


def _flatten(file: str, index: int, doc: Any) -> list[Obj]:
    """Objects of one document: itself, or the items of a List / <Kind>List / bare sequence."""
    kind = api = path = ""
    if isinstance(doc, list):
        items: Any = doc
    elif isinstance(doc, dict):
        list_kind = doc.get("kind")
        if not (isinstance(list_kind, str) and list_kind.endswith("List") and "items" in doc):
            return [doc]
        items = doc.get("items") or []
        api_version = doc.get("apiVersion")
        api = api_version if isinstance(api_version, str) else ""
        kind = "" if list_kind == "List" else list_kind[: -len("List")]
        path = "items"
        if not isinstance(items, list):
            raise ManifestError(file, "expected a list", document=index, field="items")
    else:
        raise ManifestError(file, f"expected a mapping (an object), got {_type_name(doc)}", document=index)
    out: list[Obj] = []
    for i, item in enumerate(items):
        if item is None:
            continue
        if not isinstance(item, dict):
            raise ManifestError(
                file,
                f"expected a mapping (an object), got {_type_name(item)}",
                document=index,
                field=f"{path}[{i}]",
            )
        if kind and "kind" not in item:
            item = {"apiVersion": api, "kind": kind, **item}
        out.extend(
            _flatten(file, index, item)
            if isinstance(item.get("kind"), str) and item["kind"].endswith("List")
            else [item]
        )
    return out


# =============================================================================================
# typed access with error paths


def _type_name(v: Any) -> str:
    if v is None:
        return "null"
    if isinstance(v, bool):
        return "a boolean"
    if isinstance(v, int):
        return "an integer"
    if isinstance(v, float):
        return "a number"
    if isinstance(v, str):
        return "a string"
    if isinstance(v, dict):
        return "a mapping"
    if isinstance(v, list):
        return "a list"
    return type(v).__name__


def _show(v: Any) -> str:
    if isinstance(v, str):
        return json.dumps(v)
    if isinstance(v, bool):
        return "true" if v else "false"
    return str(v)


def _join(path: str, key: str | int) -> str:
    if isinstance(key, int):
        return f"{path}[{key}]"
    return f"{path}.{key}" if path else key


class _Doc:
    """One source document (file, index, object label) and checked accessors raising ManifestError."""

    __slots__ = ("file", "index", "label")

    def __init__(self, file: str, index: int, label: str = "") -> None:
        self.file = file
        self.index = index
        self.label = label

    def fail(self, path: str, reason: str) -> NoReturn:
        raise ManifestError(self.file, reason, document=self.index, obj=self.label, field=path)

    def where(self) -> str:
        return f"{self.file} document {self.index}"

    def mapping(self, v: Any, path: str) -> Obj:
        if v is None:
            return {}
        if not isinstance(v, dict):
            self.fail(path, f"expected a mapping, got {_type_name(v)}")
        for k in v:
            if not isinstance(k, str):
                self.fail(path, f"keys must be strings, got {_type_name(k)} {_show(k)}")
        return v

    def seq(self, v: Any, path: str) -> list[Any]:
        if v is None:
            return []
        if not isinstance(v, list):
            self.fail(path, f"expected a list, got {_type_name(v)}")
        return v

    def string(self, v: Any, path: str, default: str = "") -> str:
        if v is None:
            return default
        if isinstance(v, str):
            return v
        if isinstance(v, int) and not isinstance(v, bool):
            return str(v)
        self.fail(path, f"expected a string, got {_type_name(v)}")

    def integer(self, v: Any, path: str, default: int, lo: int = INT32_MIN, hi: int = INT32_MAX) -> int:
        if v is None:
            return default
        if isinstance(v, float) and v.is_integer():
            v = int(v)
        if not isinstance(v, int) or isinstance(v, bool):
            self.fail(path, f"expected an integer, got {_type_name(v)} {_show(v)}")
        if not lo <= v <= hi:
            self.fail(path, f"{v} is out of range [{lo}, {hi}]")
        return v

    def boolean(self, v: Any, path: str) -> bool | None:
        if v is None or isinstance(v, bool):
            return v
        self.fail(path, f"expected true or false, got {_type_name(v)} {_show(v)}")

    def str_map(self, v: Any, path: str) -> dict[str, str]:
        """Labels, annotations, selectors: scalar values become strings (YAML `true` -> "true")."""
        m = self.mapping(v, path)
        out: dict[str, str] = {}
        for k in sorted(m):
            val = m[k]
            if isinstance(val, str):
                out[k] = val
            elif isinstance(val, bool):
                out[k] = "true" if val else "false"
            elif isinstance(val, int | float):
                out[k] = str(val)
            elif val is None:
                out[k] = ""
            else:
                self.fail(_join(path, k), f"expected a string, got {_type_name(val)}")
        return out

    def quantities(self, v: Any, path: str) -> dict[str, Fraction]:
        """A ResourceList: name -> exact non-negative value."""
        m = self.mapping(v, path)
        out: dict[str, Fraction] = {}
        for k in sorted(m):
            q = m[k]
            try:
                if isinstance(q, bool) or not isinstance(q, str | int | float):
                    raise QuantityError(q, f"expected a quantity string or number, got {_type_name(q)}")
                value = parse_quantity(q)
            except QuantityError as e:
                self.fail(_join(path, k), f"bad quantity {_show(q)}: {e.reason}")
            if value < 0:
                self.fail(_join(path, k), f"bad quantity {_show(q)}: must not be negative")
            out[k] = value
        return out

    def resource(self, v: Any, path: str) -> Resource | None:
        """Resource of a ResourceList, None when absent or empty (Go's len(list) == 0)."""
        q = self.quantities(v, path)
        return _to_resource(q) if q else None

    def timestamp(self, v: Any, path: str) -> float:
        if v is None:
            return 0.0
        if isinstance(v, datetime):
            dt = v
        elif isinstance(v, date):
            dt = datetime(v.year, v.month, v.day)
        elif isinstance(v, str):
            try:
                dt = datetime.fromisoformat(v)
            except ValueError:
                self.fail(path, f"bad timestamp {_show(v)}: expected RFC 3339 such as 2024-01-02T03:04:05Z")
        else:
            self.fail(path, f"expected an RFC 3339 timestamp, got {_type_name(v)}")
        if dt.tzinfo is None:
            dt = dt.replace(tzinfo=UTC)
        return dt.timestamp()


def _to_resource(q: Mapping[str, Fraction]) -> Resource:
    """Resource.from_resource_list over exact values (sums of parsed quantities are whole nanos)."""
    text: dict[str, str] = {}
    for name, value in q.items():
        nanos = value * _NANO
        n = -(-nanos.numerator // nanos.denominator)
        text[name] = f"{n // _NANO}.{n % _NANO:09d}"
    return Resource.from_resource_list(text)


def _go_bool(value: str) -> bool | None:
    return _GO_BOOLS.get(value)


def _preemptable(annotations: Mapping[str, str], labels: Mapping[str, str], default: bool) -> bool:
    """GetPodPreemptable / extractPreemptable: annotation, then label; unparsable -> false."""
    for source in (annotations, labels):
        if PREEMPTABLE_KEY in source:
            return _go_bool(source[PREEMPTABLE_KEY]) is True
    return default


# =============================================================================================
# pod requests (api/pod_info.go GetPodResourceRequest; k8s resource helpers PodRequests)


@dataclass(slots=True)
class _Requests:
    """Per-container request/limit lists of one pod spec, validated."""

    containers: list[tuple[dict[str, Fraction], dict[str, Fraction]]] = field(default_factory=list)
    inits: list[tuple[dict[str, Fraction], dict[str, Fraction], bool]] = field(default_factory=list)
    pod_level: dict[str, Fraction] = field(default_factory=dict)
    overhead: dict[str, Fraction] = field(default_factory=dict)


def _effective(
    requests: dict[str, Fraction], limits: dict[str, Fraction], defaulted: bool
) -> dict[str, Fraction]:
    if not defaulted or not limits:
        return requests
    out = dict(limits)
    out.update(requests)
    return out


def _aggregate(
    r: _Requests,
    defaulted: bool,
    new: Callable[[], T],
    conv: Callable[[dict[str, Fraction]], T],
    add: Callable[[T, T], object],
    setmax: Callable[[T, T], object],
) -> T:
    """Sum of containers, max with each init container; restartable init containers run alongside."""
    result = new()
    for req, lim in r.containers:
        add(result, conv(_effective(req, lim, defaulted)))
    restartable = new()
    init_max = new()
    for req, lim, sidecar in r.inits:
        cur = conv(_effective(req, lim, defaulted))
        if sidecar:
            add(result, cur)
            add(restartable, cur)
            cur = restartable
        else:
            tmp = new()
            add(tmp, cur)
            add(tmp, restartable)
            cur = tmp
        setmax(init_max, cur)
    setmax(result, init_max)
    return result


def _pod_level_supported(name: str) -> bool:
    return name in ("cpu", "memory") or name.startswith("hugepages-")


def _volcano_request(r: _Requests) -> Resource:
    """GetPodResourceRequest: per-container milli values, + pods 1, pod-level override, + overhead."""
    res = _aggregate(r, True, Resource, _to_resource, Resource.add, Resource.set_max_resource)
    res.scalars[PODS] = res.scalars.get(PODS, 0) + 1
    if r.pod_level:
        level = _to_resource(r.pod_level)
        for name in sorted(r.pod_level):
            if _pod_level_supported(name):
                res.set(name, level.get(name))
    if r.overhead:
        res.add(_to_resource(r.overhead))
    return res


def _empty_list() -> dict[str, Fraction]:
    return {}


def _add_list(a: dict[str, Fraction], b: dict[str, Fraction]) -> None:
    for k, v in b.items():
        a[k] = a.get(k, Fraction(0)) + v


def _max_list(a: dict[str, Fraction], b: dict[str, Fraction]) -> None:
    for k, v in b.items():
        if k not in a or v > a[k]:
            a[k] = v


def _quota_usage(r: _Requests, defaulted: bool) -> dict[str, Fraction]:
    """util.GetPodQuotaUsage as the controllers read it: PodRequests (exact) + pods 1."""
    usage = _aggregate(r, defaulted, _empty_list, dict, _add_list, _max_list)
    for name in sorted(r.pod_level):
        if _pod_level_supported(name):
            usage[name] = r.pod_level[name]
    _add_list(usage, r.overhead)
    usage[PODS] = Fraction(1)
    return usage


def _times(usage: Mapping[str, Fraction], count: int) -> dict[str, Fraction]:
    return {k: v * count for k, v in usage.items()}


# =============================================================================================
# parsed records


@dataclass(slots=True)
class _PodSpec:
    """Everything read from a pod spec (shared by the replicas of a Volcano Job task)."""

    requests: _Requests
    scheduler_name: str
    node_name: str
    priority: int | None
    priority_class_name: str
    preemption_policy: str
    node_selector: dict[str, str]
    affinity: dict[str, Any]
    tolerations: tuple[Toleration, ...]
    host_ports: tuple[HostPort, ...]
    scheduling_gates: tuple[str, ...]
    images: tuple[str, ...]
    spread: tuple[dict[str, Any], ...] = ()


@dataclass(slots=True)
class _Pod:
    doc: _Doc
    name: str
    namespace: str
    uid: str
    labels: dict[str, str]
    annotations: dict[str, str]
    creation: float
    deleting: bool
    owner_uid: str
    spec: _PodSpec
    phase: str = "Pending"
    nominated: str = ""
    scheduled_time: float | None = None


@dataclass(slots=True)
class _JobTask:
    """One task of a batch.volcano.sh Job after the webhook's defaulting."""

    index: int
    name: str
    replicas: int
    min_available: int
    spec_path: str
    template_meta: Obj
    template_spec: Obj
    priority: int = 0


@dataclass(slots=True)
class _Group:
    doc: _Doc
    name: str
    namespace: str
    queue: str
    min_member: int
    min_task_member: dict[str, int]
    priority_class_name: str
    min_resources: Resource | None
    phase: str
    creation: float
    annotations: dict[str, str]
    labels: dict[str, str]
    status: Obj = field(default_factory=dict)


def _parse_pod_spec(d: _Doc, spec: Obj, path: str, scheduler_default: str) -> _PodSpec:
    reqs = _Requests()
    host_ports: list[HostPort] = []
    images: list[str] = []
    for section, is_init in (("initContainers", True), ("containers", False)):
        for i, c in enumerate(d.seq(spec.get(section), _join(path, section))):
            cp = _join(_join(path, section), i)
            c = d.mapping(c, cp)
            res = d.mapping(c.get("resources"), _join(cp, "resources"))
            req = d.quantities(res.get("requests"), _join(cp, "resources.requests"))
            lim = d.quantities(res.get("limits"), _join(cp, "resources.limits"))
            image = d.string(c.get("image"), _join(cp, "image"))
            if image:
                images.append(image)
            if is_init:
                policy = d.string(c.get("restartPolicy"), _join(cp, "restartPolicy"))
                reqs.inits.append((req, lim, policy == "Always"))
                continue
            reqs.containers.append((req, lim))
            for j, port in enumerate(d.seq(c.get("ports"), _join(cp, "ports"))):
                pp = _join(_join(cp, "ports"), j)
                port = d.mapping(port, pp)
                hp = d.integer(port.get("hostPort"), _join(pp, "hostPort"), 0, 0, 65535)
                if hp > 0:
                    host_ports.append(
                        HostPort(
                            hp,
                            d.string(port.get("protocol"), _join(pp, "protocol"), "TCP") or "TCP",
                            d.string(port.get("hostIP"), _join(pp, "hostIP"), "0.0.0.0") or "0.0.0.0",
                        )
                    )
    pod_res = d.mapping(spec.get("resources"), _join(path, "resources"))
    reqs.pod_level = d.quantities(pod_res.get("requests"), _join(path, "resources.requests"))
    d.quantities(pod_res.get("limits"), _join(path, "resources.limits"))
    reqs.overhead = d.quantities(spec.get("overhead"), _join(path, "overhead"))
    tolerations: list[Toleration] = []
    for i, t in enumerate(d.seq(spec.get("tolerations"), _join(path, "tolerations"))):
        tp = _join(_join(path, "tolerations"), i)
        t = d.mapping(t, tp)
        tolerations.append(
            Toleration(
                d.string(t.get("key"), _join(tp, "key")),
                d.string(t.get("operator"), _join(tp, "operator"), "Equal") or "Equal",
                d.string(t.get("value"), _join(tp, "value")),
                d.string(t.get("effect"), _join(tp, "effect")),
            )
        )
    gates: list[str] = []
    for i, g in enumerate(d.seq(spec.get("schedulingGates"), _join(path, "schedulingGates"))):
        g = d.mapping(g, _join(_join(path, "schedulingGates"), i))
        gates.append(d.string(g.get("name"), _join(_join(path, "schedulingGates"), i) + ".name"))
    prio = spec.get("priority")
    return _PodSpec(
        requests=reqs,
        scheduler_name=d.string(spec.get("schedulerName"), _join(path, "schedulerName")) or scheduler_default,
        node_name=d.string(spec.get("nodeName"), _join(path, "nodeName")),
        priority=None if prio is None else d.integer(prio, _join(path, "priority"), 0),
        priority_class_name=d.string(spec.get("priorityClassName"), _join(path, "priorityClassName")),
        preemption_policy=d.string(spec.get("preemptionPolicy"), _join(path, "preemptionPolicy")),
        node_selector=d.str_map(spec.get("nodeSelector"), _join(path, "nodeSelector")),
        affinity=d.mapping(spec.get("affinity"), _join(path, "affinity")),
        tolerations=tuple(tolerations),
        host_ports=tuple(host_ports),
        scheduling_gates=tuple(gates),
        images=tuple(images),
        spread=tuple(
            d.mapping(c, _join(_join(path, "topologySpreadConstraints"), i))
            for i, c in enumerate(
                d.seq(spec.get("topologySpreadConstraints"), _join(path, "topologySpreadConstraints"))
            )
        ),
    )


def _pod_scheduled_time(d: _Doc, status: Obj) -> float | None:
    """lastTransitionTime of the first `PodScheduled` condition whose status is True (else None)."""
    for i, c in enumerate(d.seq(status.get("conditions"), "status.conditions")):
        cp = f"status.conditions[{i}]"
        c = d.mapping(c, cp)
        if d.string(c.get("type"), cp + ".type") == "PodScheduled" and (
            d.string(c.get("status"), cp + ".status") == "True"
        ):
            return d.timestamp(c.get("lastTransitionTime"), cp + ".lastTransitionTime")
    return None


def _controller_uid(d: _Doc, meta: Obj) -> str:
    for i, ref in enumerate(d.seq(meta.get("ownerReferences"), "metadata.ownerReferences")):
        rp = f"metadata.ownerReferences[{i}]"
        ref = d.mapping(ref, rp)
        if d.boolean(ref.get("controller"), rp + ".controller"):
            return d.string(ref.get("uid"), rp + ".uid")
    return ""


# =============================================================================================
# the builder


@dataclass(slots=True)
class _Entry:
    doc: _Doc
    group: str
    kind: str
    name: str
    namespace: str
    obj: Obj


class _Builder:
    def __init__(self, scheduler_names: Sequence[str], default_queue: str) -> None:
        self.scheduler_names = tuple(scheduler_names)
        self.default_queue = default_queue
        self.entries: list[_Entry] = []
        self.seen: dict[tuple[str, str, str], _Doc] = {}
        self.pcs: dict[str, PriorityClassInfo] = {}
        self.default_priority = 0
        self.pod_uids: dict[str, tuple[str, _Doc]] = {}

    # ------------------------------------------------------------------------- classify
    def classify(self, file: str, index: int, obj: Any) -> None:
        d = _Doc(file, index)
        if not isinstance(obj, dict):
            d.fail("", f"expected a mapping (an object), got {_type_name(obj)}")
        for o in _flatten(file, index, obj):
            self._classify_one(d, o)

    def _classify_one(self, d0: _Doc, obj: Obj) -> None:
        d = _Doc(d0.file, d0.index)
        kind = d.string(obj.get("kind"), "kind")
        api = d.string(obj.get("apiVersion"), "apiVersion")
        if not kind:
            d.fail("kind", "required")
        group = api.rsplit("/", 1)[0] if "/" in api else ""
        if not api:
            group = _KIND_GROUPS.get(kind, "")
        if (group, kind) not in SUPPORTED_KINDS:
            shown = f"{api} {kind}" if api else kind
            supported = ", ".join(f"{v[0]} {k[1]}" for k, v in SUPPORTED_KINDS.items())
            d.fail("kind", f"unsupported kind {_show(shown)}; supported kinds: {supported}")
        namespaced = SUPPORTED_KINDS[(group, kind)][1]
        meta = d.mapping(obj.get("metadata"), "metadata")
        name = d.string(meta.get("name"), "metadata.name")
        d.label = kind
        if not name:
            d.fail("metadata.name", "required")
        ns = (d.string(meta.get("namespace"), "metadata.namespace") or "default") if namespaced else ""
        d.label = f"{kind} {ns}/{name}" if namespaced else f"{kind} {name}"
        self._claim(d, "metadata.name", kind, ns, name)
        self.entries.append(_Entry(d, group, kind, name, ns, obj))

    def _claim(self, d: _Doc, path: str, kind: str, ns: str, name: str) -> None:
        key = (kind, ns, name)
        first = self.seen.get(key)
        if first is not None:
            shown = f"{ns}/{name}" if ns else name
            d.fail(path, f"duplicate {kind} {shown} (first in {first.where()})")
        self.seen[key] = d

    # ------------------------------------------------------------------------- build
    def build(self) -> ClusterSnapshot:
        snap = ClusterSnapshot()
        by_kind: dict[str, list[_Entry]] = {}
        for e in self.entries:
            by_kind.setdefault(e.kind, []).append(e)
        for e in by_kind.get("PriorityClass", []):
            self._priority_class(e)
        for pc in BUILTIN_PRIORITY_CLASSES:
            self.pcs.setdefault(pc.name, pc)
        snap.priority_classes = self.pcs
        for e in by_kind.get("Namespace", []):
            snap.namespaces[e.name] = NamespaceInfo(
                e.name,
                e.doc.str_map(
                    e.doc.mapping(e.obj.get("metadata"), "metadata").get("labels"), "metadata.labels"
                ),
            )
        for e in by_kind.get("ResourceQuota", []):
            quota = self._quota(e)
            snap.namespaces.setdefault(e.namespace, NamespaceInfo(e.namespace)).quotas.append(quota)
        for e in by_kind.get("PodDisruptionBudget", []):
            pdb = self._pdb(e)
            snap.namespaces.setdefault(e.namespace, NamespaceInfo(e.namespace)).pdbs.append(pdb)
        for e in by_kind.get("Queue", []):
            snap.queues[e.name] = self._queue(e)
        if ROOT_QUEUE not in snap.queues:
            snap.queues[ROOT_QUEUE] = QueueInfo(ROOT_QUEUE, weight=1, reclaimable=False, state=QUEUE_OPEN)
        if self.default_queue not in snap.queues:
            snap.queues[self.default_queue] = QueueInfo(
                self.default_queue, weight=1, reclaimable=True, state=QUEUE_OPEN
            )
        for e in by_kind.get("Node", []):
            snap.nodes.append(self._node(e))

        groups: dict[str, _Group] = {}
        pods: list[_Pod] = []
        for e in self.entries:
            if e.kind == "PodGroup":
                groups[f"{e.namespace}/{e.name}"] = self._podgroup(e)
            elif e.kind == "Pod":
                pods.append(self._pod(e))
            elif e.kind == "Job":
                self._expand_job(e, groups, pods)
        self._place(snap, groups, pods)
        return snap

    # ------------------------------------------------------------------------- simple kinds
    def _priority_class(self, e: _Entry) -> None:
        d, o = e.doc, e.obj
        if "value" not in o:
            d.fail("value", "required")
        pc = PriorityClassInfo(
            e.name,
            d.integer(o.get("value"), "value", 0),
            bool(d.boolean(o.get("globalDefault"), "globalDefault")),
            d.string(o.get("preemptionPolicy"), "preemptionPolicy") or "PreemptLowerPriority",
        )
        self.pcs[e.name] = pc
        if pc.global_default:
            # cache.addPriorityClass: the last globalDefault class seen wins.
            self.default_priority = pc.value

    def _quota(self, e: _Entry) -> ResourceQuotaInfo:
        d, o = e.doc, e.obj
        spec = d.mapping(o.get("spec"), "spec")
        status = d.mapping(o.get("status"), "status")
        spec_hard = _quantity_text(d, spec.get("hard"), "spec.hard")
        hard = _quantity_text(d, status.get("hard"), "status.hard") if "hard" in status else spec_hard
        return ResourceQuotaInfo(
            e.name, e.namespace, hard, _quantity_text(d, status.get("used"), "status.used")
        )

    def _pdb(self, e: _Entry) -> PodDisruptionBudgetInfo:
        """policy/v1 PodDisruptionBudget: spec.selector (raw), status.disruptionsAllowed and disruptedPods."""
        d, o = e.doc, e.obj
        spec = d.mapping(o.get("spec"), "spec")
        status = d.mapping(o.get("status"), "status")
        selector = spec.get("selector")
        return PodDisruptionBudgetInfo(
            name=e.name,
            namespace=e.namespace,
            selector=None if selector is None else d.mapping(selector, "spec.selector"),
            disruptions_allowed=d.integer(status.get("disruptionsAllowed"), "status.disruptionsAllowed", 0),
            disrupted_pods=frozenset(d.mapping(status.get("disruptedPods"), "status.disruptedPods")),
        )

    def _group_affinity(self, d: _Doc, spec: Obj) -> NodeGroupAffinity | None:
        """Queue spec.affinity: nodeGroupAffinity / nodeGroupAntiAffinity name lists (None when absent)."""
        if spec.get("affinity") is None:
            return None
        aff = d.mapping(spec.get("affinity"), "spec.affinity")
        lists: list[tuple[str, ...]] = []
        for section in ("nodeGroupAffinity", "nodeGroupAntiAffinity"):
            sp = f"spec.affinity.{section}"
            sec = d.mapping(aff.get(section), sp)
            for key in (
                "requiredDuringSchedulingIgnoredDuringExecution",
                "preferredDuringSchedulingIgnoredDuringExecution",
            ):
                kp = f"{sp}.{key}"
                lists.append(tuple(d.string(v, f"{kp}[{i}]") for i, v in enumerate(d.seq(sec.get(key), kp))))
        return NodeGroupAffinity(lists[0], lists[1], lists[2], lists[3])

    def _queue(self, e: _Entry) -> QueueInfo:
        d, o = e.doc, e.obj
        meta = d.mapping(o.get("metadata"), "metadata")
        spec = d.mapping(o.get("spec"), "spec")
        status = d.mapping(o.get("status"), "status")
        guarantee = d.mapping(spec.get("guarantee"), "spec.guarantee")
        state = d.string(status.get("state"), "status.state") or QUEUE_OPEN
        if state not in QUEUE_STATES:
            d.fail("status.state", f"unknown state {_show(state)}; expected one of {', '.join(QUEUE_STATES)}")
        return QueueInfo(
            name=e.name,
            weight=d.integer(spec.get("weight"), "spec.weight", 1, 0, 65535),
            capability=d.resource(spec.get("capability"), "spec.capability"),
            deserved=d.resource(spec.get("deserved"), "spec.deserved"),
            guarantee=d.resource(guarantee.get("resource"), "spec.guarantee.resource"),
            reclaimable=d.boolean(spec.get("reclaimable"), "spec.reclaimable"),
            parent=d.string(spec.get("parent"), "spec.parent"),
            priority=d.integer(spec.get("priority"), "spec.priority", 0, 0),
            state=state,
            creation=d.timestamp(meta.get("creationTimestamp"), "metadata.creationTimestamp"),
            annotations=d.str_map(meta.get("annotations"), "metadata.annotations"),
            affinity=self._group_affinity(d, spec),
        )

    def _node(self, e: _Entry) -> NodeInfo:
        d, o = e.doc, e.obj
        meta = d.mapping(o.get("metadata"), "metadata")
        spec = d.mapping(o.get("spec"), "spec")
        status = d.mapping(o.get("status"), "status")
        capacity = d.quantities(status.get("capacity"), "status.capacity")
        allocatable = (
            d.quantities(status.get("allocatable"), "status.allocatable")
            if status.get("allocatable") is not None
            else capacity
        )
        taints: list[Taint] = []
        for i, t in enumerate(d.seq(spec.get("taints"), "spec.taints")):
            tp = f"spec.taints[{i}]"
            t = d.mapping(t, tp)
            key = d.string(t.get("key"), tp + ".key")
            if not key:
                d.fail(tp + ".key", "required")
            taints.append(
                Taint(key, d.string(t.get("value"), tp + ".value"), d.string(t.get("effect"), tp + ".effect"))
            )
        images: dict[str, int] = {}
        for i, im in enumerate(d.seq(status.get("images"), "status.images")):
            ip = f"status.images[{i}]"
            im = d.mapping(im, ip)
            size = d.integer(im.get("sizeBytes"), ip + ".sizeBytes", 0, 0, 1 << 63)
            for j, n in enumerate(d.seq(im.get("names"), ip + ".names")):
                images[d.string(n, f"{ip}.names[{j}]")] = size
        facts = NodeFacts(
            labels=d.str_map(meta.get("labels"), "metadata.labels"),
            annotations=d.str_map(meta.get("annotations"), "metadata.annotations"),
            taints=tuple(taints),
            unschedulable=bool(d.boolean(spec.get("unschedulable"), "spec.unschedulable")),
            images=images,
        )
        alloc = _to_resource(allocatable)
        cap = _to_resource(capacity) if capacity else alloc.clone()
        return NodeInfo(e.name, alloc, cap, facts)

    # ------------------------------------------------------------------------- pod groups
    def _podgroup(self, e: _Entry) -> _Group:
        d, o = e.doc, e.obj
        meta = d.mapping(o.get("metadata"), "metadata")
        spec = d.mapping(o.get("spec"), "spec")
        status = d.mapping(o.get("status"), "status")
        mtm = d.mapping(spec.get("minTaskMember"), "spec.minTaskMember")
        phase = d.string(status.get("phase"), "status.phase")
        if phase and phase not in PODGROUP_PHASES:
            d.fail(
                "status.phase", f"unknown phase {_show(phase)}; expected one of {', '.join(PODGROUP_PHASES)}"
            )
        return _Group(
            doc=d,
            name=e.name,
            namespace=e.namespace,
            queue=d.string(spec.get("queue"), "spec.queue"),
            min_member=d.integer(spec.get("minMember"), "spec.minMember", 0, 0),
            min_task_member={k: d.integer(mtm[k], f"spec.minTaskMember.{k}", 0, 0) for k in sorted(mtm)},
            priority_class_name=d.string(spec.get("priorityClassName"), "spec.priorityClassName"),
            min_resources=(
                None
                if spec.get("minResources") is None
                else _to_resource(d.quantities(spec.get("minResources"), "spec.minResources"))
            ),
            phase=phase,
            creation=d.timestamp(meta.get("creationTimestamp"), "metadata.creationTimestamp"),
            annotations=d.str_map(meta.get("annotations"), "metadata.annotations"),
            labels=d.str_map(meta.get("labels"), "metadata.labels"),
            status=status,
        )

    def _job_info(self, g: _Group) -> JobInfo:
        pc = self.pcs.get(g.priority_class_name)
        job = JobInfo(
            uid=f"{g.namespace}/{g.name}",
            name=g.name,
            namespace=g.namespace,
            queue=g.queue or self.default_queue,
            min_available=g.min_member,
            task_min_available=g.min_task_member,
            priority=pc.value if pc is not None else self.default_priority,
            priority_class_name=g.priority_class_name,
            min_resources=g.min_resources,
            phase=g.phase,
            creation=g.creation,
            annotations=g.annotations,
            preemptable=_preemptable(g.annotations, g.labels, False),
        )
        d, st = g.doc, g.status
        for i, c in enumerate(d.seq(st.get("conditions"), "status.conditions")):
            cp = f"status.conditions[{i}]"
            c = d.mapping(c, cp)
            job.status.conditions.append(
                Condition(
                    type=d.string(c.get("type"), cp + ".type"),
                    status=d.string(c.get("status"), cp + ".status", "True"),
                    reason=d.string(c.get("reason"), cp + ".reason"),
                    message=d.string(c.get("message"), cp + ".message"),
                    transition_id=d.string(c.get("transitionID"), cp + ".transitionID"),
                )
            )
        for key in ("running", "succeeded", "failed"):
            setattr(job.status, key, d.integer(st.get(key), f"status.{key}", 0, 0))
        return job

    # ------------------------------------------------------------------------- pods
    def _pod(self, e: _Entry) -> _Pod:
        d, o = e.doc, e.obj
        meta = d.mapping(o.get("metadata"), "metadata")
        spec = d.mapping(o.get("spec"), "spec")
        status = d.mapping(o.get("status"), "status")
        uid = d.string(meta.get("uid"), "metadata.uid") or f"{e.namespace}-{e.name}"
        self._claim_uid(d, uid, e.namespace, e.name)
        return _Pod(
            doc=d,
            name=e.name,
            namespace=e.namespace,
            uid=uid,
            labels=d.str_map(meta.get("labels"), "metadata.labels"),
            annotations=d.str_map(meta.get("annotations"), "metadata.annotations"),
            creation=d.timestamp(meta.get("creationTimestamp"), "metadata.creationTimestamp"),
            deleting=meta.get("deletionTimestamp") is not None,
            owner_uid=_controller_uid(d, meta),
            spec=_parse_pod_spec(d, spec, "spec", DEFAULT_SCHEDULER),
            phase=d.string(status.get("phase"), "status.phase") or "Pending",
            nominated=d.string(status.get("nominatedNodeName"), "status.nominatedNodeName"),
            scheduled_time=_pod_scheduled_time(d, status),
        )

    def _claim_uid(self, d: _Doc, uid: str, ns: str, name: str) -> None:
        first = self.pod_uids.get(uid)
        if first is not None:
            d.fail(
                "metadata.uid", f"duplicate pod uid {_show(uid)} (also Pod {first[0]} in {first[1].where()})"
            )
        self.pod_uids[uid] = (f"{ns}/{name}", d)

    def _task(self, p: _Pod, job: str) -> TaskInfo:
        s = p.spec
        pc = self.pcs.get(s.priority_class_name)
        priority = s.priority if s.priority is not None else (pc.value if pc is not None else 1)
        text = p.annotations.get(TASK_PRIORITY_KEY)
        if text is not None and _INT_RE.fullmatch(text) and INT32_MIN <= int(text) <= INT32_MAX:
            priority = int(text)
        role = p.annotations.get(TASK_SPEC_KEY) or p.labels.get(TASK_SPEC_KEY) or ""
        facts = PodFacts(
            labels=p.labels,
            annotations=p.annotations,
            node_selector=s.node_selector,
            affinity=s.affinity,
            tolerations=s.tolerations,
            host_ports=s.host_ports,
            priority_class_name=s.priority_class_name,
            preemption_policy=s.preemption_policy or (pc.preemption_policy if pc is not None else ""),
            scheduler_name=s.scheduler_name,
            nominated_node_name=p.nominated,
            scheduling_gates=s.scheduling_gates,
            images=s.images,
            topology_spread_constraints=s.spread,
            owner_uid=p.owner_uid,
            phase=p.phase,
            deleting=p.deleting,
            scheduled_time=p.scheduled_time,
            extended_resources=pod_extended_resources(s.requests.containers, s.requests.inits),
        )
        return TaskInfo(
            uid=p.uid,
            name=p.name,
            namespace=p.namespace,
            job=job,
            resreq=_volcano_request(s.requests),
            status=status_from_pod(p.phase, s.node_name, p.deleting),
            node_name=s.node_name,
            priority=priority,
            role=role,
            preemptable=_preemptable(p.annotations, p.labels, True),
            creation=p.creation,
            pod=facts,
            sch_gated=bool(s.scheduling_gates),
        )

    def _normal_pod_group(self, p: _Pod, name: str) -> _Group:
        """What the PodGroup controller (buildPodGroupFromPod) creates for a pod without a group."""
        annotations = {
            k: p.annotations[k]
            for k in (PREEMPTABLE_KEY, COOLDOWN_KEY, REVOCABLE_ZONE_KEY)
            if k in p.annotations
        }
        for k in (JDB_MIN_AVAILABLE, JDB_MAX_UNAVAILABLE):
            if k in p.annotations:
                annotations[k] = p.annotations[k]
                break
        labels = {k: p.labels[k] for k in (PREEMPTABLE_KEY, COOLDOWN_KEY) if k in p.labels}
        return _Group(
            doc=p.doc,
            name=name,
            namespace=p.namespace,
            queue=p.annotations.get(QUEUE_NAME_ANNOTATION, ""),
            min_member=1,
            min_task_member={},
            priority_class_name=p.spec.priority_class_name,
            min_resources=_to_resource(_quota_usage(p.spec.requests, True)),
            phase="Pending",
            creation=p.creation,
            annotations=annotations,
            labels=labels,
        )

    def _place(self, snap: ClusterSnapshot, groups: dict[str, _Group], pods: list[_Pod]) -> None:
        ours = set(self.scheduler_names)
        # Pods of ours without a group get the PodGroup controller's group (unless one exists).
        group_of: list[str] = []
        for p in pods:
            gname = p.annotations.get(GROUP_NAME_KEY, "")
            if not gname and p.spec.scheduler_name in ours:
                gname = "podgroup-" + (p.owner_uid or p.uid)
                key = f"{p.namespace}/{gname}"
                if key not in groups:
                    groups[key] = self._normal_pod_group(p, gname)
            group_of.append(f"{p.namespace}/{gname}" if gname else "")
        for key, g in groups.items():
            snap.jobs[key] = self._job_info(g)
        nodes = {n.name: n for n in snap.nodes}
        for p, job_id in zip(pods, group_of, strict=True):
            mine = p.spec.scheduler_name in ours
            if not mine and not p.spec.node_name:
                continue
            task = self._task(p, job_id)
            if task.node_name and task.status not in COMPLETED_STATUSES:
                node = nodes.get(task.node_name)
                if node is not None:
                    node.add_task(task)
            if not mine:
                snap.other_tasks.append(task)
                continue
            job = snap.jobs.get(job_id)
            if job is None:
                ns, _, name = job_id.partition("/")
                job = JobInfo(uid=job_id, name=name, namespace=ns, queue="", has_pod_group=False)
                snap.jobs[job_id] = job
            job.add_task(task)

    # ------------------------------------------------------------------------- Volcano Jobs
    def _expand_job(self, e: _Entry, groups: dict[str, _Group], pods: list[_Pod]) -> None:
        d, o = e.doc, e.obj
        meta = d.mapping(o.get("metadata"), "metadata")
        spec = d.mapping(o.get("spec"), "spec")
        labels = d.str_map(meta.get("labels"), "metadata.labels")
        annotations = d.str_map(meta.get("annotations"), "metadata.annotations")
        creation = d.timestamp(meta.get("creationTimestamp"), "metadata.creationTimestamp")
        job_uid = d.string(meta.get("uid"), "metadata.uid")
        queue = d.string(spec.get("queue"), "spec.queue") or self.default_queue
        scheduler = d.string(spec.get("schedulerName"), "spec.schedulerName") or (
            self.scheduler_names[0] if self.scheduler_names else "volcano"
        )
        job_pc = d.string(spec.get("priorityClassName"), "spec.priorityClassName")
        pg_name = f"{e.name}-{job_uid}" if job_uid else e.name
        tasks = d.seq(spec.get("tasks"), "spec.tasks")
        if not tasks:
            d.fail("spec.tasks", "no task specified in job spec")
        parsed: list[_JobTask] = []
        names: set[str] = set()
        for i, t in enumerate(tasks):
            tp = f"spec.tasks[{i}]"
            t = d.mapping(t, tp)
            name = d.string(t.get("name"), tp + ".name") or f"default{i}"
            if name in names:
                d.fail(tp + ".name", f"duplicated task name {_show(name)}")
            names.add(name)
            replicas = d.integer(t.get("replicas"), tp + ".replicas", 0, 0)
            partition = d.mapping(t.get("partitionPolicy"), tp + ".partitionPolicy")
            min_partitions = d.integer(
                partition.get("minPartitions"), tp + ".partitionPolicy.minPartitions", 0, 0
            )
            size = d.integer(partition.get("partitionSize"), tp + ".partitionPolicy.partitionSize", 0, 0)
            default_min = min_partitions * size if partition and min_partitions > 0 else replicas
            min_av = d.integer(t.get("minAvailable"), tp + ".minAvailable", default_min, 0)
            if min_av > replicas:
                d.fail(
                    tp + ".minAvailable", f"'minAvailable' ({min_av}) is greater than 'replicas' ({replicas})"
                )
            template = d.mapping(t.get("template"), tp + ".template")
            parsed.append(
                _JobTask(
                    i,
                    name,
                    replicas,
                    min_av,
                    tp + ".template.spec",
                    d.mapping(template.get("metadata"), tp + ".template.metadata"),
                    d.mapping(template.get("spec"), tp + ".template.spec"),
                )
            )
        total_replicas = sum(t.replicas for t in parsed)
        min_available = d.integer(spec.get("minAvailable"), "spec.minAvailable", 0, 0)
        if min_available == 0:
            min_available = sum(t.min_available for t in parsed)
        if min_available > total_replicas:
            d.fail(
                "spec.minAvailable",
                f"job 'minAvailable' ({min_available}) should not be greater than total replicas "
                f"in tasks ({total_replicas})",
            )

        specs: list[_PodSpec] = []
        for t in parsed:
            s = _parse_pod_spec(d, t.template_spec, t.spec_path, scheduler)
            pc = self.pcs.get(s.priority_class_name)
            t.priority = pc.value if pc is not None and s.priority_class_name else 0
            if not s.priority_class_name and job_pc:
                s.priority_class_name = job_pc
            specs.append(s)

        # calcPGMinResources (job_controller_actions.go), on the templates as written.
        order = sorted(range(len(parsed)), key=lambda i: -parsed[i].priority)
        usage = {i: _quota_usage(specs[i].requests, False) for i in order}
        min_req: dict[str, Fraction] = {}
        total_min = sum(t.min_available for t in parsed)
        if min_available < total_min:
            count = min_available
            for i in order:
                n = min(count, parsed[i].replicas)
                _add_list(min_req, _times(usage[i], n))
                if count <= parsed[i].replicas:
                    break
                count -= parsed[i].replicas
        else:
            pod_cnt = 0
            for i in order:
                valid = min(parsed[i].min_available, min_available - pod_cnt)
                _add_list(min_req, _times(usage[i], valid))
                pod_cnt += valid
                if pod_cnt >= min_available:
                    break
            left_cnt = min_available - pod_cnt
            for i in order if left_cnt > 0 else ():
                left = parsed[i].replicas - parsed[i].min_available
                if left == 0:
                    continue
                n = min(left, left_cnt)
                _add_list(min_req, _times(usage[i], n))
                left_cnt -= n
                if left_cnt <= 0:
                    break

        self._claim(d, "metadata.name", "PodGroup", e.namespace, pg_name)
        groups[f"{e.namespace}/{pg_name}"] = _Group(
            doc=d,
            name=pg_name,
            namespace=e.namespace,
            queue=queue,
            min_member=min_available,
            min_task_member={t.name: t.min_available for t in sorted(parsed, key=lambda t: t.name)},
            priority_class_name=job_pc,
            min_resources=_to_resource(min_req),
            phase="",
            creation=creation,
            annotations=annotations,
            labels=labels,
        )

        owner = job_uid or f"{e.namespace}-{e.name}"
        for t, s in zip(parsed, specs, strict=True):
            tmeta_path = f"spec.tasks[{t.index}].template.metadata"
            t_labels = d.str_map(t.template_meta.get("labels"), tmeta_path + ".labels")
            t_annotations = d.str_map(t.template_meta.get("annotations"), tmeta_path + ".annotations")
            for ix in range(t.replicas):
                pod_name = f"{e.name}-{t.name}-{ix}"
                pa = dict(t_annotations)
                pa.update(
                    {
                        TASK_INDEX_KEY: str(ix),
                        TASK_SPEC_KEY: t.name,
                        GROUP_NAME_KEY: pg_name,
                        JOB_NAME_KEY: e.name,
                        JOB_QUEUE_KEY: queue,
                        "volcano.sh/job-version": "0",
                        "volcano.sh/template-uid": f"{e.name}-{t.name}",
                        "volcano.sh/job-retry-count": "0",
                    }
                )
                for k in (PREEMPTABLE_KEY, COOLDOWN_KEY, REVOCABLE_ZONE_KEY):
                    if k in annotations:
                        pa[k] = annotations[k]
                for k in (JDB_MIN_AVAILABLE, JDB_MAX_UNAVAILABLE):
                    if k in annotations:
                        pa[k] = annotations[k]
                        break
                pl = dict(t_labels)
                pl.update(
                    {
                        TASK_INDEX_KEY: str(ix),
                        JOB_NAME_KEY: e.name,
                        TASK_SPEC_KEY: t.name,
                        JOB_NAMESPACE_KEY: e.namespace,
                        JOB_QUEUE_KEY: queue,
                    }
                )
                for k in (PREEMPTABLE_KEY, COOLDOWN_KEY):
                    if k in labels:
                        pl[k] = labels[k]
                self._claim(d, f"spec.tasks[{t.index}]", "Pod", e.namespace, pod_name)
                uid = f"{e.namespace}-{pod_name}"
                self._claim_uid(d, uid, e.namespace, pod_name)
                pods.append(
                    _Pod(
                        doc=d,
                        name=pod_name,
                        namespace=e.namespace,
                        uid=uid,
                        labels=dict(sorted(pl.items())),
                        annotations=dict(sorted(pa.items())),
                        creation=creation,
                        deleting=False,
                        owner_uid=owner,
                        spec=replace(s, node_name=""),
                    )
                )


def _quantity_text(d: _Doc, v: Any, path: str) -> dict[str, str]:
    """Validated quantities kept as the strings written (ResourceQuota hard/used)."""
    m = d.mapping(v, path)
    d.quantities(m, path)
    return {k: _show(m[k]) if not isinstance(m[k], str) else m[k] for k in sorted(m)}


def build_snapshot(
    objects: Iterable[tuple[str, int, Mapping[str, Any]]],
    *,
    scheduler_names: Sequence[str] = ("volcano",),
    default_queue: str = DEFAULT_QUEUE,
) -> ClusterSnapshot:
    """The snapshot Volcano's cache would hold for these objects (see the module notes).

    Iteration is in object order throughout; maps read from manifests are key-sorted.
    Raises ManifestError naming file, document, object and field on bad input.
    """
    b = _Builder(scheduler_names, default_queue)
    for file, index, obj in objects:
        b.classify(file, index, obj)
    return b.build()


def expand_job(
    file: str,
    index: int,
    job: Mapping[str, Any],
    *,
    priority_classes: Iterable[tuple[str, int, Mapping[str, Any]]] = (),
    scheduler_names: Sequence[str] = ("volcano",),
    default_queue: str = DEFAULT_QUEUE,
) -> list[Obj]:
    """One batch.volcano.sh Job as the manifests its controllers create: [PodGroup, pods...].

    The same expansion as build_snapshot's (names, defaulting, labels, annotations,
    minMember/minTaskMember/minResources); the pods get their task's template spec with
    schedulerName and priorityClassName filled in and a controller ownerReference to the Job.
    `priority_classes` (PriorityClass objects) order tasks for minResources, as in the cluster.
    """
    b = _Builder(scheduler_names, default_queue)
    for pc_file, pc_index, pc in priority_classes:
        b.classify(pc_file, pc_index, pc)
    for e in b.entries:
        if e.kind == "PriorityClass":
            b._priority_class(e)
    b.entries.clear()
    b._classify_one(_Doc(file, index), dict(job))
    e = b.entries[-1]
    if e.kind != "Job":
        e.doc.fail("kind", f"expected a batch.volcano.sh Job, got {_show(e.kind)}")
    groups: dict[str, _Group] = {}
    pods: list[_Pod] = []
    b._expand_job(e, groups, pods)
    meta = e.obj.get("metadata") or {}
    templates: dict[str, Obj] = {}
    for i, t in enumerate(e.obj["spec"]["tasks"]):
        templates[t.get("name") or f"default{i}"] = (t.get("template") or {}).get("spec") or {}
    owner = {
        "apiVersion": "batch.volcano.sh/v1alpha1",
        "kind": "Job",
        "name": e.name,
        "uid": meta.get("uid") or f"{e.namespace}-{e.name}",
        "controller": True,
    }
    created = {"creationTimestamp": meta["creationTimestamp"]} if "creationTimestamp" in meta else {}
    out: list[Obj] = []
    for g in groups.values():
        spec: Obj = {
            "minMember": g.min_member,
            "minTaskMember": dict(g.min_task_member),
            "queue": g.queue,
        }
        if g.priority_class_name:
            spec["priorityClassName"] = g.priority_class_name
        if g.min_resources is not None:
            spec["minResources"] = g.min_resources.to_quantities()
        out.append(
            {
                "apiVersion": "scheduling.volcano.sh/v1beta1",
                "kind": "PodGroup",
                "metadata": {
                    "name": g.name,
                    "namespace": g.namespace,
                    "labels": dict(g.labels),
                    "annotations": dict(g.annotations),
                    **created,
                    "ownerReferences": [dict(owner)],
                },
                "spec": spec,
            }
        )
    for p in pods:
        pod_spec = json.loads(json.dumps(templates[p.annotations[TASK_SPEC_KEY]], default=str))
        pod_spec.pop("nodeName", None)
        pod_spec["schedulerName"] = p.spec.scheduler_name
        if p.spec.priority_class_name:
            pod_spec["priorityClassName"] = p.spec.priority_class_name
        out.append(
            {
                "apiVersion": "v1",
                "kind": "Pod",
                "metadata": {
                    "name": p.name,
                    "namespace": p.namespace,
                    "uid": p.uid,
                    "labels": dict(p.labels),
                    "annotations": dict(p.annotations),
                    **created,
                    "ownerReferences": [dict(owner)],
                },
                "spec": pod_spec,
            }
        )
    return out


# =============================================================================================
# per-object decoding (the incremental projection in daemon/cache keeps these records)


class ObjectDecoder:
    """One manifest at a time with build_snapshot's rules, plus the assembly steps that read other objects.

    `pod`/`pod_group` return opaque parsed records (parse once, keep); `task`, `job_info`,
    `group_of` and `implicit_group` assemble them the way build_snapshot does, given the
    priority classes in force.  Errors are ManifestError naming `source` as the file.
    """

    __slots__ = ("_b",)

    def __init__(self, scheduler_names: Sequence[str] = ("volcano",), default_queue: str = DEFAULT_QUEUE):
        self._b = _Builder(scheduler_names, default_queue)

    @property
    def scheduler_names(self) -> tuple[str, ...]:
        return self._b.scheduler_names

    @property
    def default_queue(self) -> str:
        return self._b.default_queue

    def _entry(self, kind: str, namespace: str, name: str, obj: Any, source: str) -> _Entry:
        group = _KIND_GROUPS[kind]
        ns_label = f"{kind} {namespace}/{name}" if SUPPORTED_KINDS[(group, kind)][1] else f"{kind} {name}"
        d = _Doc(source, 0, ns_label)
        if not isinstance(obj, dict):
            d.fail("", f"expected a mapping (an object), got {_type_name(obj)}")
        d.mapping(obj.get("metadata"), "metadata")
        return _Entry(d, group, kind, name, namespace, obj)

    def node(self, name: str, obj: Any, *, source: str = "") -> NodeInfo:
        return self._b._node(self._entry("Node", "", name, obj, source))

    def queue(self, name: str, obj: Any, *, source: str = "") -> QueueInfo:
        return self._b._queue(self._entry("Queue", "", name, obj, source))

    def priority_class(self, name: str, obj: Any, *, source: str = "") -> PriorityClassInfo:
        b = _Builder(self._b.scheduler_names, self._b.default_queue)
        b._priority_class(self._entry("PriorityClass", "", name, obj, source))
        return b.pcs[name]

    def namespace(self, name: str, obj: Any, *, source: str = "") -> NamespaceInfo:
        e = self._entry("Namespace", "", name, obj, source)
        meta = e.doc.mapping(e.obj.get("metadata"), "metadata")
        return NamespaceInfo(name, e.doc.str_map(meta.get("labels"), "metadata.labels"))

    def resource_quota(self, namespace: str, name: str, obj: Any, *, source: str = "") -> ResourceQuotaInfo:
        return self._b._quota(self._entry("ResourceQuota", namespace, name, obj, source))

    def pod_disruption_budget(
        self, namespace: str, name: str, obj: Any, *, source: str = ""
    ) -> PodDisruptionBudgetInfo:
        return self._b._pdb(self._entry("PodDisruptionBudget", namespace, name, obj, source))

    def pod_group(self, namespace: str, name: str, obj: Any, *, source: str = "") -> Any:
        return self._b._podgroup(self._entry("PodGroup", namespace, name, obj, source))

    def pod(self, namespace: str, name: str, obj: Any, *, source: str = "") -> Any:
        b = _Builder(self._b.scheduler_names, self._b.default_queue)
        return b._pod(self._entry("Pod", namespace, name, obj, source))

    # ------------------------------------------------------------------------- assembly
    def pod_uid(self, pod: Any) -> str:
        return str(pod.uid)

    def group_of(self, pod: Any) -> str:
        """The job id ("<ns>/<podgroup>") of a parsed pod; "" for another scheduler's pod without a group."""
        p: _Pod = pod
        gname = p.annotations.get(GROUP_NAME_KEY, "")
        if not gname and p.spec.scheduler_name in self._b.scheduler_names:
            gname = "podgroup-" + (p.owner_uid or p.uid)
        return f"{p.namespace}/{gname}" if gname else ""

    def is_ours(self, pod: Any) -> bool:
        return bool(pod.spec.scheduler_name in self._b.scheduler_names)

    def implicit_group(self, pod: Any) -> Any | None:
        """The PodGroup the controller creates for a pod of ours without a group name, else None."""
        p: _Pod = pod
        if p.annotations.get(GROUP_NAME_KEY, "") or p.spec.scheduler_name not in self._b.scheduler_names:
            return None
        return self._b._normal_pod_group(p, "podgroup-" + (p.owner_uid or p.uid))

    def use_priority_classes(
        self, priority_classes: Mapping[str, PriorityClassInfo], default_priority: int
    ) -> None:
        """The priority classes (and the globalDefault value) `job_info` and `task` read from now on."""
        self._b.pcs = dict(priority_classes)
        self._b.default_priority = default_priority

    def job_info(self, group: Any) -> JobInfo:
        return self._b._job_info(group)

    def task(self, pod: Any, job: str) -> TaskInfo:
        return self._b._task(pod, job)
