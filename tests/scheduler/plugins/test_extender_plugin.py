"""The extender plugin against a real extender (aiohttp on 127.0.0.1): which verb does what,
what errors and timeouts do with and without `extender.ignorable`, the answers recorded and
replayed with the server stopped.  Volcano's extender_test.go cases (IsInterested with managed
resources in requests, limits and init containers; the 10 MiB body limit) are ported."""

from __future__ import annotations

import sys
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))
sys.path.insert(0, str(Path(__file__).resolve().parents[2]))
from fumarole_extender_server import ExtenderServer, Reply
from fumarole_sched_kit import add_tasks, mk_job, mk_node, mk_queue, mk_snapshot, mk_task, rl

from fumarole.daemon.callouts_http import MAX_BODY, HttpCalloutPort
from fumarole.daemon.scheduler.framework.callout import (
    CalloutUnavailable,
    RecordingPort,
    ReplayPort,
)
from fumarole.daemon.scheduler.framework.conf import ConfError
from fumarole.daemon.scheduler.framework.conf_check import parse_scheduler_conf
from fumarole.daemon.scheduler.framework.run import SessionResult, run_session
from fumarole.daemon.scheduler.model.devices import ContainerResources
from fumarole.daemon.scheduler.model.snapshot import ClusterSnapshot
from fumarole.daemon.scheduler.model.task import PodFacts, TaskStatus
from fumarole.daemon.scheduler.plugins import extender as ext

R = TaskStatus.RUNNING


class Extender:
    """The answers the test's extender gives, per verb (a dict, a list or a Reply)."""

    def __init__(self) -> None:
        self.answers: dict[str, Any] = {}

    def __call__(self, verb: str, body: Any) -> Any:
        a = self.answers.get(verb, {})
        return a(body) if callable(a) else a


@pytest.fixture
def server() -> Iterator[tuple[ExtenderServer, Extender]]:
    e = Extender()
    with ExtenderServer(e) as s:
        yield s, e


def conf(url: str, actions: str = "allocate", *, tier1: list[str] | None = None, **arguments: Any) -> Any:
    args = {"extender.urlPrefix": url, **{f"extender.{k}": v for k, v in arguments.items()}}
    lines = [f'actions: "{actions}"', "tiers:", "- plugins:"]
    for name in tier1 or []:
        lines.append(f"  - name: {name}")
    lines.append("  - name: extender")
    lines.append("    arguments:")
    for k, v in args.items():
        lines.append(f"      {k}: {v!r}" if not isinstance(v, list) else f"      {k}: {v}")
    lines += ["- plugins:", "  - name: predicates", "  - name: proportion"]
    return parse_scheduler_conf("\n".join(lines) + "\n", "conf.yaml")


def two_nodes_one_pod() -> ClusterSnapshot:
    job = mk_job("pg1", min_available=1)
    mk_task(job, "p1", "1", "1Gi")
    return mk_snapshot([mk_node("n1"), mk_node("n2")], [job])


def run(snap: ClusterSnapshot, c: Any) -> tuple[SessionResult, RecordingPort]:
    port = RecordingPort(HttpCalloutPort())
    return run_session(snap, c, callouts=port), port


# ------------------------------------------------------------------------------ predicate
def test_predicate_filters_nodes(server: tuple[ExtenderServer, Extender]) -> None:
    s, e = server
    e.answers["filter"] = lambda b: {"status": "n1 is reserved"} if b["node"]["Name"] == "n1" else {}
    res, port = run(two_nodes_one_pod(), conf(s.url, predicateVerb="filter"))
    assert res.binds == {"default/p1": "n2"}
    asked = {b["node"]["Name"] for v, b in s.requests if v == "filter"}
    assert asked == {"n1", "n2"}
    assert {b["task"]["Name"] for v, b in s.requests} == {"p1"}
    assert [r.verb for r in port.records] == ["filter"] * len(port.records)


def test_predicate_rejecting_every_node_names_the_reason(server: tuple[ExtenderServer, Extender]) -> None:
    s, e = server
    e.answers["filter"] = {"status": "no licence here", "code": 3}
    res, _ = run(two_nodes_one_pod(), conf(s.url, predicateVerb="filter"))
    assert res.binds == {}
    assert "no licence here" in res.pending["default/p1"]


