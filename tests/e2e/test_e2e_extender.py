"""The extender plugin in a simulated run (the daemon as a subprocess, a real extender on
127.0.0.1): its answers are logged as cycle.callouts right after each cycle's CycleOpened and
before the decisions, they steer the binds, and `fumarole replay` re-decides every cycle
identically from the log with the extender stopped; an alternative configuration that would
ask something new is refused (its answers cannot be known offline)."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path
from typing import Any

from fumarole_e2e_kit import FUMAROLE, assert_replays_identically, env, read_log, run_daemon, write_small_sim

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))
from fumarole_extender_server import ExtenderServer

from fumarole.store.events import BindDecided, CalloutsRecorded, CycleOpened

CONF = """\
actions: "enqueue, allocate, backfill"
tiers:
- plugins:
  - name: priority
  - name: gang
  - name: conformance
- plugins:
  - name: drf
  - name: predicates
  - name: proportion
  - name: nodeorder
  - name: extender
    arguments:
      extender.urlPrefix: {url}
      extender.httpTimeout: 2s
      extender.predicateVerb: filter
      extender.prioritizeVerb: {score}
"""


def answer(verb: str, body: Any) -> Any:
    if verb == "filter":  # n0 is the extender's own: nothing may go there
        return {"status": "n0 is reserved by the extender", "code": 2} if body["node"]["Name"] == "n0" else {}
    if verb == "score":  # n3 first, then n2
        return {"nodeScore": {"n3": 1000.0, "n2": 500.0}}
    return {}


def test_extender_answers_are_logged_and_replayed_without_the_extender(tmp_path: Path) -> None:
    c, w = write_small_sim(tmp_path, jobs=8)
    server = ExtenderServer(answer).start()
    conf = tmp_path / "sched.yaml"
    conf.write_text(CONF.format(url=server.url, score="score"))
    data = tmp_path / "data"
    try:
        args = ["--data-dir", str(data), "--cluster", str(c), "--workload", str(w), "--conf", str(conf)]
        p = run_daemon(*args, "--no-api")
    finally:
        server.stop()
    assert p.returncode == 0, p.stdout + p.stderr
    assert {"filter", "score"} <= set(server.verbs())
    rows = read_log(data / "fumarole.db")
    binds = [r.event for r in rows if isinstance(r.event, BindDecided)]
    assert binds and not [b for b in binds if b.node == "n0"]
    assert binds[0].node == "n3"
    # Every cycle that called out has its answers right after its CycleOpened, before its decisions.
    callouts = [(i, r.event) for i, r in enumerate(rows) if isinstance(r.event, CalloutsRecorded)]
    assert callouts
    for i, ev in callouts:
        opened = rows[i - 1].event
        assert isinstance(opened, CycleOpened) and opened.cycle == ev.cycle
        assert {c.verb for c in ev.calls} <= {"filter", "score"}
        assert all(c.status == 200 and c.url.startswith(server.url) for c in ev.calls)
    asked = sum(len(ev.calls) for _, ev in callouts)
    assert asked == len(server.requests)  # every question the extender got is in the log

    # The extender is gone: replay answers from the log.
    assert_replays_identically(data / "fumarole.db")

    # An alternative configuration asking another verb cannot be answered offline: one line, exit 2.
    alt = tmp_path / "alt.yaml"
    alt.write_text(CONF.format(url=server.url, score="score2"))
    what_if = subprocess.run(
        [FUMAROLE, "replay", "--db", str(data / "fumarole.db"), "--conf", str(alt)],
        capture_output=True,
        text=True,
        env=env(),
        timeout=240,
    )
    assert what_if.returncode == 2, what_if.stdout + what_if.stderr
    assert "extender verb 'score2'" in what_if.stderr and "replay does not call out" in what_if.stderr
    assert len(what_if.stderr.strip().splitlines()) == 1
