"""Tracing set-up for the daemon: an OTLP/HTTP exporter configured by the standard OTEL_* variables.

Tracing is off unless an OTLP endpoint is configured (`OTEL_EXPORTER_OTLP_ENDPOINT` or
`OTEL_EXPORTER_OTLP_TRACES_ENDPOINT`), or `OTEL_TRACES_EXPORTER` names `otlp`/`console`.
`OTEL_SDK_DISABLED=true` or `OTEL_TRACES_EXPORTER=none` force it off.  The exporter itself
reads the remaining standard variables (headers, compression, and the timeout when one is set;
otherwise each export gives up after EXPORT_TIMEOUT_S); the service name comes from
`OTEL_SERVICE_NAME` (default "fumarole").  The provider is returned, never set globally, so
tests can inject their own.

A collector that does not answer costs the run nothing: spans are exported from the SDK's
background thread, and `GuardedExporter` drops every batch for RETRY_AFTER_S after a failed
export instead of letting each one retry (so the queue never fills and the shutdown's last
flush returns at once), with one warning line for the outage and one when the collector answers
again; the SDK's own per-attempt lines are silenced.
"""

from __future__ import annotations

import logging
import os
import threading
import time
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass

from opentelemetry.sdk.resources import Resource
from opentelemetry.sdk.trace import ReadableSpan, TracerProvider
from opentelemetry.sdk.trace.export import (
    BatchSpanProcessor,
    ConsoleSpanExporter,
    SpanExporter,
    SpanExportResult,
)
from opentelemetry.trace import Span

_FALSE = {"", "0", "false", "no", "off"}

log = logging.getLogger("fumarole.tracing")

EXPORT_TIMEOUT_S = 2.0
"""Seconds one export may take, its retries included, unless OTEL_EXPORTER_OTLP_[TRACES_]TIMEOUT says."""
RETRY_AFTER_S = 30.0
"""Seconds spans are dropped, without trying, after an export failed."""

# The SDK's loggers that print a line per attempt and per dropped span (through Python's last-resort
# handler, unformatted): GuardedExporter says it once instead.
_SDK_LOGGERS = (
    "opentelemetry.exporter.otlp.proto.http.trace_exporter",
    "opentelemetry.exporter.otlp.common.http",
    "opentelemetry.sdk._shared_internal",
    "opentelemetry.sdk.trace.export",
)


class GuardedExporter(SpanExporter):
    """An exporter that gives up on an unreachable collector for a while instead of retrying
    every batch: after a failed export, batches are dropped without a try for `retry_after`
    seconds; one warning when the collector stops answering, one info line when it answers again."""

    def __init__(
        self,
        inner: SpanExporter,
        endpoint: str,
        *,
        retry_after: float = RETRY_AFTER_S,
        clock: Callable[[], float] = time.monotonic,
    ) -> None:
        self.inner = inner
        self.endpoint = endpoint
        self.retry_after = retry_after
        self._clock = clock
        self._lock = threading.Lock()
        self._down_until: float | None = None  # while set: the collector failed; try again after it
        self.dropped = 0  # spans dropped without a try while the collector was down

    def export(self, spans: Sequence[ReadableSpan]) -> SpanExportResult:
        with self._lock:
            if self._down_until is not None and self._clock() < self._down_until:
                self.dropped += len(spans)
                return SpanExportResult.FAILURE
        try:
            result = self.inner.export(spans)
        except Exception:  # an exporter bug must not stop the SDK's thread
            result = SpanExportResult.FAILURE
        with self._lock:
            if result is SpanExportResult.SUCCESS:
                if self._down_until is not None:
                    log.info("tracing: the OTLP collector at %s answers again", self.endpoint)
                self._down_until = None
            else:
                if self._down_until is None:
                    log.warning(
                        "tracing: the OTLP collector at %s did not take spans (not reachable, too slow "
                        "or refusing them); spans are dropped, tried again every %.0f s; scheduling "
                        "goes on",
                        self.endpoint,
                        self.retry_after,
                    )
                self._down_until = self._clock() + self.retry_after
        return result

    def shutdown(self) -> None:
        self.inner.shutdown()

    def force_flush(self, timeout_millis: int = 30000) -> bool:
        return self.inner.force_flush(timeout_millis)


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

        for name in _SDK_LOGGERS:
            logging.getLogger(name).setLevel(logging.CRITICAL)
        environ = os.environ if env is None else env
        timed = any(
            environ.get(v, "").strip()
            for v in ("OTEL_EXPORTER_OTLP_TRACES_TIMEOUT", "OTEL_EXPORTER_OTLP_TIMEOUT")
        )
        inner = OTLPSpanExporter() if timed else OTLPSpanExporter(timeout=EXPORT_TIMEOUT_S)
        exporter = GuardedExporter(inner, choice.endpoint)
    provider = TracerProvider(resource=Resource.create({"service.name": choice.service_name}))
    provider.add_span_processor(BatchSpanProcessor(exporter))
    return provider


def trace_id_hex(span: Span) -> str:
    """The span's trace id as 32 hex digits, or "" for a non-recording span."""
    ctx = span.get_span_context()
    return format(ctx.trace_id, "032x") if ctx.is_valid else ""