def test_request_bodies_carry_volcanos_keys(server: tuple[ExtenderServer, Extender]) -> None:
    s, _e = server
    run(
        two_nodes_one_pod(),
        conf(s.url, predicateVerb="filter", prioritizeVerb="score", onSessionOpenVerb="open"),
    )
    bodies = {v: b for v, b in s.requests}
    assert set(bodies["open"]) == {"Jobs", "Nodes", "Queues", "NamespaceInfo", "RevocableNodes", "NodeList"}
    assert set(bodies["filter"]) == {"task", "node"}
    task = bodies["filter"]["task"]
    assert task["UID"] == "default-p1" and task["Status"] == int(TaskStatus.PENDING)
    assert task["Resreq"]["MilliCPU"] == 1000 and task["Resreq"]["ScalarResources"] == {"pods": 1000}
    assert set(bodies["score"]) == {"task", "nodes"} and len(bodies["score"]["nodes"]) == 2


# ------------------------------------------------------------------------------ prioritize
def test_prioritize_changes_the_node_chosen(server: tuple[ExtenderServer, Extender]) -> None:
    s, e = server
    res0, _ = run(two_nodes_one_pod(), conf(s.url))
    assert res0.binds == {"default/p1": "n1"}  # equal nodes: the first
    e.answers["score"] = {"nodeScore": {"n2": 50}}
    res, _ = run(two_nodes_one_pod(), conf(s.url, prioritizeVerb="score"))
    assert res.binds == {"default/p1": "n2"}
    [(_verb, body)] = [r for r in s.requests if r[0] == "score"]
    assert [n["Name"] for n in body["nodes"]] == ["n1", "n2"]


@pytest.mark.parametrize(
    ("answer", "ignorable", "bound"),
    [
        (Reply(status=500), False, False),  # Volcano's PrioritizeNodes returns no scores: no node
        (Reply(status=500), True, True),  # ignored: the other plugins' scores stand
        ({"errorMessage": "busy"}, True, False),  # an error message fails even when ignorable
        ({"nodeScore": None}, True, False),  # so does an answer without nodeScore
    ],
)
def test_prioritize_failures(
    server: tuple[ExtenderServer, Extender], answer: Any, ignorable: bool, bound: bool
) -> None:
    s, e = server
    e.answers["score"] = answer
    res, _ = run(two_nodes_one_pod(), conf(s.url, prioritizeVerb="score", ignorable=ignorable))
    assert bool(res.binds) is bound


# ------------------------------------------------------------------------------ errors, timeouts
@pytest.mark.parametrize("ignorable", [False, True])
def test_predicate_error_status(server: tuple[ExtenderServer, Extender], ignorable: bool) -> None:
    s, e = server
    e.answers["filter"] = Reply(status=503)
    res, port = run(two_nodes_one_pod(), conf(s.url, predicateVerb="filter", ignorable=ignorable))
    if ignorable:
        assert res.binds == {"default/p1": "n1"}
    else:
        assert res.binds == {}
        assert f"failed filter with extender at URL {s.url}/filter, code 503" in res.pending["default/p1"]
    assert all(r.answer.status == 503 for r in port.records)
    assert any("extender: filter failed" in w for w in res.warnings)


@pytest.mark.parametrize("ignorable", [False, True])
def test_predicate_timeout(server: tuple[ExtenderServer, Extender], ignorable: bool) -> None:
    s, e = server
    e.answers["filter"] = Reply(body="{}", delay_s=0.6)
    res, port = run(
        two_nodes_one_pod(), conf(s.url, predicateVerb="filter", httpTimeout="100ms", ignorable=ignorable)
    )
    assert all("Client.Timeout exceeded" in r.answer.error for r in port.records)
    if ignorable:
        assert res.binds == {"default/p1": "n1"}
    else:
        assert res.binds == {} and "Client.Timeout exceeded" in res.pending["default/p1"]


def test_refused_connection_is_an_error() -> None:
    stopped = ExtenderServer(lambda v, b: {}).start()
    url = stopped.url
    stopped.stop()
    res, port = run(two_nodes_one_pod(), conf(url, predicateVerb="filter"))
    assert (
        res.binds == {} and port.records and port.records[0].answer.error.startswith(f'Post "{url}/filter"')
    )


def test_undecodable_answers_are_errors(server: tuple[ExtenderServer, Extender]) -> None:
    s, e = server
    for body in ("", "[1]", '{"code": "3", "status": "x"}', '{"code": 2.0, "status": "x"}'):
        e.answers["filter"] = Reply(body=body)
        res, _ = run(two_nodes_one_pod(), conf(s.url, predicateVerb="filter", ignorable=True))
        assert res.binds == {"default/p1": "n1"}, body  # an error, ignored
    # Go's decoder: field names match case-insensitively, trailing data is not read.
    e.answers["filter"] = Reply(body='{"Status": "nope"} trailing')
    res, _ = run(two_nodes_one_pod(), conf(s.url, predicateVerb="filter", ignorable=True))
    assert res.binds == {}


