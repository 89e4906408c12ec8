"""The extender plugin (Volcano plugins/extender): each hook whose verb is set asks an HTTP service.

Requests are JSON POSTs to `<extender.urlPrefix without trailing '/'>/<verb>`, sent through the
session's callout port (framework/callout.py), never directly: the core stays pure, a live
cycle's answers are recorded in the log and replay reads them back.  Which verb registers which
extension point, how an answer is decoded (as Go's encoding/json would decode it into Volcano's
response structs) and what a failed call does (`extender.ignorable`) follow extender.go at
ed72c7c; docs/plugins.md (section "Plugin `extender`") lists them with the quirks kept.

Request bodies carry Volcano's top-level keys and a documented subset of its Go structs (Go field
names, Go's sorted map keys), built from the session's state alone, so that equal sessions send
equal bytes (the replay key is the request's digest).
"""

from __future__ import annotations

import contextlib
import difflib
import json
import math
from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

from fumarole.daemon.scheduler.framework import combinators as cb
from fumarole.daemon.scheduler.framework.callout import CalloutAnswer
from fumarole.daemon.scheduler.framework.conf import GO_PARSE_BOOL
from fumarole.daemon.scheduler.framework.session import EventError, EventHandler, Session
from fumarole.daemon.scheduler.model.fit import Code, FitError, fit_error
from fumarole.daemon.scheduler.model.job import JobInfo
from fumarole.daemon.scheduler.model.node import NodeInfo
from fumarole.daemon.scheduler.model.queue import QueueInfo
from fumarole.daemon.scheduler.model.resources import PODS, Resource
from fumarole.daemon.scheduler.model.task import TaskInfo
from fumarole.daemon.scheduler.plugins.sla import GoDurationError, parse_go_duration

NAME = "extender"
PREFIX = "extender."
# The verb arguments, in extender.go's order.
VERBS = (
    "onSessionOpenVerb",
    "onSessionCloseVerb",
    "predicateVerb",
    "prioritizeVerb",
    "preemptableVerb",
    "reclaimableVerb",
    "queueOverusedVerb",
    "jobEnqueueableVerb",
    "jobEnqueuedVerb",
    "jobReadyVerb",
    "allocateFuncVerb",
    "deallocateFuncVerb",
)
ARGUMENTS = ("urlPrefix", "httpTimeout", *VERBS, "ignorable", "managedResources")
DEFAULT_TIMEOUT_S = 1.0


class ExtenderConfigError(ValueError):
    """A bad extender argument: `field` is the argument's key, `message` what is wrong."""

    def __init__(self, field: str, message: str) -> None:
        super().__init__(f"{field}: {message}")
        self.field = field
        self.message = message


@dataclass(frozen=True, slots=True)
class ExtenderConfig:
    url_prefix: str
    timeout_s: float  # 0: no timeout (Go's http.Client with Timeout <= 0)
    verbs: dict[str, str]
    ignorable: bool
    managed: frozenset[str]
    warnings: tuple[str, ...] = ()


