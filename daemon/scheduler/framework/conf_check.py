"""A Volcano scheduler configuration checked against what this Fumarole implements: the one
parse every command uses (`fumarole schedule`, `replay --conf`, the daemon's configuration
watcher), on top of `conf.parse_conf` (which knows Volcano's format) and the registries (which
know the actions and plugins that exist here)."""

from __future__ import annotations

import importlib

from fumarole.daemon.scheduler.framework.conf import ConfError, SchedulerConf, parse_conf
from fumarole.daemon.scheduler.framework.registry import (
    ACTIONS,
    ARGUMENT_CHECKS,
    KNOWN_UNIMPLEMENTED_ACTIONS,
    PLUGINS,
    VOLCANO_ONLY_PLUGINS,
)

__all__ = ["ConfError", "parse_scheduler_conf"]


def parse_scheduler_conf(text: str, source: str, *, strict: bool = False) -> SchedulerConf:
    """Parse and check a Volcano configuration; raises ConfError naming the source and key.

    Volcano skips what it does not know (a plugin name, a flag for a feature it lacks) with a
    warning, and so do we; with `strict` any such warning is an error instead.  An action that
    Volcano has and this Fumarole does not is always an error.
    """
    conf = parse_conf(
        text,
        source=source,
        known_actions=frozenset(ACTIONS) | KNOWN_UNIMPLEMENTED_ACTIONS,
        known_plugins=frozenset(PLUGINS),
        volcano_only_plugins=VOLCANO_ONLY_PLUGINS,
    )
    _check_plugin_arguments(conf, source)
    if strict and conf.warnings:
        raise ConfError(f"{'; '.join(conf.warnings)} (strict: a configuration warning is an error)")
    missing = [a for a in conf.actions if a not in ACTIONS]
    if missing:
        raise ConfError(
            f"{source}: actions: {', '.join(missing)} not implemented in this version of Fumarole "
            f"(implemented: {', '.join(sorted(ACTIONS))})"
        )
    return conf


def _check_plugin_arguments(conf: SchedulerConf, source: str) -> None:
    """Plugins that check their arguments at parse time (registry.ARGUMENT_CHECKS): a bad one is
    an error naming `tiers[i].plugins[j].arguments.<key>`; their warnings join the conf's."""
    for ti, tier in enumerate(conf.tiers):
        for pi, opt in enumerate(tier.plugins):
            module = ARGUMENT_CHECKS.get(opt.name)
            if module is None:
                continue
            where = f"{source}: tiers[{ti}].plugins[{pi}].arguments"
            try:
                warnings = importlib.import_module(module).check_arguments(opt.arguments)
            except ValueError as e:
                field = getattr(e, "field", "")
                message = getattr(e, "message", str(e))
                raise ConfError(f"{where}.{field}: {message}" if field else f"{where}: {message}") from None
            conf.warnings.extend(f"{where}: {w}" for w in warnings)