def test_body_over_10_mib_is_an_error(server: tuple[ExtenderServer, Extender]) -> None:
    # extender_test.go TestMaxBodySizeLimit2: a body of maxBodySize+1 bytes is refused.
    s, e = server
    e.answers["filter"] = Reply(body='{"padding":"' + "a" * (MAX_BODY + 1) + '"}')
    ans = HttpCalloutPort().call("filter", s.url + "/filter", b"{}", 5.0, True)
    assert ans.error == "http: request body too large"


def test_session_open_failure_registers_nothing(server: tuple[ExtenderServer, Extender]) -> None:
    s, e = server
    e.answers["open"] = Reply(status=500)
    e.answers["filter"] = {"status": "never"}
    res, _ = run(two_nodes_one_pod(), conf(s.url, onSessionOpenVerb="open", predicateVerb="filter"))
    assert res.binds == {"default/p1": "n1"} and "filter" not in s.verbs()
    res, _ = run(
        two_nodes_one_pod(), conf(s.url, onSessionOpenVerb="open", predicateVerb="filter", ignorable=True)
    )
    assert res.binds == {} and "filter" in s.verbs()


def test_session_close_is_called(server: tuple[ExtenderServer, Extender]) -> None:
    s, _ = server
    run(two_nodes_one_pod(), conf(s.url, onSessionCloseVerb="close"))
    assert s.requests[-1] == ("close", {})


# ------------------------------------------------------------------------------ victims
def preempt_snapshot() -> ClusterSnapshot:
    low = mk_job("low", priority=1, min_available=0)
    add_tasks(low, 2, "1", "1Gi", status=R, node="n1")
    high = mk_job("high", priority=100, min_available=1)
    add_tasks(high, 1, "1", "1Gi")
    return mk_snapshot([mk_node("n1", "2")], [low, high])


def test_preemptable_filters_victims(server: tuple[ExtenderServer, Extender]) -> None:
    s, e = server
    c0 = conf(s.url, "preempt", tier1=["priority", "gang", "conformance"])
    res0, _ = run(preempt_snapshot(), c0)
    assert [ev.task for ev in res0.evictions] == ["default/low-1"]
    # The extender offers only low-0: the tier's intersection evicts it instead.
    e.answers["victims"] = lambda b: {
        "status": 1,
        "victims": [t for t in b["evictees"] if t["Name"] == "low-0"],
    }
    c = conf(s.url, "preempt", tier1=["priority", "gang", "conformance"], preemptableVerb="victims")
    res, _ = run(preempt_snapshot(), c)
    assert [ev.task for ev in res.evictions] == ["default/low-0"]
    assert "extender" in res.evictions[0].reason
    [(_, body)] = [r for r in s.requests if r[0] == "victims"]
    assert body["evictor"]["Name"] == "high-0" and {t["Name"] for t in body["evictees"]} == {"low-0", "low-1"}


@pytest.mark.parametrize(
    "answer",
    [
        {"status": 1, "victims": []},  # nobody
        {
            "status": 0,
            "victims": [{"UID": "default-low-0"}],
        },  # status 0: abstains (the tier decides without it)
        Reply(status=500),  # an error: Permit or Reject with no victims, either way none
    ],
)
def test_preemptable_answers(server: tuple[ExtenderServer, Extender], answer: Any) -> None:
    s, e = server
    e.answers["victims"] = answer
    for ignorable in (False, True):
        c = conf(
            s.url,
            "preempt",
            tier1=["priority", "gang", "conformance"],
            preemptableVerb="victims",
            ignorable=ignorable,
        )
        res, _ = run(preempt_snapshot(), c)
        if isinstance(answer, dict) and answer["status"] == 0:
            assert [ev.task for ev in res.evictions] == ["default/low-1"]
        else:
            assert res.evictions == []


