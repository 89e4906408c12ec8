"""The fgd preset is the paper's FGD policy in the real scheduler core:

* a GPU-sharing pod gets the card that grows fragmentation least (the fgd plugin's `card_order`,
  asked by deviceshare's Allocate), the card the fast placer's FGD picks: on one node (so the node
  choice is out of the picture) both engines agree pod for pod, while deviceshare's own binpack
  card order does not;
* on small random clusters, with GPU-model constraints or without, the core fgd preset decides pod
  for pod as the fast placer's FGD (fgd reads the cards' use from deviceshare, this session's
  allocations included; it scores CPU-only pods and judges shapes by their GPU models as the fast
  placer does);
* deviceshare's device score is off in the preset (only fgd orders nodes);
* the preset scores every feasible node (--percentage-nodes-to-find 100 unless given).
"""

from __future__ import annotations

import argparse
import dataclasses
import random

import pytest
from test_study_core_engine import fast, one_session, random_trace

from fumarole.daemon.cli.study import _engine
from fumarole.daemon.scheduler.framework.conf import parse_conf
from fumarole.daemon.scheduler.plugins import fgd as fgd_plugin
from fumarole.daemon.scheduler.plugins.fgd import FgdPlugin
from fumarole.daemon.study.confs import PAPER_POLICIES, PRESETS, preset_text
from fumarole.daemon.study.trace import TraceNode, TracePod


def one_node_traces() -> list[tuple[list[TraceNode], list[TracePod]]]:
    """One 4-card node; GPU pods share one card, in many sizes (no model constraint)."""
    out = []
    for seed in range(8):
        nodes, pods = random_trace(seed, nodes=1, pods=40)
        r = random.Random(seed)
        shaped = [
            dataclasses.replace(p, num_gpu=1, gpu_milli=r.choice(range(100, 900, 100))) if p.num_gpu else p
            for p in pods
        ]
        node = dataclasses.replace(nodes[0], gpus=4, cpu_milli=64000)
        out.append(([node], [dataclasses.replace(p, gpu_spec=()) for p in shaped]))
    return out


def test_fgd_preset_gives_a_shared_pod_fgds_card(monkeypatch: pytest.MonkeyPatch) -> None:
    traces = one_node_traces()
    for nodes, pods in traces:
        core = one_session(nodes, pods, preset_text("fgd"))
        assert core == fast(nodes, pods, "fgd")
        assert len(core) >= 8
    # Without fgd's card choice deviceshare's binpack order picks other cards.
    monkeypatch.setattr(FgdPlugin, "card_order", lambda self, task, node, cards: None)
    assert any(one_session(n, p, preset_text("fgd")) != fast(n, p, "fgd") for n, p in traces)


def test_fgd_preset_decides_as_the_fast_fgd_without_model_constraints() -> None:
    for seed in range(6):
        nodes, pods = random_trace(seed)
        pods = [dataclasses.replace(p, gpu_spec=()) for p in pods]
        core = one_session(nodes, pods, preset_text("fgd"))
        assert core == fast(nodes, pods, "fgd"), seed
        assert len(core) > len(pods) // 3


def test_fgd_preset_decides_as_the_fast_fgd_with_model_constraints(monkeypatch: pytest.MonkeyPatch) -> None:
    traces = [random_trace(seed) for seed in range(6)]
    assert all(any(p.gpu_spec for p in pods) for _, pods in traces)
    for seed, (nodes, pods) in enumerate(traces):
        assert one_session(nodes, pods, preset_text("fgd")) == fast(nodes, pods, "fgd"), seed
    # The core fgd before: CPU-only pods scored 0 everywhere, models not read.
    monkeypatch.setattr(fgd_plugin, "task_models", lambda task, label: ())
    assert any(one_session(n, p, preset_text("fgd")) != fast(n, p, "fgd") for n, p in traces)


def test_fgd_scores_cpu_only_pods() -> None:
    """A CPU-only pod goes where it leaves the typical GPU shapes their cpu: node 0 has cards and
    little cpu (listed first, it would win a tie), node 1 has no cards (fragmentation unchanged)."""
    nodes = [TraceNode("a-gpu", 8000, 65536, 2, "T4"), TraceNode("b-cpu", 8000, 65536, 0, "")]
    pods = [
        TracePod("cpu", 4000, 1024, 0, 0, (), "LS", "Running", 0, 9, 0),
        TracePod("gpu", 6000, 1024, 1, 1000, (), "LS", "Running", 1, 9, 1),
    ]
    placed = one_session(nodes, pods, preset_text("fgd"))
    assert placed["cpu"].node == 1 and placed["gpu"].node == 0


def test_fgd_preset_has_no_device_score() -> None:
    conf = parse_conf(preset_text("fgd"))
    args = {o.name: o.arguments for tier in conf.tiers for o in tier.plugins}
    assert args["deviceshare"]["deviceshare.ScheduleWeight"] == 0
    assert "binpack" not in args and "nodeorder" not in args
    assert args["fgd"]["fgd.weight"] > 0


def _namespace(policy: str, pct: int | None, conf: str | None = None) -> argparse.Namespace:
    return argparse.Namespace(
        engine="core", conf=conf, policy=policy, percentage_nodes_to_find=pct, tie_break=None
    )


def test_fgd_preset_scores_every_node_unless_told() -> None:
    assert _engine(_namespace("fgd", None)).percentage_nodes_to_find == 100
    for name in PRESETS:
        want = 100 if name in PAPER_POLICIES else 0
        assert _engine(_namespace(name, None)).percentage_nodes_to_find == want
    assert _engine(_namespace("fgd", 0)).percentage_nodes_to_find == 0
    assert _engine(_namespace("binpack", 100)).percentage_nodes_to_find == 100
    assert _engine(_namespace("fgd", 101)) == "--percentage-nodes-to-find: must be 0 to 100"
