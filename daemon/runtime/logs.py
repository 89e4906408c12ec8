"""Structured logging for the daemon: one JSON object per line, carrying the current trace id.

Fields: ts (ISO-8601 UTC, the wall clock: logs are about the process, not decisions), level,
logger, msg, plus `trace_id`/`span_id` when a span is current and any `extra={...}` fields.
`--log-format text` gives plain lines for a terminal.
"""

from __future__ import annotations

import json
import logging
import sys
from datetime import UTC, datetime
from typing import Any, TextIO

from opentelemetry import trace

_STANDARD = frozenset(vars(logging.makeLogRecord({})).keys()) | {"message", "asctime"}


class JsonFormatter(logging.Formatter):
    def format(self, record: logging.LogRecord) -> str:
        out: dict[str, Any] = {
            "ts": datetime.fromtimestamp(record.created, UTC).isoformat(timespec="milliseconds"),
            "level": record.levelname.lower(),
            "logger": record.name,
            "msg": record.getMessage(),
        }
        ctx = trace.get_current_span().get_span_context()
        if ctx.is_valid:
            out["trace_id"] = format(ctx.trace_id, "032x")
            out["span_id"] = format(ctx.span_id, "016x")
        for key, value in vars(record).items():
            if key not in _STANDARD and not key.startswith("_"):
                out[key] = value
        if record.exc_info:
            out["exc"] = self.formatException(record.exc_info)
        return json.dumps(out, default=str, separators=(",", ":"))


class TextFormatter(logging.Formatter):
    def format(self, record: logging.LogRecord) -> str:
        extra = {k: v for k, v in vars(record).items() if k not in _STANDARD and not k.startswith("_")}
        tail = " ".join(f"{k}={v}" for k, v in extra.items())
        line = f"{record.levelname.lower():7} {record.name}: {record.getMessage()}"
        return f"{line} {tail}" if tail else line


def configure_logging(level: str = "info", fmt: str = "json", stream: TextIO | None = None) -> None:
    """Route the `fumarole` loggers to `stream` (stderr) in the chosen format."""
    handler = logging.StreamHandler(stream or sys.stderr)
    handler.setFormatter(JsonFormatter() if fmt == "json" else TextFormatter())
    root = logging.getLogger("fumarole")
    root.handlers[:] = [handler]
    root.setLevel(level.upper())
    root.propagate = False
