"""Tracing set-up for the daemon: an OTLP/HTTP exporter configured by the standard OTEL_* variables.

Tracing is off unless an OTLP endpoint is configured (`OTEL_EXPORTER_OTLP_ENDPOINT` or
`OTEL_EXPORTER_OTLP_TRACES_ENDPOINT`), or `OTEL_TRACES_EXPORTER` names `otlp`/`console`.
`OTEL_SDK_DISABLED=true` or `OTEL_TRACES_EXPORTER=none` force it off.  The exporter itself
reads the remaining standard variables (headers, timeout, compression); the service name
comes from `OTEL_SERVICE_NAME` (default "fumarole").  The provider is returned, never set
globally, so tests can inject their own.
"""

from __future__ import annotations

import os
from collections.abc import Mapping
from dataclasses import dataclass

from opentelemetry.sdk.resources import Resource
from opentelemetry.sdk.trace import TracerProvider
from opentelemetry.sdk.trace.export import BatchSpanProcessor, ConsoleSpanExporter, SpanExporter
from opentelemetry.trace import Span

_FALSE = {"", "0", "false", "no", "off"}


@dataclass(frozen=True, slots=True)
class TracingChoice:
    """What the environment asks for: `exporter` is "otlp", "console" or "" (off)."""

    exporter: str
    endpoint: str
    service_name: str


def tracing_choice(env: Mapping[str, str]) -> TracingChoice:
    service = env.get("OTEL_SERVICE_NAME", "").strip() or "fumarole"
    if env.get("OTEL_SDK_DISABLED", "").strip().lower() not in _FALSE:
        return TracingChoice("", "", service)
    endpoint = (
        env.get("OTEL_EXPORTER_OTLP_TRACES_ENDPOINT", "").strip()
        or env.get("OTEL_EXPORTER_OTLP_ENDPOINT", "").strip()
    )
    exporters = [e.strip().lower() for e in env.get("OTEL_TRACES_EXPORTER", "").split(",") if e.strip()]
    if "none" in exporters:
        return TracingChoice("", endpoint, service)
    if "console" in exporters:
        return TracingChoice("console", endpoint, service)
    if "otlp" in exporters or endpoint:
        protocol = (
            env.get("OTEL_EXPORTER_OTLP_TRACES_PROTOCOL", "") or env.get("OTEL_EXPORTER_OTLP_PROTOCOL", "")
        ).strip()
        if protocol and protocol != "http/protobuf":
            raise ValueError(
                f"OTEL_EXPORTER_OTLP_PROTOCOL={protocol!r}: only http/protobuf is supported "
                "(Jaeger accepts it on port 4318)"
            )
        return TracingChoice("otlp", endpoint or "http://localhost:4318", service)
    return TracingChoice("", "", service)


def make_tracer_provider(env: Mapping[str, str] | None = None) -> TracerProvider | None:
    """A TracerProvider exporting as the environment asks, or None when tracing is off."""
    choice = tracing_choice(os.environ if env is None else env)
    if not choice.exporter:
        return None
    exporter: SpanExporter
    if choice.exporter == "console":
        exporter = ConsoleSpanExporter()
    else:
        from opentelemetry.exporter.otlp.proto.http.trace_exporter import OTLPSpanExporter

        exporter = OTLPSpanExporter()
    provider = TracerProvider(resource=Resource.create({"service.name": choice.service_name}))
    provider.add_span_processor(BatchSpanProcessor(exporter))
    return provider


def trace_id_hex(span: Span) -> str:
    """The span's trace id as 32 hex digits, or "" for a non-recording span."""
    ctx = span.get_span_context()
    return format(ctx.trace_id, "032x") if ctx.is_valid else ""
