"""GPU fragmentation (Weng et al.) on hand-computed cases, the typical workload, and FGD's choices."""

from __future__ import annotations

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from fumarole.daemon.scheduler.plugins.fgd_fragmentation import (
    PodShape,
    TypicalWorkload,
    fragmentation_and_card_table,
    fragmentation_of,
    node_fragmentation,
    shared_card_fragmentation,
    shared_card_states,
    typical_workload,
)
from fumarole.daemon.study.placement import Cluster
from fumarole.daemon.study.trace import TraceNode, TracePod

HALF = PodShape(1000, 1, 500)
WHOLE = PodShape(1000, 1, 1000)
TWO = PodShape(1000, 2, 1000)
CPU = PodShape(4000, 0, 0)


def test_one_shape_counts_cards_too_small_for_it() -> None:
    t = TypicalWorkload((HALF,), (1.0,))
    # cards with 300 and 200 left cannot take 500: 500 milli of fragment; the 1000 card can.
    assert fragmentation_of([(8000, [300, 1000, 200], "")], t) == [500.0]
    # no card can take it: every idle milli is fragment.
    assert fragmentation_of([(8000, [300, 200], "")], t) == [500.0]
    # it fits and no card is too small.
    assert fragmentation_of([(8000, [1000, 500], "")], t) == [0.0]


def test_lacking_cpu_model_or_cards_make_all_idle_gpu_fragment() -> None:
    t = TypicalWorkload((TWO,), (1.0,))
    assert fragmentation_of([(8000, [1000, 1000], "")], t) == [0.0]
    assert fragmentation_of([(8000, [1000, 600], "")], t) == [1600.0]  # only one whole card
    assert fragmentation_of([(500, [1000, 1000], "")], t) == [2000.0]  # lacks cpu
    spec = TypicalWorkload((PodShape(1000, 1, 1000, ("V100",)),), (1.0,))
    assert fragmentation_of([(8000, [1000], "T4"), (8000, [1000], "V100")], spec) == [1000.0, 0.0]


def test_cpu_only_pods_see_every_idle_gpu_as_fragment_and_weights_add() -> None:
    t = TypicalWorkload((HALF, CPU), (0.75, 0.25))
    # HALF: 300 (the 300 card); CPU: all 1300 idle. 0.75 * 300 + 0.25 * 1300 = 550
    assert fragmentation_of([(8000, [300, 1000], "")], t) == [pytest.approx(550.0)]
    assert fragmentation_of([(8000, [], "")], t) == [0.0]  # no GPU, no fragment


def test_typical_workload_takes_popular_shapes_in_steps() -> None:
    shapes = [HALF] * 6 + [WHOLE] * 3 + [CPU]
    t = typical_workload(shapes, popularity_threshold=0.8, step=1)
    assert t.shapes == (HALF, WHOLE) and t.popularity == pytest.approx((6 / 9, 3 / 9))
    assert typical_workload(shapes, 1.0).shapes == (HALF, WHOLE, CPU)


def _pod(name: str, gpus: int, milli: int, cpu: int = 1000) -> TracePod:
    return TracePod(name, cpu, 1024, gpus, milli, (), "LS", "Running", 0, 10, 0)


def test_fgd_fills_the_partly_used_card_binpack_and_spread_follow_volcano() -> None:
    nodes = [TraceNode("a", 32000, 65536, 2, "T4"), TraceNode("b", 32000, 65536, 2, "T4")]
    pods = [_pod("x", 1, 400), _pod("y", 1, 600)]
    typical = typical_workload([PodShape(1000, 1, 400), PodShape(1000, 1, 600)], 1.0)
    for policy, expect in (("fgd", ("b", (0,))), ("binpack", ("b", (0,))), ("spread", ("a", (0,)))):
        c = Cluster(nodes, policy, typical)
        where = c.place(pods[0])
        assert where is not None
        c.bind(pods[0], type(where)(1, (0,)))  # x runs on b, card 0 (600 left)
        got = c.place(pods[1])
        assert got is not None and (c.names[got.node], got.cards) == expect, policy
    c = Cluster(nodes, "fgd", typical)
    assert c.fragmentation() == 0.0
    c.bind(
        pods[1], type(where)(0, (1,))
    )  # a: cards 1000, 400 -> 400 too small for the 600 shape (weight 1/2)
    assert c.fragmentation() == pytest.approx(200.0)


def test_inflation_workload_keeps_every_pod_and_draws_up_to_the_ratio() -> None:
    from fumarole.daemon.study.inflation import inflation_workload

    pods = [_pod("a", 1, 1000), _pod("b", 1, 500), _pod("c", 0, 0)]
    w = inflation_workload(pods, gpu_capacity_milli=10_000, ratio=1.3, seed=7)
    assert w == inflation_workload(pods, 10_000, 1.3, 7) != inflation_workload(pods, 10_000, 1.3, 8)
    assert {"a", "b", "c"} <= {p.name for p in w}
    assert all(p.name.split("-tuned-")[0] in "abc" for p in w)
    total = sum(p.total_gpu_milli for p in w)
    assert 13_000 - 1000 < total <= 13_000  # the next draw would have passed 130% of capacity


_SHAPE = st.builds(
    PodShape,
    st.sampled_from([0, 1000, 4000, 8000]),
    st.integers(0, 3),
    st.sampled_from([0, 100, 250, 500, 700, 1000]),
    st.sampled_from([(), ("T4",), ("V100", "T4")]),
)


@settings(max_examples=200, deadline=None, derandomize=True)
@given(
    shapes=st.lists(_SHAPE, min_size=0, max_size=12),
    nodes=st.lists(
        st.tuples(
            st.sampled_from([0, 500, 2000, 16000]),
            st.lists(st.sampled_from([0, 50, 100, 300, 500, 700, 1000]), min_size=1, max_size=8),
            st.sampled_from([0, 1, 2]),
        ),
        min_size=1,
        max_size=10,
    ),
    milli=st.sampled_from([50, 100, 250, 500, 700, 990]),
)
def test_shared_card_fragmentation_equals_every_state_computed_afresh(
    shapes: list[PodShape], nodes: list[tuple[int, list[int], int]], milli: int
) -> None:
    """The incremental card-choice table is the definition's, bit for bit (inf where no room)."""
    typical = typical_workload(shapes, 1.0).arrays({"T4": 1, "V100": 2})
    width = max(len(g) for _, g, _ in nodes)
    gpu = np.zeros((len(nodes), width), dtype=np.int64)
    for i, (_, g, _) in enumerate(nodes):
        gpu[i, : len(g)] = g
    cpu = np.array([c for c, _, _ in nodes], dtype=np.int64)
    model = np.array([m for _, _, m in nodes], dtype=np.int64)
    fast = shared_card_fragmentation(cpu, gpu, milli, model, typical)
    slow = shared_card_states(cpu, gpu, milli, model, typical)
    assert fast.tobytes() == slow.tobytes()
    cpu_after = cpu - 1000
    before, table = fragmentation_and_card_table(cpu, cpu_after, gpu, milli, model, typical)
    assert before is not None
    assert before.tobytes() == node_fragmentation(cpu, gpu, model, typical).tobytes()
    assert table.tobytes() == shared_card_states(cpu_after, gpu, milli, model, typical).tobytes()
