"""The core timeline's sessions keep deviceshare's card pools between sessions (issue 12's speed
item) and decide exactly as before: the event logs of seeded timelines (and of the first 800 pods
of the Alibaba trace, when ../shared holds it) hash to the digests recorded before the change."""

from __future__ import annotations

import hashlib
import random
from pathlib import Path

import pytest

from fumarole.daemon.scheduler.framework.conf import parse_conf
from fumarole.daemon.scheduler.plugins.deviceshare_kept import KEY
from fumarole.daemon.study.confs import PERCENTAGE_NODES_TO_FIND, PRESETS, preset_text
from fumarole.daemon.study.core_engine import CoreCluster
from fumarole.daemon.study.runs import Engine, timeline_log
from fumarole.daemon.study.trace import TraceNode, TracePod, read_nodes, read_pods

ROOT = Path(__file__).resolve().parents[2]
TRACE = ROOT.parent / "shared/traces/alibaba-gpu-v2023"

# sha256 of the timeline's events (repr, one a line), recorded with the code before pools were kept.
SEEDED = {
    ("binpack", 1): "101dc3985733bc62f26939299dcd81e249f9556135e70e2cc96d3ff732121ebb",
    ("spread", 2): "d0d51794291b5379aa5ecd94b1b37cd6f919ecbbb9bf1291f69348e7c298a955",
}
ALIBABA_FIRST_800_BINPACK = "e42056bf0a0e896518b3d93d1bf4343149969e2b1348fcc87d221266b653d29d"


def engine(policy: str) -> Engine:
    text = preset_text(policy)
    return Engine(
        parse_conf(text), f"examples/study/{PRESETS[policy][0]}", text, PERCENTAGE_NODES_TO_FIND[policy]
    )


def seeded_trace(seed: int) -> tuple[list[TraceNode], list[TracePod]]:
    r = random.Random(seed)
    nodes = [
        TraceNode(
            f"n{i:02d}", r.choice([16000, 32000]), r.choice([65536, 131072]), r.choice([0, 1, 2, 4]), "T4"
        )
        for i in range(24)
    ]
    pods = []
    for i in range(160):
        k = r.random()
        g, m = (0, 0) if k < 0.2 else (1, r.choice([250, 500, 700])) if k < 0.7 else (r.choice([1, 2]), 1000)
        created = i * 40 + r.randrange(40)
        pods.append(
            TracePod(
                f"p{i:03d}",
                r.choice([1000, 4000, 8000]),
                r.choice([1024, 8192]),
                g,
                m,
                (),
                r.choice(["LS", "BE", "Burstable"]),
                "Running",
                created,
                created + r.choice([60, 600, 3000]),
                created,
            )
        )
    return nodes, pods


def digest(nodes: list[TraceNode], pods: list[TracePod], policy: str) -> str:
    log, _ = timeline_log(nodes, pods, policy, period_s=60, trace_name="x", engine=engine(policy))
    return hashlib.sha256("\n".join(repr(e) for e in log.events).encode()).hexdigest()


@pytest.mark.parametrize(("policy", "seed"), sorted(SEEDED))
def test_seeded_timeline_decides_as_before(policy: str, seed: int) -> None:
    assert digest(*seeded_trace(seed), policy) == SEEDED[(policy, seed)]


@pytest.mark.skipif(not TRACE.is_dir(), reason="the Alibaba trace is not beside the worktree")
def test_alibaba_first_800_pods_decide_as_before() -> None:
    pods = read_pods(TRACE / "openb_pod_list_default.csv")[:800]
    nodes = read_nodes(TRACE / "openb_node_list_all_node.csv")
    assert digest(nodes, pods, "binpack") == ALIBABA_FIRST_800_BINPACK


def test_untouched_nodes_keep_their_pools_between_sessions() -> None:
    nodes, pods = seeded_trace(3)
    core = CoreCluster(nodes, engine("binpack").conf, arrival_order=False)
    first = core.run([(pods[0], 0)], 0.0)
    derived = core.snapshot.derived
    assert derived is not None
    kept = derived.whole[KEY][1]
    before = list(kept.pools)
    used = nodes[first.placed[pods[0].name].node].name if pods[0].num_gpu else ""
    core.run([(pods[1], 60_000)], 60.0)
    assert derived.whole[KEY][1] is kept
    untouched = [i for i, n in enumerate(nodes) if n.gpus and n.name != used]
    assert untouched
    for row in untouched:
        assert kept.pools[row] is before[row]  # the same pool object: not rebuilt
        assert kept.pools[row] is not None
