"""Explicit registries of actions and plugins (no import side effects)."""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

from daemon.scheduler.actions import allocate, backfill, enqueue
from daemon.scheduler.actions import gangpreempt as gangpreempt_action
from daemon.scheduler.actions import gangreclaim as gangreclaim_action
from daemon.scheduler.actions import preempt as preempt_action
from daemon.scheduler.actions import reclaim as reclaim_action
from daemon.scheduler.actions import shuffle as shuffle_action
from daemon.scheduler.framework.action import Action
from daemon.scheduler.framework.plugin import Plugin
from daemon.scheduler.plugins import (
    binpack,
    capacity,
    cdp,
    conformance,
    deviceshare,
    drf,
    fgd,
    gang,
    nodegroup,
    nodeorder,
    overcommit,
    pdb,
    predicates,
    priority,
    proportion,
    resource_strategy_fit,
    resourcequota,
    sla,
    task_topology,
    tdm,
)

ActionFactory = Callable[[], Action]
PluginFactory = Callable[[dict[str, Any]], Plugin]

ACTIONS: dict[str, ActionFactory] = {
    enqueue.NAME: enqueue.new,
    allocate.NAME: allocate.new,
    backfill.NAME: backfill.new,
    reclaim_action.NAME: reclaim_action.new,
    shuffle_action.NAME: shuffle_action.new,
    gangreclaim_action.NAME: gangreclaim_action.new,
    preempt_action.NAME: preempt_action.new,
    gangpreempt_action.NAME: gangpreempt_action.new,
}

PLUGINS: dict[str, PluginFactory] = {
    priority.NAME: priority.new,
    gang.NAME: gang.new,
    conformance.NAME: conformance.new,
    overcommit.NAME: overcommit.new,
    drf.NAME: drf.new,
    proportion.NAME: proportion.new,
    predicates.NAME: predicates.new,
    nodeorder.NAME: nodeorder.new,
    binpack.NAME: binpack.new,
    capacity.NAME: capacity.new,
    sla.NAME: sla.new,
    resourcequota.NAME: resourcequota.new,
    tdm.NAME: tdm.new,
    pdb.NAME: pdb.new,
    cdp.NAME: cdp.new,
    nodegroup.NAME: nodegroup.new,
    deviceshare.NAME: deviceshare.new,
    # beyond Volcano, opt-in: fragmentation gradient descent (Weng et al., ATC'23), docs/studies.md
    fgd.NAME: fgd.new,
    task_topology.NAME: task_topology.new,
    resource_strategy_fit.NAME: resource_strategy_fit.new,
}

# Plugins of Fumarole that Volcano does not have (opt-in: a configuration must name them).
BEYOND_VOLCANO_PLUGINS: frozenset[str] = frozenset({fgd.NAME})

# Volcano actions and plugins that exist upstream but are not (yet) implemented here: a
# configuration naming them is accepted with a warning (plugins) or refused clearly (actions).
KNOWN_UNIMPLEMENTED_ACTIONS: frozenset[str] = frozenset()
# Plugin names Volcano's factory.go registers that Fumarole has no builder for (commit ed72c7c8).
VOLCANO_ONLY_PLUGINS: frozenset[str] = frozenset(
    {"extender", "network-topology-aware", "numa-aware", "rescheduling", "usage"}
)