def parse_config(arguments: Mapping[str, Any]) -> ExtenderConfig:
    """Read the arguments; refuse (ExtenderConfigError) what Volcano would silently drop or die on.

    Volcano ignores a verb or timeout of the wrong type and an unparsable timeout (keeping the
    1 s default), reads `ignorable` with GetBool (bool or ParseBool strings, else false), and exits
    (klog.Fatalf) when `managedResources` is not a list of strings.  Here every one of those is
    an error naming the argument; an unknown `extender.*` key is a warning.
    """

    def text(key: str) -> str:
        v = arguments.get(PREFIX + key)
        if v is None:
            return ""
        if not isinstance(v, str):
            raise ExtenderConfigError(PREFIX + key, f"must be a string, got {v!r}")
        return v

    verbs = {k: text(k) for k in VERBS}
    url = text("urlPrefix")
    if any(verbs.values()) and not url:
        first = next(k for k, v in verbs.items() if v)
        raise ExtenderConfigError(PREFIX + "urlPrefix", f"required when a verb is set ({PREFIX + first})")
    if url and not (url.startswith("http://") or url.startswith("https://")):
        raise ExtenderConfigError(PREFIX + "urlPrefix", f"must be an http:// or https:// URL, got {url!r}")
    timeout_s = DEFAULT_TIMEOUT_S
    raw = text("httpTimeout")
    if raw:
        try:
            ns = parse_go_duration(raw)
        except GoDurationError as e:
            raise ExtenderConfigError(PREFIX + "httpTimeout", f"not a Go duration: {e}") from None
        timeout_s = max(0.0, ns / 1e9)
    ign: Any = arguments.get(PREFIX + "ignorable")
    if ign is None:
        ign = False
    if isinstance(ign, str) and ign in GO_PARSE_BOOL:
        ign = GO_PARSE_BOOL[ign]
    if not isinstance(ign, bool):
        raise ExtenderConfigError(PREFIX + "ignorable", f"must be true or false, got {ign!r}")
    managed = arguments.get(PREFIX + "managedResources")
    if managed is None:
        managed = []
    if not isinstance(managed, list) or not all(isinstance(m, str) for m in managed):
        raise ExtenderConfigError(
            PREFIX + "managedResources", f"must be a list of resource names, got {managed!r}"
        )
    warnings = []
    for key in sorted(arguments):
        if key.startswith(PREFIX) and key[len(PREFIX) :] not in ARGUMENTS:
            close = difflib.get_close_matches(key, [PREFIX + a for a in ARGUMENTS], n=1)
            hint = f" (did you mean {close[0]!r}?)" if close else ""
            warnings.append(f"extender: unknown argument {key!r}{hint}; ignored, as Volcano ignores it")
    return ExtenderConfig(url, timeout_s, verbs, ign, frozenset(managed), tuple(warnings))


def check_arguments(arguments: Mapping[str, Any]) -> list[str]:
    """For the configuration parse: raises ExtenderConfigError, returns the warnings."""
    return list(parse_config(arguments).warnings)


# ------------------------------------------------------------------------------ request bodies
def _num(v: float) -> float | int:
    """Go marshals a float64 without a fraction as an integer literal; infinities become 0
    (Go's json.Marshal fails on them; Fumarole's unlimited capability has no Go counterpart)."""
    if not math.isfinite(v):
        return 0
    return int(v) if float(v).is_integer() else float(v)


def resource_json(r: Resource | None) -> dict[str, Any] | None:
    """api.Resource: MilliCPU, Memory, ScalarResources (milli-units, pods too), MaxTaskNum."""
    if r is None:
        return None
    scalars = {k: _num(v * 1000 if k == PODS else v) for k, v in sorted(r.scalars.items())}
    return {
        "MilliCPU": _num(r.cpu),
        "Memory": _num(r.memory),
        "ScalarResources": scalars or None,
        "MaxTaskNum": 0,
    }


def task_json(t: TaskInfo) -> dict[str, Any]:
    """api.TaskInfo (subset, Go field names; Status is Volcano's TaskStatus bit value)."""
    pod = t.pod
    req = resource_json(t.resreq)
    return {
        "UID": t.uid,
        "Job": t.job,
        "Name": t.name,
        "Namespace": t.namespace,
        "TaskRole": t.role,
        "Resreq": req,
        "InitResreq": req,
        "NodeName": t.node_name,
        "Status": int(t.status),
        "Priority": t.priority,
        "Preemptable": t.preemptable,
        "BestEffort": t.best_effort,
        "SchGated": t.sch_gated,
        "Pod": {
            "metadata": {
                "name": t.name,
                "namespace": t.namespace,
                "uid": t.uid,
                "labels": dict(sorted(pod.labels.items())) or None,
                "annotations": dict(sorted(pod.annotations.items())) or None,
            },
            "spec": {
                "nodeName": t.node_name,
                "schedulerName": pod.scheduler_name,
                "priorityClassName": pod.priority_class_name,
                "nodeSelector": dict(sorted(pod.node_selector.items())) or None,
            },
            "status": {"phase": pod.phase},
        },
    }


