"""`fumarole schedule` accepts a configuration naming plugins Fumarole lacks, warning once per plugin.

The warning tells a Volcano plugin Fumarole lacks from a name Volcano does not know either (a typo,
with the closest known name suggested); `--strict` makes any configuration warning an error.
"""

from __future__ import annotations

import json
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

from fumarole.daemon.scheduler.framework import registry
from fumarole.daemon.scheduler.framework.conf import parse_conf
from fumarole.daemon.scheduler.framework.run import run_session
from fumarole.daemon.scheduler.model.snapshot import ClusterSnapshot

ROOT = Path(__file__).resolve().parents[2]
EXAMPLE_CLUSTER = ROOT / "daemon" / "examples" / "cluster.yaml"

# Every plugin name Volcano's factory.go registers (commit ed72c7c8).
VOLCANO_PLUGINS = [
    "binpack", "capacity", "cdp", "conformance", "deviceshare", "drf", "extender", "gang",
    "network-topology-aware", "nodegroup", "nodeorder", "numa-aware", "overcommit", "pdb",
    "predicates", "priority", "proportion", "rescheduling", "resource-strategy-fit",
    "resourcequota", "sla", "task-topology", "tdm", "usage",
]  # fmt: skip
# Those Fumarole lacks (today: none; extender was the last), and a name Volcano lacks too.
MISSING = [p for p in VOLCANO_PLUGINS if p not in registry.PLUGINS] + ["no-such-plugin"]

CONF = (
    'actions: "enqueue, allocate, backfill"\n'
    "tiers:\n- plugins:\n  - name: priority\n  - name: gang\n"
    + "".join(f"  - name: {n}\n    arguments: {{some.argument: 1}}\n" for n in MISSING)
    + "- plugins:\n  - name: predicates\n  - name: proportion\n"
)


def fumarole(*args: str) -> subprocess.CompletedProcess[str]:
    exe = shutil.which("fumarole") or str(Path(sys.executable).parent / "fumarole")
    return subprocess.run([exe, *args], capture_output=True, text=True, timeout=120)


def test_the_plugins_this_version_lacks() -> None:
    assert MISSING == ["no-such-plugin"]
    assert {"extender", "usage", "numa-aware", "rescheduling"} <= set(registry.PLUGINS)
    assert "network-topology-aware" in registry.PLUGINS
    assert {"sla", "resourcequota", "tdm", "pdb", "cdp", "nodegroup"} <= set(registry.PLUGINS)


@pytest.mark.parametrize("cycles", ["1", "3"])
def test_schedule_warns_once_per_unimplemented_plugin_on_stderr(tmp_path: Path, cycles: str) -> None:
    conf = tmp_path / "conf.yaml"
    conf.write_text(CONF)
    p = fumarole("schedule", "--conf", str(conf), "--cluster", str(EXAMPLE_CLUSTER), "--cycles", cycles)
    assert p.returncode == 0, p.stderr
    data = json.loads(p.stdout)  # stdout stays one JSON object: warnings go to stderr only
    assert data["binds"], "the implemented plugins still schedule"
    lines = [ln for ln in p.stderr.splitlines() if ln.startswith("warning: ")]
    for name in MISSING:
        naming = [ln for ln in lines if f"'{name}'" in ln]
        assert len(naming) == 1, (name, p.stderr)
        assert naming[0].endswith("; it is skipped")
        if name in VOLCANO_PLUGINS:
            assert f"plugin '{name}' is a Volcano plugin not implemented by Fumarole" in naming[0]
        else:
            assert f"unknown plugin '{name}' (not a Volcano plugin)" in naming[0]
    # The warning points at the configuration entry.
    assert any(f"tiers[0].plugins[2].name: unknown plugin '{MISSING[0]}'" in ln for ln in lines)
    assert not any("'priority'" in ln or "'proportion'" in ln for ln in lines)


def test_run_session_warns_when_the_conf_was_parsed_without_the_registry() -> None:
    # A configuration parsed without known plugins (no conf-level warning) still reports them.
    conf = parse_conf(CONF)
    assert conf.warnings == []
    res = run_session(ClusterSnapshot(), conf)
    for name in MISSING[:-1]:
        assert [w for w in res.warnings if f"'{name}'" in w] == [
            f"plugin '{name}' is a Volcano plugin not implemented by Fumarole; it is skipped"
        ]
    assert [w for w in res.warnings if "'no-such-plugin'" in w] == [
        "unknown plugin 'no-such-plugin' (not a Volcano plugin); it is skipped"
    ]


