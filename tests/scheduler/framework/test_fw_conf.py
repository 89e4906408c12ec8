"""The scheduler configuration in Volcano's file format: defaults, validation, warnings."""

from __future__ import annotations

import pytest

from fumarole.daemon.scheduler.framework.conf import (
    DEFAULT_SCHEDULER_CONF,
    DEFAULTED_FLAGS,
    ConfError,
    arg_bool,
    arg_float,
    arg_int,
    arg_str,
    parse_conf,
)

KNOWN_ACTIONS = frozenset({"enqueue", "allocate", "backfill"})
KNOWN_PLUGINS = frozenset({"priority", "gang", "drf", "proportion"})


def test_default_conf() -> None:
    conf = parse_conf(DEFAULT_SCHEDULER_CONF)
    assert conf.actions == ["enqueue", "allocate", "backfill"]
    assert [[p.name for p in t.plugins] for t in conf.tiers] == [
        ["priority", "gang", "conformance"],
        ["overcommit", "drf", "predicates", "proportion", "nodeorder"],
    ]


def test_unset_flags_default_to_true_in_files_except_hierarchy() -> None:
    conf = parse_conf(
        """
actions: "allocate"
tiers:
- plugins:
  - name: gang
    enableJobOrder: false
  - name: drf
"""
    )
    gang, drf = conf.tiers[0].plugins
    assert gang.flags["job_order"] is False
    assert not gang.enabled("job_order")
    for attr in DEFAULTED_FLAGS.values():
        assert drf.enabled(attr), attr
        if attr != "job_order":
            assert gang.enabled(attr), attr
    assert not drf.enabled("hierarchy")
    assert not drf.enabled("cluster_order")


def test_flags_off_when_defaults_not_applied() -> None:
    conf = parse_conf('actions: "allocate"\ntiers:\n- plugins:\n  - name: gang\n', apply_defaults=False)
    assert not conf.tiers[0].plugins[0].enabled("job_ready")


def test_actions_are_trimmed_and_ordered() -> None:
    conf = parse_conf('actions: " allocate ,enqueue,  backfill"\n', known_actions=KNOWN_ACTIONS)
    assert conf.actions == ["allocate", "enqueue", "backfill"]


def test_unknown_action_is_rejected_naming_it() -> None:
    with pytest.raises(ConfError, match=r"actions\[1\].*'preemptx'"):
        parse_conf('actions: "allocate, preemptx"\n', known_actions=KNOWN_ACTIONS)


@pytest.mark.parametrize(
    ("text", "key"),
    [
        ('actions: ["allocate"]\n', "actions"),
        ('actions: ""\n', "actions"),
        ('actions: "allocate"\nfoo: 1\n', "foo"),
        ('actions: "allocate"\ntiers: {plugins: []}\n', "tiers"),
        ('actions: "allocate"\ntiers:\n- plugins: {name: gang}\n', "tiers[0].plugins"),
        (
            'actions: "allocate"\ntiers:\n- plugins:\n  - name: gang\n    enableJobOrder: "no"\n',
            "enableJobOrder",
        ),
        (
            'actions: "allocate"\ntiers:\n- plugins:\n  - name: gang\n    enableJobOrder: 1\n',
            "enableJobOrder",
        ),
        ('actions: "allocate"\ntiers:\n- plugins:\n  - name: gang\n    enableFoo: true\n', "enableFoo"),
        ('actions: "allocate"\ntiers:\n- plugins:\n  - name: gang\n    arguments: [1]\n', "arguments"),
        ('actions: "allocate"\ntiers:\n- plugins:\n  - enableJobOrder: true\n', "name"),
        ('actions: "allocate"\nconfigurations: {a: 1}\n', "configurations"),
        ('actions: "allocate"\nconfigurations:\n- arguments: {}\n', "configurations[0]"),
        ('actions: "allocate"\nmetrics: [1]\n', "metrics"),
        ("- a\n- b\n", "mapping"),
        ("actions: [\n", "YAML"),
    ],
)
def test_bad_confs_name_the_key(text: str, key: str) -> None:
    with pytest.raises(ConfError) as e:
        parse_conf(text, source="sched.yaml", known_actions=KNOWN_ACTIONS)
    assert key in str(e.value)
    assert str(e.value).startswith("sched.yaml")


def test_drf_hierarchy_with_proportion_in_one_tier_is_rejected() -> None:
    text = """
actions: "allocate"
tiers:
- plugins:
  - name: drf
    enableHierarchy: true
  - name: proportion
"""
    with pytest.raises(ConfError, match=r"tiers\[0\].*proportion and drf with hierarchy enabled conflicts"):
        parse_conf(text)


def test_drf_hierarchy_and_proportion_in_different_tiers_or_without_hierarchy_is_accepted() -> None:
    parse_conf(
        'actions: "allocate"\ntiers:\n- plugins:\n  - name: drf\n    enableHierarchy: true\n'
        "- plugins:\n  - name: proportion\n"
    )
    parse_conf('actions: "allocate"\ntiers:\n- plugins:\n  - name: drf\n  - name: proportion\n')
    parse_conf(
        'actions: "allocate"\ntiers:\n- plugins:\n  - name: drf\n    enableHierarchy: false\n'
        "  - name: proportion\n"
    )


