"""Tracing choice from OTEL_* variables, and JSON log lines carrying trace ids."""

from __future__ import annotations

import io
import json
import logging

import pytest
from opentelemetry.sdk.trace import TracerProvider
from opentelemetry.sdk.trace.export import SimpleSpanProcessor
from opentelemetry.sdk.trace.export.in_memory_span_exporter import InMemorySpanExporter

from fumarole.daemon.runtime.logs import configure_logging
from fumarole.daemon.runtime.telemetry import make_tracer_provider, trace_id_hex, tracing_choice


def test_tracing_off_unless_configured() -> None:
    assert tracing_choice({}).exporter == ""
    assert make_tracer_provider({}) is None
    assert tracing_choice({"OTEL_EXPORTER_OTLP_ENDPOINT": "http://x:4318"}).exporter == "otlp"
    assert tracing_choice({"OTEL_TRACES_EXPORTER": "otlp"}).endpoint == "http://localhost:4318"
    assert (
        tracing_choice({"OTEL_EXPORTER_OTLP_ENDPOINT": "http://x", "OTEL_SDK_DISABLED": "true"}).exporter
        == ""
    )
    assert (
        tracing_choice({"OTEL_EXPORTER_OTLP_ENDPOINT": "http://x", "OTEL_TRACES_EXPORTER": "none"}).exporter
        == ""
    )
    assert tracing_choice({"OTEL_SERVICE_NAME": "sched"}).service_name == "sched"


def test_grpc_protocol_is_refused_clearly() -> None:
    with pytest.raises(ValueError, match="http/protobuf"):
        tracing_choice({"OTEL_EXPORTER_OTLP_ENDPOINT": "http://x", "OTEL_EXPORTER_OTLP_PROTOCOL": "grpc"})


def test_otlp_provider_is_built() -> None:
    p = make_tracer_provider({"OTEL_EXPORTER_OTLP_ENDPOINT": "http://127.0.0.1:9"})
    assert p is not None
    p.shutdown()


def test_json_logs_carry_trace_id() -> None:
    exporter = InMemorySpanExporter()
    provider = TracerProvider()
    provider.add_span_processor(SimpleSpanProcessor(exporter))
    buf = io.StringIO()
    configure_logging("info", "json", buf)
    logger = logging.getLogger("fumarole.test")
    with provider.get_tracer("t").start_as_current_span("cycle") as span:
        logger.info("hello %s", "world", extra={"cycle": 7})
        tid = trace_id_hex(span)
    rec = json.loads(buf.getvalue().strip())
    assert rec["msg"] == "hello world"
    assert rec["level"] == "info"
    assert rec["cycle"] == 7
    assert rec["trace_id"] == tid and len(tid) == 32
    buf2 = io.StringIO()
    configure_logging("info", "text", buf2)
    logger.warning("plain", extra={"k": 1})
    assert buf2.getvalue().strip() == "warning fumarole.test: plain k=1"
