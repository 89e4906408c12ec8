"""The scheduler configuration in Volcano's file format: parsing, defaults and validation."""

from __future__ import annotations

import difflib
import hashlib
from dataclasses import dataclass, field
from typing import Any

import yaml

DEFAULT_SCHEDULER_CONF = """\
actions: "enqueue, allocate, backfill"
tiers:
- plugins:
  - name: priority
  - name: gang
  - name: conformance
- plugins:
  - name: overcommit
  - name: drf
  - name: predicates
  - name: proportion
  - name: nodeorder
"""

# YAML key -> attribute name.  Every one of these is defaulted to true when a file is loaded
# (plugins/defaults.go); enableHierarchy and enabledClusterOrder are not defaulted.
DEFAULTED_FLAGS: dict[str, str] = {
    "enableJobOrder": "job_order",
    "enableJobReady": "job_ready",
    "enableJobPipelined": "job_pipelined",
    "enableJobEnqueued": "job_enqueued",
    "enableTaskOrder": "task_order",
    "enablePreemptable": "preemptable",
    "enableReclaimable": "reclaimable",
    "enablePreemptive": "preemptive",
    "enableQueueOrder": "queue_order",
    "enablePredicate": "predicate",
    "enableBestNode": "best_node",
    "enableNodeOrder": "node_order",
    "enableTargetJob": "target_job",
    "enableReservedNodes": "reserved_nodes",
    "enabledVictim": "victim",
    "enableJobStarving": "job_starving",
    "enabledOverused": "overused",
    "enabledAllocatable": "allocatable",
    "enabledHyperNodeOrder": "hyper_node_order",
    "enabledSubJobReady": "sub_job_ready",
    "enabledSubJobPipelined": "sub_job_pipelined",
    "enabledSubJobOrder": "sub_job_order",
    "enabledHyperNodeGradient": "hyper_node_gradient",
}
UNDEFAULTED_FLAGS: dict[str, str] = {
    "enableHierarchy": "hierarchy",
    "enabledClusterOrder": "cluster_order",
}
ALL_FLAGS = {**DEFAULTED_FLAGS, **UNDEFAULTED_FLAGS}
# Flags whose extension points serve features Fumarole does not implement (sub-jobs, cluster
# order, target job, reserved nodes); set explicitly to true they draw a warning.
UNSUPPORTED_FLAGS = frozenset(
    {
        "enabledSubJobReady",
        "enabledSubJobPipelined",
        "enabledSubJobOrder",
        "enabledClusterOrder",
        "enableTargetJob",
        "enableReservedNodes",
    }
)
TOP_LEVEL_KEYS = frozenset({"actions", "tiers", "configurations", "metrics"})


class ConfError(ValueError):
    """A configuration that cannot be used; the message names the key."""


def _did_you_mean(name: str, candidates: frozenset[str]) -> str:
    close = difflib.get_close_matches(name, sorted(candidates), n=1)
    return f"did you mean {close[0]!r}?" if close else ""


def unknown_plugin_message(name: str, implemented: frozenset[str], volcano_only: frozenset[str]) -> str:
    """What we say about a plugin name Fumarole has no builder for (Volcano logs and skips it).

    A name Volcano registers (`volcano_only`) is accepted as such; any other name is a typo or a
    plugin of another scheduler, and the closest known name is suggested.
    """
    if name in volcano_only:
        return f"plugin {name!r} is a Volcano plugin not implemented by Fumarole; it is skipped"
    hint = _did_you_mean(name, implemented | volcano_only)
    return f"unknown plugin {name!r} (not a Volcano plugin{'; ' + hint if hint else ''}); it is skipped"


@dataclass(slots=True)
class PluginOption:
    name: str
    flags: dict[str, bool | None] = field(default_factory=dict)
    arguments: dict[str, Any] = field(default_factory=dict)

    def enabled(self, attr: str) -> bool:
        """Volcano's isEnabled: nil is false (files have their defaults applied at load)."""
        return bool(self.flags.get(attr))


@dataclass(slots=True)
class Tier:
    plugins: list[PluginOption] = field(default_factory=list)


@dataclass(slots=True)
class SchedulerConf:
    actions: list[str]
    tiers: list[Tier]
    configurations: dict[str, dict[str, Any]]
    metrics: dict[str, str]
    text: str
    warnings: list[str] = field(default_factory=list)

    @property
    def digest(self) -> str:
        return hashlib.sha256(self.text.encode()).hexdigest()[:16]

    def action_arguments(self, action: str) -> dict[str, Any]:
        return self.configurations.get(action, {})

    def plugin_names(self) -> list[str]:
        return [p.name for t in self.tiers for p in t.plugins]