def node_json(n: NodeInfo, *, with_tasks: bool = True) -> dict[str, Any]:
    """api.NodeInfo (subset): resources, State, the node's labels and taints, its tasks by uid."""
    facts = n.facts
    out: dict[str, Any] = {
        "Name": n.name,
        "Node": {
            "metadata": {
                "name": n.name,
                "labels": dict(sorted(facts.labels.items())) or None,
                "annotations": dict(sorted(facts.annotations.items())) or None,
            },
            "spec": {
                "unschedulable": facts.unschedulable,
                "taints": [{"key": x.key, "value": x.value, "effect": x.effect} for x in facts.taints]
                or None,
            },
        },
        "State": {"Phase": "Ready", "Reason": ""},
        "Releasing": resource_json(n.releasing),
        "Pipelined": resource_json(n.pipelined),
        "Idle": resource_json(n.idle),
        "Used": resource_json(n.used),
        "Allocatable": resource_json(n.allocatable),
        "Capacity": resource_json(n.capability),
    }
    if with_tasks:
        tasks = n.peek_tasks()
        out["Tasks"] = {uid: _task_brief(tasks[uid]) for uid in sorted(tasks)}
    return out


def _task_brief(t: TaskInfo) -> dict[str, Any]:
    return {
        "UID": t.uid,
        "Job": t.job,
        "Name": t.name,
        "Namespace": t.namespace,
        "Resreq": resource_json(t.resreq),
        "NodeName": t.node_name,
        "Status": int(t.status),
        "Priority": t.priority,
    }


def job_json(j: JobInfo) -> dict[str, Any]:
    """api.JobInfo (subset): identity, queue, gang figures, its tasks by uid, its PodGroup phase."""
    tasks = j.peek_tasks()
    return {
        "UID": j.uid,
        "Name": j.name,
        "Namespace": j.namespace,
        "Queue": j.queue,
        "Priority": j.priority,
        "MinAvailable": j.min_available,
        "Tasks": {uid: _task_brief(tasks[uid]) for uid in sorted(tasks)},
        "TaskMinAvailable": dict(sorted(j.task_min_available.items())) or None,
        "TaskMinAvailableTotal": j.task_min_total,
        "Allocated": resource_json(j.allocated),
        "TotalRequest": resource_json(j.total_request),
        "PodGroup": {
            "metadata": {"name": j.name, "namespace": j.namespace},
            "spec": {
                "minMember": j.min_available,
                "queue": j.queue,
                "priorityClassName": j.priority_class_name,
            },
            "status": {"phase": j.status.phase},
        },
        "Preemptable": j.preemptable,
    }


def queue_json(q: QueueInfo) -> dict[str, Any]:
    """api.QueueInfo: UID (the name), Name, Weight, Weights and Hierarchy (annotations)."""
    return {
        "UID": q.name,
        "Name": q.name,
        "Weight": q.weight,
        "Weights": q.annotations.get("volcano.sh/hierarchy-weights", ""),
        "Hierarchy": q.annotations.get("volcano.sh/hierarchy", ""),
    }


def encode(payload: Any) -> bytes:
    """Compact JSON, keys in the order built (Go's struct order; maps were sorted when built)."""
    return json.dumps(payload, separators=(",", ":"), ensure_ascii=False, allow_nan=False).encode()


# ------------------------------------------------------------------------------ answers
class ExtenderError(Exception):
    """A failed call: transport, non-200 status, or a body Go's decoder refuses (send()'s error)."""


def _no_constant(name: str) -> Any:
    raise ValueError(f"invalid character {name[0]!r} looking for beginning of value")


def decode_body(text: str) -> Any:
    """json.NewDecoder(body).Decode: the first JSON value; trailing data is not read; an empty
    body is `EOF`; NaN/Infinity are refused."""
    s = text.lstrip(" \t\r\n")
    if not s:
        raise ExtenderError("EOF")
    try:
        value, _ = json.JSONDecoder(parse_constant=_no_constant).raw_decode(s)
    except ValueError as e:
        raise ExtenderError(f"invalid JSON answer: {e}") from None
    return value


# The response structs of argument.go: JSON field name -> kind.
SCHEMAS: dict[str, dict[str, str]] = {
    "PredicateResponse": {"status": "string", "code": "int"},
    "PrioritizeResponse": {"nodeScore": "scores", "errorMessage": "string"},
    "PreemptableResponse": {"status": "int", "victims": "tasks"},
    "ReclaimableResponse": {"status": "int", "victims": "tasks"},
    "JobEnqueueableResponse": {"status": "int"},
    "JobEnqueuedResponse": {},
    "QueueOverusedResponse": {"overused": "bool"},
    "JobReadyResponse": {"status": "bool"},
    "EventHandlerResponse": {"errorMessage": "string"},
}
_ZERO: dict[str, Any] = {"string": "", "int": 0, "bool": False, "scores": None, "tasks": []}