def test_reclaimable_filters_victims(server: tuple[ExtenderServer, Extender]) -> None:
    s, e = server

    def snap() -> ClusterSnapshot:
        other = mk_job("other", "q2", min_available=0)
        add_tasks(other, 2, "1", "1Gi", status=R, node="n1")
        mine = mk_job("mine", "q1", min_available=1)
        add_tasks(mine, 1, "1", "1Gi")
        return mk_snapshot(
            [mk_node("n1", "2")], [other, mine], [mk_queue("q1"), mk_queue("q2"), mk_queue("default")]
        )

    tier1 = ["priority", "gang", "conformance"]
    res0, _ = run(snap(), conf(s.url, "reclaim", tier1=tier1))
    assert [ev.task for ev in res0.evictions] == ["default/other-1"]
    e.answers["reclaim"] = lambda b: {
        "status": 1,
        "victims": [t for t in b["evictees"] if t["Name"] == "other-0"],
    }
    res, _ = run(snap(), conf(s.url, "reclaim", tier1=tier1, reclaimableVerb="reclaim"))
    assert [ev.task for ev in res.evictions] == ["default/other-0"]
    e.answers["reclaim"] = Reply(status=500)
    res, _ = run(snap(), conf(s.url, "reclaim", tier1=tier1, reclaimableVerb="reclaim", ignorable=True))
    # An error (ignorable or not) answers no victims: the first tier decides nothing, the next
    # tier's plugins (proportion) choose.
    assert [ev.reason.rsplit("by ", 1)[1] for ev in res.evictions] == ["proportion"]


# ------------------------------------------------------------------------------ queue and job verbs
def test_job_enqueueable_and_overused(server: tuple[ExtenderServer, Extender]) -> None:
    s, e = server

    def pending_job() -> ClusterSnapshot:
        # minResources set: Volcano's enqueue asks JobEnqueueable only then.
        job = mk_job("pg1", min_available=1, phase="Pending", min_resources=rl(cpu="1"))
        mk_task(job, "p1")
        return mk_snapshot([mk_node("n1")], [job])

    e.answers["enq"] = {"status": -1}
    res, _ = run(pending_job(), conf(s.url, "enqueue, allocate", jobEnqueueableVerb="enq"))
    assert res.binds == {} and res.podgroups["default/pg1"].phase == "Pending"
    e.answers["enq"] = {"status": 1}
    res, _ = run(pending_job(), conf(s.url, "enqueue, allocate", jobEnqueueableVerb="enq"))
    assert res.binds == {"default/p1": "n1"}
    assert [b["job"]["UID"] for v, b in s.requests if v == "enq"] == ["default/pg1", "default/pg1"]
    e.answers["over"] = {"overused": True}
    res, _ = run(two_nodes_one_pod(), conf(s.url, queueOverusedVerb="over"))
    assert res.binds == {}
    assert [b["queue"]["Name"] for v, b in s.requests if v == "over"][:1] == ["default"]
    e.answers["over"] = Reply(status=500)
    res, _ = run(two_nodes_one_pod(), conf(s.url, queueOverusedVerb="over", ignorable=True))
    assert res.binds == {"default/p1": "n1"}


def test_allocate_func_error_rolls_back(server: tuple[ExtenderServer, Extender]) -> None:
    s, e = server
    e.answers["alloc"] = {"errorMessage": "quota exhausted"}
    res, _ = run(two_nodes_one_pod(), conf(s.url, allocateFuncVerb="alloc"))
    assert res.binds == {}
    e.answers["alloc"] = {}
    res, _ = run(two_nodes_one_pod(), conf(s.url, allocateFuncVerb="alloc"))
    assert res.binds == {"default/p1": "n1"}


# ------------------------------------------------------------------------------ managed resources
def gpu_pod(where: str) -> PodFacts:
    c = (
        ContainerResources(init=True, requests={"nvidia.com/gpu": 1})
        if where == "init"
        else ContainerResources(**{where: {"nvidia.com/gpu": 1}})  # type: ignore[arg-type]
    )
    return PodFacts(extended_resources=(c,))


@pytest.mark.parametrize(
    ("managed", "pod", "expected"),
    [
        ([], PodFacts(), True),  # empty managed resources: interested
        (["nvidia.com/gpu"], gpu_pod("requests"), True),
        (["nvidia.com/gpu"], gpu_pod("limits"), True),
        (["nvidia.com/gpu"], gpu_pod("init"), True),
        (["nvidia.com/gpu"], PodFacts(), False),
        (["nvidia.com/gpu", "amd.com/gpu"], gpu_pod("requests"), True),
        # TestHasManagedResources: a second container holds it; an empty container; partial match.
        (
            ["nvidia.com/gpu"],
            PodFacts(
                extended_resources=(
                    ContainerResources(),
                    ContainerResources(requests={"nvidia.com/gpu": 1}),
                )
            ),
            True,
        ),
        (["nvidia.com/gpu"], PodFacts(extended_resources=(ContainerResources(),)), False),
        (
            ["nvidia.com/gpu", "amd.com/gpu"],
            PodFacts(
                extended_resources=(ContainerResources(requests={"intel.com/gpu": 1, "nvidia.com/gpu": 1}),)
            ),
            True,
        ),
    ],
)
def test_is_interested(managed: list[str], pod: PodFacts, expected: bool) -> None:
    # extender_test.go TestIsInterested.
    p = ext.ExtenderPlugin({"extender.managedResources": managed})
    t = mk_task("pg1", "p1", pod=pod)
    assert p.interested(t) is expected