def parse_conf(
    text: str,
    *,
    source: str = "<conf>",
    known_actions: frozenset[str] | None = None,
    known_plugins: frozenset[str] | None = None,
    volcano_only_plugins: frozenset[str] = frozenset(),
    apply_defaults: bool = True,
) -> SchedulerConf:
    """Parse and validate a Volcano scheduler configuration.

    Unknown top-level keys, unknown action names, wrong types and drf-with-hierarchy beside
    proportion in one tier are errors naming the key.  Unknown plugin names are accepted with a
    warning (Volcano logs and skips them at session open) that tells a Volcano plugin Fumarole
    lacks (`volcano_only_plugins`) from a name Volcano does not know either.
    """
    try:
        data = yaml.safe_load(text)
    except yaml.YAMLError as e:
        raise ConfError(f"{source}: not valid YAML: {e}") from e
    if data is None:
        data = {}
    if not isinstance(data, dict):
        raise ConfError(f"{source}: the configuration must be a mapping, got {type(data).__name__}")
    warnings: list[str] = []
    for key in sorted(data):
        if key not in TOP_LEVEL_KEYS:
            raise ConfError(f"{source}: unknown key {key!r} (expected one of {sorted(TOP_LEVEL_KEYS)})")

    actions_raw = data.get("actions", "")
    if not isinstance(actions_raw, str):
        raise ConfError(f"{source}: actions: must be a comma-separated string")
    actions = [a.strip() for a in actions_raw.split(",")]
    if actions == [""]:
        raise ConfError(f"{source}: actions: no action configured")
    for i, a in enumerate(actions):
        if known_actions is not None and a not in known_actions:
            known = ", ".join(sorted(known_actions))
            hint = _did_you_mean(a, known_actions)
            raise ConfError(
                f"{source}: actions[{i}]: failed to find action {a!r} "
                f"({hint + ' ' if hint else ''}known: {known})"
            )

    tiers_raw = data.get("tiers") or []
    if not isinstance(tiers_raw, list):
        raise ConfError(f"{source}: tiers: must be a list")
    tiers: list[Tier] = []
    for ti, tier_raw in enumerate(tiers_raw):
        where = f"{source}: tiers[{ti}]"
        if not isinstance(tier_raw, dict) or set(tier_raw) - {"plugins"}:
            raise ConfError(f"{where}: a tier is a mapping with one key 'plugins'")
        plugins_raw = tier_raw.get("plugins") or []
        if not isinstance(plugins_raw, list):
            raise ConfError(f"{where}.plugins: must be a list")
        tier = Tier()
        hdrf = proportion = False
        for pi, p in enumerate(plugins_raw):
            pwhere = f"{where}.plugins[{pi}]"
            if not isinstance(p, dict):
                raise ConfError(f"{pwhere}: a plugin entry must be a mapping")
            name = p.get("name")
            if not isinstance(name, str) or not name:
                raise ConfError(f"{pwhere}.name: missing or not a string")
            opt = PluginOption(name=name)
            for key, value in p.items():
                if key in ("name",):
                    continue
                if key == "arguments":
                    if value is None:
                        value = {}
                    if not isinstance(value, dict):
                        raise ConfError(f"{pwhere}.arguments: must be a mapping")
                    opt.arguments = {str(k): v for k, v in value.items()}
                    continue
                if key not in ALL_FLAGS:
                    raise ConfError(f"{pwhere}.{key}: unknown plugin option for {name!r}")
                if not isinstance(value, bool):
                    raise ConfError(f"{pwhere}.{key}: must be true or false, got {value!r}")
                opt.flags[ALL_FLAGS[key]] = value
                if value and key in UNSUPPORTED_FLAGS:
                    warnings.append(
                        f"{pwhere}.{key}: accepted but Fumarole has no such extension point; ignored"
                    )
            if apply_defaults:
                for attr in DEFAULTED_FLAGS.values():
                    if opt.flags.get(attr) is None:
                        opt.flags[attr] = True
            if name == "drf" and opt.flags.get("hierarchy"):
                hdrf = True
            if name == "proportion":
                proportion = True
            if known_plugins is not None and name not in known_plugins:
                message = unknown_plugin_message(name, known_plugins, volcano_only_plugins)
                warnings.append(f"{pwhere}.name: {message}")
            tier.plugins.append(opt)
        if hdrf and proportion:
            raise ConfError(f"{where}: proportion and drf with hierarchy enabled conflicts")
        tiers.append(tier)

    confs_raw = data.get("configurations") or []
    if not isinstance(confs_raw, list):
        raise ConfError(f"{source}: configurations: must be a list")
    configurations: dict[str, dict[str, Any]] = {}
    for ci, c in enumerate(confs_raw):
        if not isinstance(c, dict) or not isinstance(c.get("name"), str):
            raise ConfError(f"{source}: configurations[{ci}]: needs a string 'name'")
        args = c.get("arguments") or {}
        if not isinstance(args, dict):
            raise ConfError(f"{source}: configurations[{ci}].arguments: must be a mapping")
        configurations[c["name"]] = {str(k): v for k, v in args.items()}

    metrics = data.get("metrics") or {}
    if not isinstance(metrics, dict):
        raise ConfError(f"{source}: metrics: must be a mapping")
    return SchedulerConf(
        actions=actions,
        tiers=tiers,
        configurations=configurations,
        metrics={str(k): str(v) for k, v in metrics.items()},
        text=text,
        warnings=warnings,
    )


# --------------------------------------------------------------------------- argument helpers
# These follow framework/arguments.go: a value of the wrong type keeps the default (Volcano logs a
# warning); GetBool also takes strconv.ParseBool strings; GetInt takes only integers; GetFloat64
# takes floats and integers.
GO_PARSE_BOOL = {
    "1": True,
    "t": True,
    "T": True,
    "TRUE": True,
    "true": True,
    "True": True,
    "0": False,
    "f": False,
    "F": False,
    "FALSE": False,
    "false": False,
    "False": False,
}


def arg_bool(args: dict[str, Any], key: str, default: bool) -> bool:
    v = args.get(key)
    if isinstance(v, bool):
        return v
    if isinstance(v, str) and v in GO_PARSE_BOOL:
        return GO_PARSE_BOOL[v]
    return default


def arg_int(args: dict[str, Any], key: str, default: int) -> int:
    v = args.get(key)
    if isinstance(v, int) and not isinstance(v, bool):
        return v
    return default


def arg_float(args: dict[str, Any], key: str, default: float) -> float:
    v = args.get(key)
    if isinstance(v, (int, float)) and not isinstance(v, bool):
        return float(v)
    return default


def arg_str(args: dict[str, Any], key: str, default: str) -> str:
    v = args.get(key)
    return v if isinstance(v, str) else default