def test_registry_knows_every_volcano_plugin() -> None:
    assert set(VOLCANO_PLUGINS) == (set(registry.PLUGINS) - registry.BEYOND_VOLCANO_PLUGINS) | (
        registry.VOLCANO_ONLY_PLUGINS
    )
    assert {"fgd", "paper-bestfit"} <= registry.BEYOND_VOLCANO_PLUGINS <= set(registry.PLUGINS)
    assert not set(registry.PLUGINS) & registry.VOLCANO_ONLY_PLUGINS


def test_implemented_opt_in_plugins_draw_no_warning(tmp_path: Path) -> None:
    conf = tmp_path / "conf.yaml"
    conf.write_text(
        'actions: "enqueue, allocate"\n'
        "tiers:\n- plugins:\n"
        + "".join(f"  - name: {n}\n" for n in ("sla", "resourcequota", "tdm", "pdb", "cdp", "nodegroup"))
    )
    p = fumarole("schedule", "--conf", str(conf), "--cluster", str(EXAMPLE_CLUSTER))
    assert p.returncode == 0, p.stderr
    assert "not implemented" not in p.stderr


TYPO_CONF = (
    'actions: "enqueue, allocate, backfill"\n'
    "tiers:\n- plugins:\n  - name: priority\n  - name: gangg\n- plugins:\n  - name: predicates\n"
)


@pytest.mark.parametrize("fmt", ["json", "table"])
def test_a_typo_is_warned_about_once_with_the_closest_name(tmp_path: Path, fmt: str) -> None:
    conf = tmp_path / "conf.yaml"
    conf.write_text(TYPO_CONF)
    p = fumarole("schedule", "--conf", str(conf), "--cluster", str(EXAMPLE_CLUSTER), "--format", fmt)
    assert p.returncode == 0, p.stderr
    want = (
        f"warning: {conf}: tiers[0].plugins[1].name: unknown plugin 'gangg' "
        "(not a Volcano plugin; did you mean 'gang'?); it is skipped"
    )
    assert p.stderr.splitlines() == [want]
    assert "gangg" not in p.stdout


@pytest.mark.parametrize(
    ("conf_text", "needle"),
    [
        (
            TYPO_CONF,
            "tiers[0].plugins[1].name: unknown plugin 'gangg' (not a Volcano plugin; did you mean 'gang'?)",
        ),
        (
            'actions: "enqueue, allocate"\ntiers:\n- plugins:\n  - name: gang\n  - name: extender\n'
            "    arguments: {extender.predicateverb: filter}\n",
            "tiers[0].plugins[1].arguments: extender: unknown argument 'extender.predicateverb' "
            "(did you mean 'extender.predicateVerb'?)",
        ),
        (
            'actions: "enqueue, allocate"\ntiers:\n- plugins:\n'
            "  - name: gang\n    enabledSubJobReady: true\n",
            "tiers[0].plugins[0].enabledSubJobReady: accepted but Fumarole has no such extension point",
        ),
    ],
)
def test_strict_makes_a_configuration_warning_an_error(tmp_path: Path, conf_text: str, needle: str) -> None:
    conf = tmp_path / "conf.yaml"
    conf.write_text(conf_text)
    p = fumarole("schedule", "--strict", "--conf", str(conf), "--cluster", str(EXAMPLE_CLUSTER))
    assert p.returncode == 2
    assert p.stdout == ""
    assert p.stderr.startswith(f"fumarole: error: {conf}: {needle}")
    assert "strict" in p.stderr
    lenient = fumarole("schedule", "--conf", str(conf), "--cluster", str(EXAMPLE_CLUSTER))
    assert lenient.returncode == 0 and needle in lenient.stderr


def test_strict_accepts_a_clean_configuration() -> None:
    p = fumarole("schedule", "--strict", "--cluster", str(EXAMPLE_CLUSTER))
    assert p.returncode == 0, p.stderr
    assert p.stderr == ""
