"""Replay of cycles that called out: `decide` with a recording port writes cycle.callouts right
after CycleOpened; replay answers the re-run session from it (the extender stopped), finds the
cycle identical, reports a cycle whose answers are missing as DIFFERENT naming the verb, and
decides on the recorded answers, not on what the extender would say now."""

from __future__ import annotations

import sys
from pathlib import Path
from typing import Any

import anyio
import msgspec

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))
from fumarole_extender_server import ExtenderServer

from fumarole.daemon.cache import Projection
from fumarole.daemon.callouts_http import HttpCalloutPort
from fumarole.daemon.runtime.conf_watch import conf_hash, parse_scheduler_conf
from fumarole.daemon.runtime.cycle import decide
from fumarole.daemon.runtime.replay import replay
from fumarole.daemon.scheduler.framework.callout import RecordingPort
from fumarole.store.events import BindDecided, CalloutsRecorded, ConfigurationRecorded, CycleOpened, upserted
from fumarole.store.memory import MemoryEventLog

CONF = """\
actions: "allocate"
tiers:
- plugins:
  - name: predicates
  - name: extender
    arguments:
      extender.urlPrefix: {url}
      extender.predicateVerb: filter
"""


def manifests() -> list[dict[str, Any]]:
    out: list[dict[str, Any]] = []
    for n in ("n1", "n2"):
        out.append(
            {
                "apiVersion": "v1",
                "kind": "Node",
                "metadata": {"name": n},
                "status": {"allocatable": {"cpu": "4", "memory": "8Gi", "pods": "10"}},
            }
        )
    out.append(
        {
            "apiVersion": "scheduling.volcano.sh/v1beta1",
            "kind": "Queue",
            "metadata": {"name": "default"},
            "spec": {"weight": 1},
        }
    )
    out.append(
        {
            "apiVersion": "scheduling.volcano.sh/v1beta1",
            "kind": "PodGroup",
            "metadata": {"name": "pg1", "namespace": "c1"},
            "spec": {"queue": "default", "minMember": 1},
            "status": {"phase": "Inqueue"},
        }
    )
    out.append(
        {
            "apiVersion": "v1",
            "kind": "Pod",
            "metadata": {
                "name": "p1",
                "namespace": "c1",
                "uid": "uid-p1",
                "annotations": {"scheduling.k8s.io/group-name": "pg1"},
            },
            "spec": {
                "schedulerName": "volcano",
                "containers": [{"name": "c", "resources": {"requests": {"cpu": "1"}}}],
            },
            "status": {"phase": "Pending"},
        }
    )
    return out


async def history(url: str, tamper: Any = None) -> MemoryEventLog:
    """Configuration, facts, one cycle decided with a live recording port; `tamper(event)` may
    change the cycle.callouts event before it is logged."""
    log = MemoryEventLog()
    p = Projection()
    text = CONF.format(url=url)
    conf = parse_scheduler_conf(text, "conf.yaml")
    first = [
        ConfigurationRecorded(conf_hash=conf_hash(text), text=text),
        *(upserted(m, 1_000) for m in manifests()),
    ]
    for s, e in zip(await log.append(first), first, strict=True):
        p.fold(s, e)
    port = RecordingPort(HttpCalloutPort())
    d = decide(p.freeze(cycle=1), conf, cycle=1, watermark=p.seq, conf_hash=conf_hash(text), callouts=port)
    events = [tamper(e) if tamper is not None and isinstance(e, CalloutsRecorded) else e for e in d.events]
    await log.append(events)
    return log


def answer(verb: str, body: Any) -> Any:
    return {"status": "reserved"} if body["node"]["Name"] == "n1" else {}


def test_replay_answers_from_the_log_with_the_extender_stopped() -> None:
    server = ExtenderServer(answer).start()
    try:
        good = anyio.run(history, server.url)
        missing = anyio.run(history, server.url, lambda e: msgspec.structs.replace(e, calls=e.calls[:1]))
        # n1's "reserved" answer replaced by an empty one: replay must decide on the log's answer.
        flipped = anyio.run(
            history,
            server.url,
            lambda e: msgspec.structs.replace(
                e, calls=tuple(msgspec.structs.replace(c, body="{}") for c in e.calls)
            ),
        )
        asked = len(server.requests)
    finally:
        server.stop()
    assert asked == 6  # two nodes, three histories; nothing more is ever asked

    rows = anyio.run(_rows, good)
    types = [type(r) for r in rows]
    i = types.index(CycleOpened)
    assert types[i + 1] is CalloutsRecorded and types[i + 2] is BindDecided
    calls = rows[i + 1].calls
    assert [(c.verb, c.status) for c in calls] == [("filter", 200), ("filter", 200)]
    assert calls[0].url == f"{server.url}/filter" and len(calls[0].digest) == 64
    assert [(b.name, b.node) for b in rows if isinstance(b, BindDecided)] == [("p1", "n2")]

    report = anyio.run(replay, good)
    assert [v.identical for v in report.cycles] == [True]

    report = anyio.run(replay, missing)
    [v] = report.cycles
    assert not v.identical
    assert v.difference.startswith("cycle 1: extender verb 'filter' asked something the log does not record")
    assert "replay does not call out" in v.difference

    # The live cycle decided n2 on the extender's answers; the log's answers were then altered (n1
    # allowed): replay decides on the log's answers (n1), so the cycle differs at its bind.
    rows = anyio.run(_rows, flipped)
    assert [(b.name, b.node) for b in rows if isinstance(b, BindDecided)] == [("p1", "n2")]
    report = anyio.run(replay, flipped)
    [v] = report.cycles
    assert not v.identical and "decision.bind c1/p1 -> n2" in v.difference and "-> n1" in v.difference


async def _rows(log: MemoryEventLog) -> list[Any]:
    return [r.event async for r in log.read_range(1, await log.last_seq())]
