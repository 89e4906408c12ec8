"""The registries name every action and plugin by its module's NAME, importing modules only when used."""

from __future__ import annotations

import importlib
import json
import subprocess
import sys

import pytest

from fumarole.daemon.scheduler.framework import registry


@pytest.mark.parametrize("table", [registry.ACTIONS, registry.PLUGINS], ids=["actions", "plugins"])
def test_every_entry_is_its_module_name(table: dict[str, object]) -> None:
    for name, factory in table.items():
        assert isinstance(factory, registry.Deferred)
        module = importlib.import_module(factory.module)
        assert name == module.NAME
        assert callable(module.new)


def test_factories_build_the_modules_objects() -> None:
    from fumarole.daemon.scheduler.actions.allocate import Allocate
    from fumarole.daemon.scheduler.plugins.drf import DrfPlugin

    assert isinstance(registry.ACTIONS["allocate"](), Allocate)
    assert isinstance(registry.PLUGINS["drf"]({}), DrfPlugin)


def test_importing_the_session_runner_imports_no_plugin() -> None:
    code = (
        "import json, sys, fumarole.daemon.scheduler.framework.run\n"
        "print(json.dumps(sorted(m for m in sys.modules if m.startswith("
        "('fumarole.daemon.scheduler.plugins.', 'fumarole.daemon.scheduler.actions.')))))\n"
    )
    p = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True)
    loaded = json.loads(p.stdout)
    assert not [m for m in loaded if m.rsplit(".", 1)[-1] in {"capacity", "sla", "tdm", "preempt", "reclaim"}]