class _Struct:
    """Go's decoding into a response struct: keys matched to fields case-insensitively (a later
    matching key overwrites), missing or null fields keep their zero value, a wrongly typed field
    is an error (`error`; the fields that decoded keep their values, as with Go's decoder)."""

    def __init__(self, value: Any, go_type: str) -> None:
        schema = SCHEMAS[go_type]
        self.error = ""
        self.values: dict[str, Any] = {f: _ZERO[k] for f, k in schema.items()}
        if value is None:
            return
        if not isinstance(value, dict):
            self.error = (
                f"json: cannot unmarshal {_json_kind(value)} into Go value of type extender.{go_type}"
            )
            return
        lower = {f.lower(): f for f in schema}
        for key, v in value.items():
            f = lower.get(key.lower())
            if f is None or v is None:
                continue
            decoded = _decode_field(schema[f], v)
            if isinstance(decoded, _Bad):
                if not self.error:
                    self.error = (
                        f"json: cannot unmarshal {_json_kind(decoded.value)} into Go struct field "
                        f"{go_type}.{f} of type {decoded.want}"
                    )
                continue
            self.values[f] = decoded

    def get(self, name: str) -> Any:
        return self.values[name]


@dataclass(frozen=True, slots=True)
class _Bad:
    value: Any
    want: str


def _decode_field(kind: str, v: Any) -> Any:
    if kind == "string":
        return v if isinstance(v, str) else _Bad(v, "string")
    if kind == "int":
        return v if isinstance(v, int) and not isinstance(v, bool) else _Bad(v, "int")
    if kind == "bool":
        return v if isinstance(v, bool) else _Bad(v, "bool")
    if kind == "scores":
        if not isinstance(v, dict):
            return _Bad(v, "map[string]float64")
        out: dict[str, float] = {}
        for k, s in v.items():
            if s is None:
                out[k] = 0.0
            elif isinstance(s, int | float) and not isinstance(s, bool):
                out[k] = float(s)
            else:
                return _Bad(s, "float64")
        return out
    # tasks: []*api.TaskInfo, of which the UID is read (null entries are dropped)
    if not isinstance(v, list):
        return _Bad(v, "[]*api.TaskInfo")
    uids = []
    for item in v:
        if item is None:
            continue
        if not isinstance(item, dict):
            return _Bad(item, "api.TaskInfo")
        uid = ""
        for key, x in item.items():
            if key.lower() == "uid" and x is not None:
                if not isinstance(x, str):
                    return _Bad(x, "api.TaskID")
                uid = x
        uids.append(uid)
    return uids


def _json_kind(v: Any) -> str:
    if isinstance(v, bool):
        return "bool"
    if isinstance(v, int | float):
        return "number"
    if isinstance(v, str):
        return "string"
    if isinstance(v, list):
        return "array"
    return "object"


