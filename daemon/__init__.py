"""Fumarole service process: the scheduler core, cache, adapters, runtime and CLI."""
