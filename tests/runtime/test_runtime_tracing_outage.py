"""A collector that is not there, or refuses spans, costs the run nothing and says so once:
GuardedExporter in front of the real OTLP/HTTP exporter, against a real HTTP server on loopback
(and a port nobody listens on), and the daemon itself with its endpoint on such a port."""

from __future__ import annotations

import logging
import socket
import sys
import threading
from collections.abc import Iterator
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path

import pytest
from opentelemetry.exporter.otlp.proto.http.trace_exporter import OTLPSpanExporter
from opentelemetry.sdk.trace import TracerProvider
from opentelemetry.sdk.trace.export import SimpleSpanProcessor, SpanExportResult
from opentelemetry.sdk.trace.export.in_memory_span_exporter import InMemorySpanExporter

from fumarole.daemon.runtime.telemetry import _SDK_LOGGERS, GuardedExporter, make_tracer_provider

sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "e2e"))
from fumarole_e2e_kit import run_daemon, write_small_sim


class _Collector(BaseHTTPRequestHandler):
    status = 400  # a refusal (not retried by the SDK), then 200 once it "comes back"
    requests = 0

    def do_POST(self) -> None:
        type(self).requests += 1
        self.rfile.read(int(self.headers.get("Content-Length", 0)))
        self.send_response(type(self).status)
        self.send_header("Content-Length", "0")
        self.end_headers()

    def log_message(self, *args: object) -> None:
        pass


@pytest.fixture
def collector() -> Iterator[tuple[str, type[_Collector]]]:
    handler = type("Collector", (_Collector,), {"status": 400, "requests": 0})
    server = ThreadingHTTPServer(("127.0.0.1", 0), handler)
    thread = threading.Thread(target=server.serve_forever, daemon=True)
    thread.start()
    try:
        yield f"http://127.0.0.1:{server.server_address[1]}/v1/traces", handler
    finally:
        server.shutdown()
        server.server_close()


def _spans(n: int = 3) -> list:  # type: ignore[type-arg]
    memory = InMemorySpanExporter()
    provider = TracerProvider()
    provider.add_span_processor(SimpleSpanProcessor(memory))
    tracer = provider.get_tracer("t")
    for i in range(n):
        with tracer.start_as_current_span(f"s{i}"):
            pass
    return list(memory.get_finished_spans())


def test_a_refusing_collector_is_not_asked_again_until_the_retry_time(
    collector: tuple[str, type[_Collector]], caplog: pytest.LogCaptureFixture
) -> None:
    url, handler = collector
    now = [100.0]
    guarded = GuardedExporter(
        OTLPSpanExporter(endpoint=url, timeout=2), url, retry_after=30, clock=lambda: now[0]
    )
    with caplog.at_level(logging.INFO, logger="fumarole.tracing"):
        assert guarded.export(_spans()) is SpanExportResult.FAILURE
        assert handler.requests == 1
        for _ in range(5):  # inside the 30 s: dropped without a request
            assert guarded.export(_spans()) is SpanExportResult.FAILURE
        assert handler.requests == 1 and guarded.dropped == 15
        now[0] += 31
        handler.status = 200
        assert guarded.export(_spans()) is SpanExportResult.SUCCESS
        assert handler.requests == 2
        assert guarded.export(_spans()) is SpanExportResult.SUCCESS and handler.requests == 3
    lines = [r.getMessage() for r in caplog.records if r.name == "fumarole.tracing"]
    assert len(lines) == 2, lines
    assert lines[0].startswith(f"tracing: the OTLP collector at {url} did not take spans")
    assert lines[1] == f"tracing: the OTLP collector at {url} answers again"
    guarded.shutdown()


def test_no_listener_fails_once_then_drops(caplog: pytest.LogCaptureFixture) -> None:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        port = s.getsockname()[1]  # closed again: nothing listens there
    url = f"http://127.0.0.1:{port}/v1/traces"
    guarded = GuardedExporter(OTLPSpanExporter(endpoint=url, timeout=1), url)
    with caplog.at_level(logging.WARNING, logger="fumarole.tracing"):
        for _ in range(20):
            assert guarded.export(_spans(1)) is SpanExportResult.FAILURE
    assert guarded.dropped == 19  # one try, then nothing until RETRY_AFTER_S
    assert sum(r.name == "fumarole.tracing" for r in caplog.records) == 1
    guarded.shutdown()


def test_the_otlp_provider_guards_its_exporter_and_silences_the_sdk() -> None:
    provider = make_tracer_provider({"OTEL_EXPORTER_OTLP_ENDPOINT": "http://127.0.0.1:9"})
    assert provider is not None
    processors = provider._active_span_processor._span_processors  # the one BatchSpanProcessor
    exporter = processors[0]._batch_processor._exporter
    assert isinstance(exporter, GuardedExporter) and exporter.endpoint == "http://127.0.0.1:9"
    assert exporter.inner._client._timeout == 2.0  # type: ignore[attr-defined]
    assert all(logging.getLogger(name).level == logging.CRITICAL for name in _SDK_LOGGERS)
    provider.shutdown()


def test_the_daemon_without_its_collector_prints_one_line(tmp_path: Path) -> None:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        port = s.getsockname()[1]
    c, w = write_small_sim(tmp_path, jobs=10)
    done = run_daemon(
        "--data-dir", str(tmp_path / "data"), "--cluster", str(c), "--workload", str(w), "--no-api",
        OTEL_EXPORTER_OTLP_ENDPOINT=f"http://127.0.0.1:{port}",
    )  # fmt: skip
    assert done.returncode == 0, done.stderr
    assert "== summary: workload drained" in done.stdout
    tracing = [line for line in done.stderr.splitlines() if "tracing" in line or "export" in line.lower()]
    assert len(tracing) == 1 and "did not take spans" in tracing[0], done.stderr
    assert "Transient error" not in done.stderr and "Queue full" not in done.stderr
