"""The pure scheduling core: synchronous, deterministic, no I/O (OpenTelemetry API only)."""