# ------------------------------------------------------------------------------ the plugin
class ExtenderPlugin:
    name = NAME

    def __init__(self, arguments: dict[str, Any]) -> None:
        self.conf = parse_config(arguments)
        self.ssn: Session | None = None
        self._warned: set[str] = set()

    # ---------------------------------------------------------------------------- transport
    def send(self, verb: str, payload: Any, go_type: str | None) -> _Struct | None:
        """Volcano's send(): POST, status 200 required, the body decoded into `go_type` (None: not
        read).  Raises ExtenderError; a body that partly decoded is returned with `.error` set
        only by `send_partial`."""
        out, err = self.send_partial(verb, payload, go_type)
        if err:
            raise ExtenderError(err)
        return out

    def send_partial(self, verb: str, payload: Any, go_type: str | None) -> tuple[_Struct | None, str]:
        assert self.ssn is not None
        url = self.conf.url_prefix.rstrip("/") + "/" + verb
        ans: CalloutAnswer = self.ssn.callouts.call(
            verb, url, encode(payload), self.conf.timeout_s, go_type is not None
        )
        if ans.error:
            return None, self._warn(verb, ans.error)
        if ans.status != 200:
            return None, self._warn(verb, f"failed {verb} with extender at URL {url}, code {ans.status}")
        if go_type is None:
            return None, ""
        try:
            value = decode_body(ans.body)
        except ExtenderError as e:
            return None, self._warn(verb, str(e))
        out = _Struct(value, go_type)
        return out, self._warn(verb, out.error) if out.error else ""

    def _warn(self, verb: str, err: str) -> str:
        """Volcano logs each failure (klog); the session says so once per verb."""
        if self.ssn is not None and verb not in self._warned:
            self._warned.add(verb)
            self.ssn.warnings.append(f"extender: {verb} failed: {err}")
        return err

    def interested(self, task: TaskInfo) -> bool:
        """IsInterested: no managed resources, or one of them named in a container's (or init
        container's) requests or limits.  cpu and memory count when the task requests them."""
        managed = self.conf.managed
        if not managed:
            return True
        for c in task.pod.extended_resources:
            if any(n in managed for n in c.requests) or any(n in managed for n in c.limits):
                return True
        req = task.resreq
        if "cpu" in managed and req.cpu:
            return True
        if "memory" in managed and req.memory:
            return True
        return any(n in managed for n in req.scalars if n != PODS)

    # ---------------------------------------------------------------------------- hooks
    def on_session_open(self, ssn: Session) -> None:
        self.ssn = ssn
        v = self.conf.verbs
        if v["onSessionOpenVerb"]:
            payload = {
                "Jobs": {k: job_json(ssn.jobs[k]) for k in sorted(ssn.jobs)},
                "Nodes": {k: node_json(ssn.nodes[k]) for k in sorted(ssn.nodes)},
                "Queues": {k: queue_json(ssn.queues[k]) for k in sorted(ssn.queues)},
                "NamespaceInfo": {k: {"Name": k} for k in sorted(ssn.namespaces)},
                "RevocableNodes": {},
                "NodeList": None,
            }
            try:
                self.send(v["onSessionOpenVerb"], payload, None)
            except ExtenderError:
                if not self.conf.ignorable:
                    return  # Volcano registers nothing else this session (no event handler either)
        if v["predicateVerb"]:
            ssn.register(cb.PREDICATE, NAME, self.predicate)
        if v["prioritizeVerb"]:
            ssn.register(cb.BATCH_NODE_ORDER, NAME, self.prioritize)
        if v["preemptableVerb"]:
            verb_p = v["preemptableVerb"]
            ssn.register(
                cb.PREEMPTABLE, NAME, lambda e, ts: self.victims(verb_p, "PreemptableResponse", e, ts)
            )
        if v["reclaimableVerb"]:
            verb_r = v["reclaimableVerb"]
            ssn.register(
                cb.RECLAIMABLE, NAME, lambda e, ts: self.victims(verb_r, "ReclaimableResponse", e, ts)
            )
        if v["jobEnqueueableVerb"]:
            ssn.register(cb.JOB_ENQUEUEABLE, NAME, self.job_enqueueable)
        if v["jobEnqueuedVerb"]:
            ssn.register(cb.JOB_ENQUEUED, NAME, self.job_enqueued)
        if v["queueOverusedVerb"]:
            ssn.register(cb.OVERUSED, NAME, self.overused)
        if v["jobReadyVerb"]:
            ssn.register(cb.JOB_READY, NAME, self.job_ready)
        # Volcano adds the event handler even when neither verb is set (an empty one).
        ssn.add_event_handler(
            EventHandler(
                allocate=self.on_allocate if v["allocateFuncVerb"] else None,
                deallocate=self.on_deallocate if v["deallocateFuncVerb"] else None,
            )
        )

    def on_session_close(self, ssn: Session) -> None:
        verb = self.conf.verbs["onSessionCloseVerb"]
        if verb:
            with contextlib.suppress(ExtenderError):  # logged only, as Volcano does
                self.send(verb, {}, None)

    def predicate(self, task: TaskInfo, node: NodeInfo) -> FitError | None:
        if not self.interested(task):
            return None
        try:
            resp = self.send(
                self.conf.verbs["predicateVerb"],
                {"task": task_json(task), "node": node_json(node)},
                "PredicateResponse",
            )
        except ExtenderError as e:
            if self.conf.ignorable:
                return None
            return fit_error(task.namespace, task.name, node.name, Code.ERROR, str(e))
        assert resp is not None
        msg = resp.get("status")
        code = resp.get("code")
        if not msg:
            return None
        # A message without a code (0, Success) is an Error, "for compatibility".
        status = Code(code) if code in Code._value2member_map_ and code != 0 else Code.ERROR
        return fit_error(task.namespace, task.name, node.name, status, msg)

    def prioritize(self, task: TaskInfo, nodes: list[NodeInfo]) -> dict[str, float]:
        if not self.interested(task):
            return {}
        try:
            resp = self.send(
                self.conf.verbs["prioritizeVerb"],
                {"task": task_json(task), "nodes": [node_json(n) for n in nodes]},
                "PrioritizeResponse",
            )
        except ExtenderError as e:
            if self.conf.ignorable:
                return {}
            raise cb.ScoringError(str(e)) from None
        assert resp is not None
        scores = resp.get("nodeScore")
        message = resp.get("errorMessage")
        if message == "" and scores is not None:
            return dict(scores)
        # An error message, or no nodeScore at all: an error whatever `ignorable` says.
        raise cb.ScoringError(message)

    def victims(
        self, verb: str, go_type: str, evictor: TaskInfo, evictees: list[TaskInfo]
    ) -> tuple[list[TaskInfo], int]:
        if not self.interested(evictor):
            return [], cb.ABSTAIN
        try:
            resp = self.send(
                verb, {"evictor": task_json(evictor), "evictees": [task_json(t) for t in evictees]}, go_type
            )
        except ExtenderError:
            # Permit (ignorable) or Reject: either way an empty list, which empties the tier.
            return [], cb.PERMIT if self.conf.ignorable else cb.REJECT
        assert resp is not None
        status = resp.get("status")
        uids = resp.get("victims")
        by_uid = {t.uid: t for t in evictees}
        out: list[TaskInfo] = []
        seen: set[str] = set()
        for uid in uids:
            t = by_uid.get(uid)
            if t is not None and uid not in seen:
                seen.add(uid)
                out.append(t)
        return out, status

    def job_enqueueable(self, job: JobInfo) -> int:
        try:
            resp = self.send(
                self.conf.verbs["jobEnqueueableVerb"], {"job": job_json(job)}, "JobEnqueueableResponse"
            )
        except ExtenderError:
            return cb.PERMIT if self.conf.ignorable else cb.REJECT
        assert resp is not None
        return int(resp.get("status"))

    def job_enqueued(self, job: JobInfo) -> None:
        with contextlib.suppress(ExtenderError):  # logged only
            self.send(self.conf.verbs["jobEnqueuedVerb"], {"job": job_json(job)}, "JobEnqueuedResponse")

    def overused(self, queue: QueueInfo) -> bool:
        try:
            resp = self.send(
                self.conf.verbs["queueOverusedVerb"], {"queue": queue_json(queue)}, "QueueOverusedResponse"
            )
        except ExtenderError:
            return not self.conf.ignorable
        assert resp is not None
        return bool(resp.get("overused"))

    def job_ready(self, job: JobInfo) -> bool:
        try:
            resp = self.send(self.conf.verbs["jobReadyVerb"], {"job": job_json(job)}, "JobReadyResponse")
        except ExtenderError:
            return not self.conf.ignorable
        assert resp is not None
        return bool(resp.get("status"))

    def _event(self, verb: str, task: TaskInfo) -> Exception | None:
        if not self.interested(task):
            return None
        resp, err_text = self.send_partial(verb, {"task": task_json(task)}, "EventHandlerResponse")
        err: Exception | None = None
        if err_text and not self.conf.ignorable:
            err = EventError(f"extender: {err_text}")
        # Read even after a failed decode: what decoded before the error counts.
        message = resp.get("errorMessage") if resp is not None else ""
        if message:
            err = EventError(f"extender: {message}")
        return err

    def on_allocate(self, task: TaskInfo) -> Exception | None:
        return self._event(self.conf.verbs["allocateFuncVerb"], task)

    def on_deallocate(self, task: TaskInfo) -> None:
        self._event(self.conf.verbs["deallocateFuncVerb"], task)


def new(arguments: dict[str, Any]) -> ExtenderPlugin:
    return ExtenderPlugin(arguments)
