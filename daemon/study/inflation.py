"""The inflation experiment of "Beware of Fragmentation" (Weng et al., ATC'23), on the study placer.

The workload is the paper's simulator's `TunePodsByNodeTotalResource` at `ratio` (1.3, the ratio of
every experiment of the paper) times the cluster's GPU capacity, shuffled with the same seed (its
`--shuffle-pod`): a list asking less is the list plus pods drawn from it with replacement (seeded)
until the next draw's GPUs would pass the target (`tuneUpPods`; like the simulator the check adds
the draw's milli of ONE GPU, so a multi-GPU draw may end a little above it); a list asking more is
trimmed, pods removed at random (seeded) while the requests pass the target (`tuneDownPods`).
Pods arrive one at a time and never leave; each is placed at once or fails for good
(`fumarole.daemon.study.runs.inflation_log`).
"""

from __future__ import annotations

import random
from collections.abc import Sequence
from dataclasses import replace

from fumarole.daemon.scheduler.plugins.fgd_fragmentation import PodShape, TypicalWorkload, typical_workload
from fumarole.daemon.study.trace import TracePod

__all__ = ["TUNE_BOTH", "TUNE_UP", "TYPICAL_THRESHOLD", "inflation_workload", "shape_of", "typical_of"]

TUNE_BOTH = "both"  # the paper's: add draws up to the target, or trim a list above it
TUNE_UP = "up"  # only add draws: a list above the target is kept whole


def shape_of(pod: TracePod) -> PodShape:
    return PodShape(pod.cpu_milli, pod.num_gpu, pod.gpu_milli, pod.gpu_spec)


TYPICAL_THRESHOLD = 1.0


def typical_of(pods: Sequence[TracePod], threshold: float = TYPICAL_THRESHOLD) -> TypicalWorkload:
    """The typical workload FGD and the fragmentation metric judge against: the pod list's shapes,
    CPU-only pods included. The paper's simulator keeps the most popular shapes covering 95% of the
    pods; Fumarole keeps them all by default (measured better here: docs/studies.md)."""
    return typical_workload((shape_of(p) for p in pods), threshold)


def inflation_workload(
    pods: Sequence[TracePod], gpu_capacity_milli: int, ratio: float, seed: int, tune: str = TUNE_BOTH
) -> list[TracePod]:
    """The tuned workload, shuffled; draws are renamed `<name>-tuned-<i>` as in the paper's simulator."""
    rng = random.Random(seed)
    out = list(pods)
    requested = sum(p.total_gpu_milli for p in out)
    target = ratio * gpu_capacity_milli
    if requested > target and tune == TUNE_BOTH:
        while requested > target and out:
            gone = out.pop(rng.randrange(len(out)))
            requested -= gone.total_gpu_milli
    elif requested < target:
        i = 0
        while True:
            pick = pods[rng.randrange(len(pods))]
            if requested + pick.gpu_milli > target:
                break
            requested += pick.total_gpu_milli
            out.append(replace(pick, name=f"{pick.name}-tuned-{i}"))
            i += 1
    rng.shuffle(out)
    return out
