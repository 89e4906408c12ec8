"""CycleClosed carries measured seconds per action (for the action latency metric), and
`comparable` blanks them so replay never compares measurements."""

from __future__ import annotations

from pathlib import Path

from fumarole.daemon.manifests import build_snapshot, load_objects
from fumarole.daemon.runtime.conf_watch import bundled_conf_text, parse_scheduler_conf
from fumarole.daemon.runtime.cycle import comparable, decide

EXAMPLE = Path(__file__).resolve().parents[2] / "daemon" / "examples" / "cluster.yaml"


def test_action_seconds_are_measured_per_configured_action() -> None:
    conf = parse_scheduler_conf(bundled_conf_text(), "bundled")
    out = decide(build_snapshot(load_objects(EXAMPLE)), conf, cycle=1, watermark=0, conf_hash="h")
    closed = out.closed
    assert list(closed.action_seconds) == list(conf.actions)
    assert all(v >= 0.0 for v in closed.action_seconds.values())
    assert comparable(closed).action_seconds == {}
