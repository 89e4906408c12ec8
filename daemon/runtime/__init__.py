"""The service runtime: ingest, timed sessions, decision dispatch, replay and telemetry."""
