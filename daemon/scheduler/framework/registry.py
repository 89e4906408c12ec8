"""Explicit registries of actions and plugins (no import side effects)."""

from __future__ import annotations

import importlib
from collections.abc import Callable
from typing import Any

from fumarole.daemon.scheduler.framework.action import Action
from fumarole.daemon.scheduler.framework.plugin import Plugin

ActionFactory = Callable[[], Action]
PluginFactory = Callable[[dict[str, Any]], Plugin]


class Deferred:
    """A module's `new` factory, imported on first call.

    A process imports only the actions and plugins its configuration names (`fumarole schedule`
    with the default configuration skips half of them).  tests/scheduler/framework/
    test_registry.py checks that every entry's module exists and that its NAME is the entry's key.
    """

    __slots__ = ("module",)

    def __init__(self, module: str) -> None:
        self.module = module

    def __call__(self, *args: Any) -> Any:
        return importlib.import_module(self.module).new(*args)

    def __repr__(self) -> str:
        return f"Deferred({self.module!r})"


_ACTIONS = "fumarole.daemon.scheduler.actions."
_PLUGINS = "fumarole.daemon.scheduler.plugins."

ACTIONS: dict[str, ActionFactory] = {
    "enqueue": Deferred(_ACTIONS + "enqueue"),
    "allocate": Deferred(_ACTIONS + "allocate"),
    "backfill": Deferred(_ACTIONS + "backfill"),
    "reclaim": Deferred(_ACTIONS + "reclaim"),
    "shuffle": Deferred(_ACTIONS + "shuffle"),
    "gangreclaim": Deferred(_ACTIONS + "gangreclaim"),
    "preempt": Deferred(_ACTIONS + "preempt"),
    "gangpreempt": Deferred(_ACTIONS + "gangpreempt"),
}

PLUGINS: dict[str, PluginFactory] = {
    "priority": Deferred(_PLUGINS + "priority"),
    "gang": Deferred(_PLUGINS + "gang"),
    "conformance": Deferred(_PLUGINS + "conformance"),
    "overcommit": Deferred(_PLUGINS + "overcommit"),
    "drf": Deferred(_PLUGINS + "drf"),
    "proportion": Deferred(_PLUGINS + "proportion"),
    "predicates": Deferred(_PLUGINS + "predicates"),
    "nodeorder": Deferred(_PLUGINS + "nodeorder"),
    "binpack": Deferred(_PLUGINS + "binpack"),
    "capacity": Deferred(_PLUGINS + "capacity"),
    "sla": Deferred(_PLUGINS + "sla"),
    "resourcequota": Deferred(_PLUGINS + "resourcequota"),
    "tdm": Deferred(_PLUGINS + "tdm"),
    "pdb": Deferred(_PLUGINS + "pdb"),
    "cdp": Deferred(_PLUGINS + "cdp"),
    "nodegroup": Deferred(_PLUGINS + "nodegroup"),
    "deviceshare": Deferred(_PLUGINS + "deviceshare"),
    # beyond Volcano, opt-in: fragmentation gradient descent (Weng et al., ATC'23), in docs/studies.md.
    "fgd": Deferred(_PLUGINS + "fgd"),
    # beyond Volcano, opt-in: the FGD paper's baselines (plugins/paper_scores.py), in docs/studies.md.
    "paper-random": Deferred(_PLUGINS + "paper_random"),
    "paper-dotprod": Deferred(_PLUGINS + "paper_dotprod"),
    "paper-gpuclustering": Deferred(_PLUGINS + "paper_gpuclustering"),
    "paper-gpupacking": Deferred(_PLUGINS + "paper_gpupacking"),
    "paper-bestfit": Deferred(_PLUGINS + "paper_bestfit"),
    "task-topology": Deferred(_PLUGINS + "task_topology"),
    "resource-strategy-fit": Deferred(_PLUGINS + "resource_strategy_fit"),
    "network-topology-aware": Deferred(_PLUGINS + "network_topology_aware"),
    "usage": Deferred(_PLUGINS + "usage"),
    "rescheduling": Deferred(_PLUGINS + "rescheduling"),
    "numa-aware": Deferred(_PLUGINS + "numa_aware"),
    "extender": Deferred(_PLUGINS + "extender"),
}

# Plugins whose arguments the configuration parse checks (conf_check.py): the module's
# `check_arguments(arguments)` raises a ValueError with `field` and `message`, returns warnings.
ARGUMENT_CHECKS: dict[str, str] = {"extender": _PLUGINS + "extender"}

# Plugins of Fumarole that Volcano does not have (opt-in: a configuration must name them).
BEYOND_VOLCANO_PLUGINS: frozenset[str] = frozenset(
    {"fgd", "paper-random", "paper-dotprod", "paper-gpuclustering", "paper-gpupacking", "paper-bestfit"}
)

# Volcano actions and plugins that exist upstream but are not (yet) implemented here: a
# configuration naming them is accepted with a warning (plugins) or refused clearly (actions).
KNOWN_UNIMPLEMENTED_ACTIONS: frozenset[str] = frozenset()
# Plugin names Volcano's factory.go registers that Fumarole has no builder for (commit ed72c7c8).
VOLCANO_ONLY_PLUGINS: frozenset[str] = frozenset()
