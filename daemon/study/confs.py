"""The named scheduler configurations of the studies' core engine (the texts of examples/study/*.yaml).

`binpack`: Volcano's binpack-style configuration (deviceshare vGPU with binpack card order and
device score, the binpack plugin); `spread`: Volcano's default configuration (nodeorder's
leastrequested) with deviceshare vGPU in spread card order; `fgd`: the FGD policy (beyond Volcano):
the fgd plugin alone scores nodes (deviceshare's device score is off: ScheduleWeight 0) and chooses
the shared card (deviceshare's Allocate asks it), and every feasible node is scored
(`PERCENTAGE_NODES_TO_FIND`: Volcano's --percentage-nodes-to-find 100), as the paper's simulator does.
"""

from __future__ import annotations

__all__ = ["PAPER_POLICIES", "PERCENTAGE_NODES_TO_FIND", "PRESETS", "SEEDED_TIES", "preset_text"]

_HEAD = """actions: "enqueue, allocate, backfill"
tiers:
- plugins:
  - name: priority
  - name: gang
"""
_VGPU_BINPACK = """  - name: deviceshare
    arguments:
      deviceshare.VGPUEnable: true
      deviceshare.SchedulePolicy: binpack
      deviceshare.ScheduleWeight: 10
"""
_BINPACK_TIERS = """  - name: conformance
- plugins:
  - name: drf
  - name: predicates
  - name: proportion
"""

PRESETS: dict[str, tuple[str, str]] = {
    # name -> (file under examples/study, text without its comment header)
    "binpack": (
        "vgpu-binpack.yaml",
        _HEAD
        + _BINPACK_TIERS
        + _VGPU_BINPACK
        + "  - name: binpack\n    arguments:\n      binpack.resources: volcano.sh/vgpu-cores\n",
    ),
    "spread": (
        "vgpu-default.yaml",
        _HEAD
        + "- plugins:\n  - name: drf\n  - name: predicates\n  - name: proportion\n  - name: nodeorder\n"
        + "  - name: deviceshare\n    arguments:\n      deviceshare.VGPUEnable: true\n"
        + "      deviceshare.SchedulePolicy: spread\n",
    ),
    "fgd": (
        "vgpu-fgd.yaml",
        _HEAD
        + _BINPACK_TIERS
        + _VGPU_BINPACK.replace("10\n", "0\n")
        + "  - name: fgd\n    arguments:\n      fgd.weight: 10\n",
    ),
}
# The paper's baselines (Weng et al., Fig. 9): preset name -> plugin.
PAPER_BASELINES = {
    "random": "paper-random",
    "dotprod": "paper-dotprod",
    "gpuclustering": "paper-gpuclustering",
    "gpupacking": "paper-gpupacking",
    "bestfit": "paper-bestfit",
}
for _policy, _plugin in PAPER_BASELINES.items():
    PRESETS[_policy] = (
        f"vgpu-{_policy}.yaml",
        _HEAD + _BINPACK_TIERS + _VGPU_BINPACK.replace("10\n", "0\n") + f"  - name: {_plugin}\n",
    )
PAPER_POLICIES = ("fgd", *PAPER_BASELINES)
# The scheduler flag a preset runs with unless --percentage-nodes-to-find is given (0: Volcano's
# adaptive window). The paper's policies see the whole cluster (its simulator's
# percentageOfNodesToScore 100): part of the policy, not of the configuration text.
PERCENTAGE_NODES_TO_FIND: dict[str, int] = {"binpack": 0, "spread": 0} | {p: 100 for p in PAPER_POLICIES}
# Whether a preset breaks equal scores by the experiment's seed (framework/ties.py) unless
# --tie-break says otherwise; Volcano's presets keep the first node of the search window.
SEEDED_TIES: dict[str, bool] = {"binpack": False, "spread": False} | {p: True for p in PAPER_POLICIES}


def preset_text(name: str) -> str:
    return PRESETS[name][1]
