"""The live loop reaches the daemon through a typed protocol (live_loop.LiveService), public
members only; mypy checks that Service satisfies it where service.py calls run_live."""

from __future__ import annotations

import ast
from pathlib import Path

from fumarole.daemon.runtime import live_loop
from fumarole.daemon.runtime.live_loop import LiveService, run_live
from fumarole.daemon.runtime.service import Service

SOURCE = Path(live_loop.__file__).read_text()


def test_run_live_takes_the_protocol_not_any() -> None:
    assert run_live.__annotations__["service"] == "LiveService"  # postponed annotations: the name
    assert isinstance(LiveService, type) and getattr(LiveService, "_is_protocol", False)


def test_the_live_loop_uses_no_private_member_of_the_service() -> None:
    private = sorted(
        node.attr
        for node in ast.walk(ast.parse(SOURCE))
        if isinstance(node, ast.Attribute)
        and isinstance(node.value, ast.Name)
        and node.value.id == "service"
        and node.attr.startswith("_")
    )
    assert not private, private


def test_service_has_every_member_the_protocol_names() -> None:
    methods = ("stoppable", "wait_for_stop", "say", "account", "save_snapshot")
    attributes = ("settings", "stop_requested", "ready", "notifier")
    assert all(m in vars(LiveService) for m in (*methods, "stats"))
    assert all(a in LiveService.__annotations__ for a in attributes)
    assert all(callable(getattr(Service, m)) for m in methods)
