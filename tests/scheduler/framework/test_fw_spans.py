"""run_session emits session, plugin and action spans through an injected TracerProvider."""

from __future__ import annotations

from pathlib import Path

from opentelemetry.sdk.trace import TracerProvider
from opentelemetry.sdk.trace.export import SimpleSpanProcessor
from opentelemetry.sdk.trace.export.in_memory_span_exporter import InMemorySpanExporter

from fumarole.daemon.manifests import build_snapshot, load_objects
from fumarole.daemon.scheduler.framework.conf import DEFAULT_SCHEDULER_CONF, parse_conf
from fumarole.daemon.scheduler.framework.run import run_session

EXAMPLE = Path(__file__).resolve().parents[3] / "daemon" / "examples" / "cluster.yaml"


def test_spans_per_session_plugin_and_action_with_callback_stats() -> None:
    exporter = InMemorySpanExporter()
    provider = TracerProvider()
    provider.add_span_processor(SimpleSpanProcessor(exporter))
    conf = parse_conf(DEFAULT_SCHEDULER_CONF)
    result = run_session(build_snapshot(load_objects(EXAMPLE)), conf, tracer_provider=provider)
    spans = {s.name: s for s in exporter.get_finished_spans()}
    assert "session" in spans
    for action in ("enqueue", "allocate", "backfill"):
        assert f"action {action}" in spans
    for plugin in conf.plugin_names():
        assert f"plugin.open {plugin}" in spans
        assert f"plugin.close {plugin}" in spans
    root = spans["session"]
    assert root.attributes is not None
    assert root.attributes["session.binds"] == len(result.binds) > 0
    assert root.attributes["conf.hash"] == conf.digest
    alloc = spans["action allocate"]
    assert alloc.attributes is not None
    calls = {k: v for k, v in alloc.attributes.items() if k.endswith(".calls")}
    assert calls.get("plugin.proportion.allocatable.calls", 0) > 0
    assert calls.get("plugin.gang.jobReady.calls", 0) > 0
    for s in exporter.get_finished_spans():
        if s.name != "session":
            assert s.parent is not None and s.parent.span_id == root.context.span_id