def test_uninterested_tasks_are_not_asked(server: tuple[ExtenderServer, Extender]) -> None:
    s, e = server
    e.answers["filter"] = {"status": "never"}
    res, _ = run(
        two_nodes_one_pod(), conf(s.url, predicateVerb="filter", managedResources=["nvidia.com/gpu"])
    )
    assert res.binds == {"default/p1": "n1"} and s.requests == []


# ------------------------------------------------------------------------------ record and replay
def test_replay_answers_from_the_record_with_the_server_stopped() -> None:
    e = Extender()
    e.answers["filter"] = lambda b: {"status": "no"} if b["node"]["Name"] == "n1" else {}
    e.answers["score"] = {"nodeScore": {"n2": 1}}
    s = ExtenderServer(e).start()
    c = conf(s.url, predicateVerb="filter", prioritizeVerb="score", onSessionOpenVerb="open")
    live, port = run(two_nodes_one_pod(), c)
    s.stop()
    assert live.binds == {"default/p1": "n2"} and port.records
    replay_port = ReplayPort(port.records, cycle=1)
    again = run_session(two_nodes_one_pod(), c, callouts=replay_port)
    assert again.binds == live.binds and again.pending == live.pending
    assert replay_port.records == port.records
    # A question the record does not hold fails, naming the verb; nothing calls out.
    with pytest.raises(CalloutUnavailable, match="extender verb 'filter'"):
        run_session(two_nodes_one_pod(), c, callouts=ReplayPort(port.records[:1], cycle=1))
    # A session without a port cannot call out either.
    with pytest.raises(CalloutUnavailable, match="no callout port"):
        run_session(two_nodes_one_pod(), c)


# ------------------------------------------------------------------------------ arguments
@pytest.mark.parametrize(
    ("arguments", "error"),
    [
        ({"extender.httpTimeout": "soon"}, "arguments.extender.httpTimeout: not a Go duration"),
        ({"extender.httpTimeout": 5}, "arguments.extender.httpTimeout: must be a string"),
        ({"extender.predicateVerb": 1}, "arguments.extender.predicateVerb: must be a string"),
        ({"extender.ignorable": "maybe"}, "arguments.extender.ignorable: must be true or false"),
        (
            {"extender.managedResources": "nvidia.com/gpu"},
            "arguments.extender.managedResources: must be a list",
        ),
        ({"extender.urlPrefix": None}, "arguments.extender.urlPrefix: required when a verb is set"),
        ({"extender.urlPrefix": "127.0.0.1:80"}, "arguments.extender.urlPrefix: must be an http"),
    ],
)
def test_bad_arguments_are_one_line_naming_the_field(arguments: dict[str, Any], error: str) -> None:
    args = {"extender.urlPrefix": "http://127.0.0.1:1", "extender.predicateVerb": "filter", **arguments}
    args = {k: v for k, v in args.items() if v is not None}
    text = 'actions: "allocate"\ntiers:\n- plugins:\n  - name: extender\n    arguments:\n'
    import yaml

    text += "".join(f"      {line}\n" for line in yaml.safe_dump(args).splitlines())
    with pytest.raises(ConfError) as info:
        parse_scheduler_conf(text, "conf.yaml")
    msg = str(info.value)
    assert msg.startswith("conf.yaml: tiers[0].plugins[0].") and error in msg and "\n" not in msg


def test_arguments_defaults_and_warnings() -> None:
    c = ext.parse_config({"extender.urlPrefix": "http://x", "extender.ignorable": "true"})
    assert c.timeout_s == 1.0 and c.ignorable is True and c.managed == frozenset()
    assert ext.parse_config({"extender.httpTimeout": "0s"}).timeout_s == 0.0
    text = (
        'actions: "allocate"\ntiers:\n- plugins:\n  - name: extender\n    arguments:\n'
        "      extender.urlPrefix: http://x\n      extender.predicateverb: filter\n"
    )
    conf_ = parse_scheduler_conf(text, "conf.yaml")
    assert any("did you mean 'extender.predicateVerb'" in w for w in conf_.warnings)