def test_unknown_plugins_warn_and_are_kept() -> None:
    conf = parse_conf(
        'actions: "allocate"\ntiers:\n- plugins:\n  - name: gang\n  - name: sla\n',
        known_plugins=KNOWN_PLUGINS,
    )
    assert [p.name for p in conf.tiers[0].plugins] == ["gang", "sla"]
    assert len(conf.warnings) == 1
    assert "'sla'" in conf.warnings[0] and "tiers[0].plugins[1]" in conf.warnings[0]


def test_unsupported_flags_warn_only_when_set_true() -> None:
    conf = parse_conf(
        'actions: "allocate"\ntiers:\n- plugins:\n  - name: gang\n    enabledSubJobReady: true\n'
        "    enabledSubJobOrder: false\n    enabledHyperNodeOrder: true\n"
    )
    assert len(conf.warnings) == 1
    assert "enabledSubJobReady" in conf.warnings[0]


def test_configurations_and_arguments() -> None:
    conf = parse_conf(
        """
actions: "allocate, backfill"
tiers:
- plugins:
  - name: binpack
    arguments:
      binpack.weight: 10
      binpack.resources: nvidia.com/gpu
configurations:
- name: allocate
  arguments:
    predicateErrorCacheEnable: false
metrics:
  address: http://x
"""
    )
    assert conf.tiers[0].plugins[0].arguments == {"binpack.weight": 10, "binpack.resources": "nvidia.com/gpu"}
    assert conf.action_arguments("allocate") == {"predicateErrorCacheEnable": False}
    assert conf.action_arguments("backfill") == {}
    assert conf.metrics == {"address": "http://x"}
    assert conf.plugin_names() == ["binpack"]


def test_digest_depends_on_text() -> None:
    a = parse_conf('actions: "allocate"\n')
    b = parse_conf('actions: "allocate"\n')
    c = parse_conf('actions: "allocate, backfill"\n')
    assert a.digest == b.digest != c.digest


def test_argument_helpers_follow_volcano_types() -> None:
    args = {
        "b1": True,
        "b2": "false",
        "b3": "yes",
        "i1": 3,
        "i2": 3.5,
        "i3": True,
        "f1": 1,
        "f2": "1.5",
        "s": "x",
    }
    assert arg_bool(args, "b1", False) is True
    assert arg_bool(args, "b2", True) is False
    assert arg_bool(args, "b3", True) is True  # unparsable keeps the default
    assert arg_bool(args, "missing", True) is True
    assert arg_int(args, "i1", 0) == 3
    assert arg_int(args, "i2", 7) == 7  # a float is not an int
    assert arg_int(args, "i3", 7) == 7  # a bool is not an int
    assert arg_float(args, "f1", 0.0) == 1.0
    assert arg_float(args, "f2", 2.0) == 2.0
    assert arg_str(args, "s", "") == "x"
    assert arg_str(args, "i1", "d") == "d"


VOLCANO_KEYS = [
    "enableJobOrder", "enableHierarchy", "enableJobReady", "enableJobPipelined", "enableTaskOrder",
    "enablePreemptable", "enableReclaimable", "enablePreemptive", "enableQueueOrder", "enabledClusterOrder",
    "enablePredicate", "enableBestNode", "enableNodeOrder", "enableTargetJob", "enableReservedNodes",
    "enableJobEnqueued", "enabledVictim", "enableJobStarving", "enabledOverused", "enabledAllocatable",
    "enabledHyperNodeOrder", "enabledSubJobReady", "enabledSubJobPipelined", "enabledSubJobOrder",
    "enabledHyperNodeGradient",
]  # fmt: skip


def test_every_volcano_plugin_option_key_is_accepted() -> None:
    body = "".join(f"    {k}: false\n" for k in VOLCANO_KEYS)
    conf = parse_conf('actions: "allocate"\ntiers:\n- plugins:\n  - name: gang\n' + body)
    opt = conf.tiers[0].plugins[0]
    assert all(v is False for v in opt.flags.values())
    assert len(opt.flags) == len(VOLCANO_KEYS)


HELM_CI_CONF = """\
actions: "enqueue, allocate, backfill, reclaim, preempt"
tiers:
- plugins:
  - name: priority
  - name: gang
    enablePreemptable: false
  - name: conformance
  - name: sla
- plugins:
  - name: overcommit
  - name: drf
    enablePreemptable: false
  - name: predicates
    arguments:
      predicate.DynamicResourceAllocationEnable: true
  - name: proportion
  - name: nodeorder
  - name: binpack
  - name: network-topology-aware
"""


def test_volcano_ci_conf_parses_with_warnings_for_plugins_not_implemented() -> None:
    conf = parse_conf(HELM_CI_CONF, known_plugins=KNOWN_PLUGINS)
    assert conf.actions == ["enqueue", "allocate", "backfill", "reclaim", "preempt"]
    gang = conf.tiers[0].plugins[1]
    assert not gang.enabled("preemptable") and gang.enabled("reclaimable")
    assert conf.tiers[1].plugins[2].arguments == {"predicate.DynamicResourceAllocationEnable": True}
    warned = " ".join(conf.warnings)
    assert "'sla'" in warned and "'network-topology-aware'" in warned
