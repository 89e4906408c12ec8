"""The seeded tie-break between nodes of equal best score (opt-in: `SearchOptions.tie_seed`).

Volcano picks at random among the nodes with the best score; Fumarole's default takes the first
of them in candidate order, which makes a decision depend on the order the nodes are listed in.
With a tie seed the node taken is instead the one with the least key

    mix64(node_key(node name) XOR task_key(seed, task))

where node_key and task_key are the first 8 bytes of BLAKE2b digests of the node's name and of
"<seed>/<task key>", and mix64 is SplitMix64's finaliser. For one task the keys order its tied
nodes like a uniform random permutation drawn from the seed, the same whatever order the nodes
(or the pods) are listed in; another seed draws another one. Pure: no state, no wall clock.
The fast study placer breaks its ties with the same function (`fumarole.daemon.study.placement`).
"""

from __future__ import annotations

import hashlib
from collections.abc import Sequence
from functools import lru_cache

import numpy as np
import numpy.typing as npt

__all__ = ["least_key", "node_keys", "task_key"]

UIntArray = npt.NDArray[np.uint64]
_M1 = np.uint64(0xBF58476D1CE4E5B9)
_M2 = np.uint64(0x94D049BB133111EB)


def _digest64(text: str) -> int:
    return int.from_bytes(hashlib.blake2b(text.encode(), digest_size=8).digest(), "little")


@lru_cache(maxsize=1 << 16)
def _node_key(name: str) -> int:
    return _digest64(name)


def node_keys(names: Sequence[str]) -> UIntArray:
    """Each node name's key (a pure function of the name)."""
    return np.array([_node_key(n) for n in names], dtype=np.uint64)


def task_key(seed: int, key: str) -> int:
    """The key of a task (or study pod) named `key` under tie seed `seed`."""
    return _digest64(f"{seed}/{key}")


def _mix(x: UIntArray) -> UIntArray:
    x = x ^ (x >> np.uint64(30))
    x = x * _M1
    x = x ^ (x >> np.uint64(27))
    x = x * _M2
    out: UIntArray = x ^ (x >> np.uint64(31))
    return out


def least_key(nodes: UIntArray, task: int) -> int:
    """Index (into `nodes`, the tied nodes' keys) of the node the tie-break takes."""
    with np.errstate(over="ignore"):
        return int(np.argmin(_mix(nodes ^ np.uint64(task))))
