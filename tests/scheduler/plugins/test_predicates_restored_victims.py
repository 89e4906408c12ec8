"""Volcano's restored-victim quirk in the session's Kubernetes NodeInfo snapshot, and the option off it.

When a preempt or reclaim Statement is discarded, Volcano puts each victim back, but the
predicates plugin's allocate handler returns before re-adding it to the Kubernetes NodeInfo
snapshot (VolumeBinding's Reserve fails for a pod with no PreFilter state this session). The case
below is one of the random differential cases recorded from Volcano's own code: in cycle 2 the
preemptor job j5 tries victims on n3, the attempt is discarded, and n3 then scores higher for j5-0,
which Volcano pipelines there. `fumarole.scoreRestoredVictims: true` re-adds the victims and the
task goes to n1 instead (what Fumarole did before the quirk was modelled).
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

import yaml

from fumarole.daemon.cli.dry_run import dry_run, to_json
from fumarole.daemon.manifests import build_snapshot, load_objects
from fumarole.daemon.runtime.conf_watch import parse_scheduler_conf

CASE = Path(__file__).resolve().parents[2] / "scenarios/differential/restored-victims/full-s202-c126.yaml"


def run_case(tmp_path: Path, predicates_args: dict[str, Any] | None = None) -> dict[str, Any]:
    sc = yaml.safe_load(CASE.read_text())
    conf = yaml.safe_load(sc["conf"])
    if predicates_args:
        for tier in conf["tiers"]:
            for plugin in tier["plugins"]:
                if plugin["name"] == "predicates":
                    plugin.setdefault("arguments", {}).update(predicates_args)
    objects = tmp_path / "objects.yaml"
    objects.write_text(yaml.safe_dump_all(sc["objects"]))
    parsed = parse_scheduler_conf(yaml.safe_dump(conf), "conf.yaml")
    snapshot = build_snapshot(load_objects(str(objects)))
    return to_json(dry_run(snapshot, parsed, sc["cycles"]))


def test_a_restored_victim_leaves_its_node_emptier_for_scoring_as_in_volcano(tmp_path: Path) -> None:
    expect = yaml.safe_load(CASE.read_text())["expect"]
    got = run_case(tmp_path)
    assert got["pipelined"] == expect["pipelined"] == {"ns/j5-0": "n3"}
    assert got["binds"] == expect["binds"]


def test_the_option_puts_restored_victims_back_in_the_snapshot(tmp_path: Path) -> None:
    got = run_case(tmp_path, {"fumarole.scoreRestoredVictims": True})
    assert got["pipelined"] == {"ns/j5-0": "n1"}


def test_without_a_reserve_plugin_volcano_re_adds_restored_victims(tmp_path: Path) -> None:
    # VolumeBinding and DynamicResources both off: no Reserve plugin can fail, the victim is re-added.
    got = run_case(
        tmp_path,
        {"predicate.VolumeBindingEnable": False, "predicate.DynamicResourceAllocationEnable": False},
    )
    assert got["pipelined"] == {"ns/j5-0": "n1"}
