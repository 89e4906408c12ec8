"""The EventLog contract, run against every backend (memory, SQLite and PostgreSQL on a real server)."""

from __future__ import annotations

import sys
from pathlib import Path

import anyio
import pytest

sys.path.insert(0, str(Path(__file__).resolve().parent))
from fumarole_store_kit import ALL_SAMPLES, BACKENDS, bind, clock, inject_raw, node, open_backend, pod

from fumarole.store.codec import CodecError, encode
from fumarole.store.events import NodeUpserted
from fumarole.store.log import CorruptEventError, EventLog, LogClosedError, LogError, StoredEvent


@pytest.fixture(params=BACKENDS)
async def log(request, tmp_path):
    lg = await open_backend(request.param, tmp_path)
    yield lg
    await lg.close()


def _seqs(rows: list[StoredEvent]) -> list[int]:
    return [r.seq for r in rows]


async def test_backends_satisfy_the_protocol(log):
    lg: EventLog = log  # checked by mypy for the tests; at runtime make sure every method exists
    for name in EventLog.__dict__:
        if not name.startswith("_"):
            assert callable(getattr(lg, name)), name


async def test_empty_log(log):
    assert await log.last_seq() == 0
    assert await log.read() == []
    assert [e async for e in log.read_range(1, 100)] == []
    assert await log.checkpoint("dispatcher") == 0
    assert await log.latest_snapshot("cache") is None
    assert await log.tail(1, timeout=0.01) == []


async def test_append_assigns_gap_free_seqs_from_one_and_reads_back_equal_events(log):
    assert await log.append([node(1), node(2), pod(1)]) == [1, 2, 3]
    assert await log.append([bind(1)]) == [4]
    assert await log.append([]) == []
    assert await log.last_seq() == 4
    rows = await log.read()
    assert _seqs(rows) == [1, 2, 3, 4]
    assert [r.event for r in rows] == [node(1), node(2), pod(1), bind(1)]
    assert [r.type for r in rows] == ["node.upserted", "node.upserted", "pod.upserted", "decision.bind"]
    assert all(r.idem_key is None for r in rows)


async def test_every_event_type_round_trips(log):
    seqs = await log.append(ALL_SAMPLES)
    assert seqs == list(range(1, len(ALL_SAMPLES) + 1))
    rows = await log.read(limit=1000)
    assert [r.event for r in rows] == ALL_SAMPLES


async def test_keyset_paging_with_limit(log):
    await log.append([clock(i) for i in range(25)])
    pages: list[list[int]] = []
    seq = 1
    while True:
        page = await log.read(seq, limit=10)
        if not page:
            break
        pages.append(_seqs(page))
        seq = page[-1].seq + 1
    assert pages == [list(range(1, 11)), list(range(11, 21)), list(range(21, 26))]
    assert _seqs(await log.read(24, limit=10)) == [24, 25]
    assert await log.read(26) == []
    assert _seqs(await log.read(0, limit=2)) == [1, 2]  # from_seq below 1 reads from the start


async def test_read_filters_by_type(log):
    await log.append([node(1), bind(1), node(2), clock(1), bind(2), pod(3)])
    assert _seqs(await log.read(types={"decision.bind"})) == [2, 5]
    assert _seqs(await log.read(types=["decision.bind", "pod.upserted"], limit=2)) == [2, 5]
    assert _seqs(await log.read(3, types=("node.upserted", "pod.upserted"))) == [3, 6]
    assert await log.read(types=["queue.upserted"]) == []
    assert await log.read(types=[]) == []


async def test_read_range_is_inclusive_and_pages_in_batches(log):
    await log.append([clock(i) for i in range(30)])
    got = [e.seq async for e in log.read_range(5, 17, batch=4)]
    assert got == list(range(5, 18))
    assert [e.seq async for e in log.read_range(29, 100, batch=7)] == [29, 30]
    assert [e.seq async for e in log.read_range(10, 9)] == []


async def test_read_range_filters_by_type_across_batches(log):
    evs = [bind(i) if i % 5 == 0 else clock(i) for i in range(1, 41)]
    await log.append(evs)
    got = [e.seq async for e in log.read_range(3, 38, types={"decision.bind"}, batch=3)]
    assert got == [5, 10, 15, 20, 25, 30, 35]


async def test_duplicate_idem_key_answers_with_the_original_seq_and_writes_nothing(log):
    assert await log.append([node(1), node(2)], idem_keys=["k1", "k2"]) == [1, 2]
    assert await log.append([node(9)], idem_keys=["k2"]) == [2]
    assert await log.last_seq() == 2
    rows = await log.read()
    assert [r.event for r in rows] == [node(1), node(2)]  # the original, not node(9)
    assert [r.idem_key for r in rows] == ["k1", "k2"]


async def test_batch_with_duplicates_stays_gap_free(log):
    await log.append([node(1)], idem_keys=["a"])
    seqs = await log.append(
        [node(2), node(3), node(4), node(5), node(6)], idem_keys=["b", "a", None, "b", "c"]
    )
    # "a" exists (seq 1); the second "b" answers with the first "b" of the same batch.
    assert seqs == [2, 1, 3, 2, 4]
    rows = await log.read()
    assert _seqs(rows) == [1, 2, 3, 4]
    assert [r.event for r in rows] == [node(1), node(2), node(4), node(6)]
    assert [r.idem_key for r in rows] == ["a", "b", None, "c"]
    assert await log.append([clock(1)]) == [5]


async def test_checkpoint_commits_with_the_append(log):
    assert await log.checkpoint("dispatcher") == 0
    seqs = await log.append([bind(1)], checkpoint=("dispatcher", 7))
    assert seqs == [1]
    assert await log.checkpoint("dispatcher") == 7
    await log.set_checkpoint("dispatcher", 9)
    assert await log.checkpoint("dispatcher") == 9
    assert await log.append([], checkpoint=("other", 3)) == []
    assert await log.checkpoint("other") == 3
    assert await log.checkpoint("dispatcher") == 9
    assert await log.last_seq() == 1


async def test_a_batch_that_fails_to_encode_writes_nothing(log):
    await log.append([node(1)], idem_keys=["first"], checkpoint=("c", 1))
    bad = NodeUpserted(name="bad", manifest={"x": object()})
    with pytest.raises(CodecError) as ei:
        await log.append([node(2), bad, node(3)], idem_keys=["k2", "kbad", "k3"], checkpoint=("c", 4))
    assert isinstance(ei.value, LogError)
    assert await log.last_seq() == 1
    assert _seqs(await log.read()) == [1]
    assert await log.checkpoint("c") == 1
    # the keys of the failed batch were not taken
    assert await log.append([node(2), node(3)], idem_keys=["k2", "k3"]) == [2, 3]


@pytest.mark.parametrize(
    ("kwargs", "message"),
    [
        ({"idem_keys": ["a"]}, "2 events but 1 idempotency keys"),
        ({"idem_keys": ["a", ""]}, "non-empty string"),
        ({"checkpoint": ("", 1)}, "consumer"),
        ({"checkpoint": ("c", -1)}, "non-negative"),
    ],
)
async def test_bad_append_arguments_are_refused_before_writing(log, kwargs, message):
    with pytest.raises(ValueError, match=message):
        await log.append([node(1), node(2)], **kwargs)
    assert await log.last_seq() == 0
    assert await log.checkpoint("c") == 0


async def test_an_event_of_an_old_version_is_refused_on_write(log):
    with pytest.raises(CodecError, match="v=0"):
        await log.append([NodeUpserted(name="a", manifest={}, v=0)])
    assert await log.last_seq() == 0


async def test_tail_returns_at_once_when_events_exist(log):
    await log.append([clock(1), clock(2), clock(3)])
    assert _seqs(await log.tail(2)) == [2, 3]
    assert _seqs(await log.tail(1, limit=1)) == [1]


async def test_tail_waits_for_the_next_append(log):
    await log.append([clock(1)])
    got: list[StoredEvent] = []

    async def waiter() -> None:
        got.extend(await log.tail(2, timeout=5))

    async with anyio.create_task_group() as tg:
        tg.start_soon(waiter)
        await anyio.sleep(0.05)
        assert got == []
        await log.append([clock(2), clock(3)])
    assert _seqs(got) == [2, 3]


async def test_tail_times_out_with_nothing(log):
    await log.append([clock(1)])
    with anyio.fail_after(2):
        assert await log.tail(2, timeout=0.05) == []


async def test_snapshots(log):
    assert await log.latest_snapshot("cache") is None
    await log.save_snapshot("cache", 10, b"ten")
    await log.save_snapshot("cache", 30, b"thirty")
    await log.save_snapshot("cache", 20, b"twenty")
    await log.save_snapshot("other", 40, b"other")
    assert await log.latest_snapshot("cache") == (30, b"thirty")
    assert await log.latest_snapshot("cache", at_or_before=29) == (20, b"twenty")
    assert await log.latest_snapshot("cache", at_or_before=10) == (10, b"ten")
    assert await log.latest_snapshot("cache", at_or_before=9) is None
    await log.save_snapshot("cache", 30, b"THIRTY")  # same position: replaced
    assert await log.latest_snapshot("cache") == (30, b"THIRTY")
    assert await log.latest_snapshot("other") == (40, b"other")


async def test_concurrent_appends_get_distinct_contiguous_seqs(log):
    results: dict[int, list[int]] = {}

    async def writer(w: int) -> None:
        results[w] = await log.append(
            [clock(w * 100 + i) for i in range(50)], idem_keys=[f"{w}-{i}" for i in range(50)]
        )

    async with anyio.create_task_group() as tg:
        for w in range(20):
            tg.start_soon(writer, w)
    all_seqs = sorted(s for seqs in results.values() for s in seqs)
    assert all_seqs == list(range(1, 1001))
    for w, seqs in results.items():
        assert seqs == list(range(seqs[0], seqs[0] + 50)), w  # one batch, one contiguous run
        rows = await log.read(seqs[0], limit=50)
        assert [r.event for r in rows] == [clock(w * 100 + i) for i in range(50)]


async def test_undecodable_row_raises_naming_its_seq(log):
    await log.append([clock(1), clock(2)])
    seq = inject_raw(log, "node.upserted", 1, b"\xc1not msgpack")
    assert seq == 3
    assert _seqs(await log.read(1, limit=2)) == [1, 2]  # rows before it still read
    with pytest.raises(CorruptEventError, match="seq=3") as ei:
        await log.read()
    assert ei.value.seq == 3
    with pytest.raises(CorruptEventError, match="seq=3"):
        _ = [e async for e in log.read_range(1, 3)]


async def test_unknown_event_type_raises_naming_its_seq(log):
    await log.append([clock(1)])
    inject_raw(log, "node.exploded", 1, encode(clock(2)))
    with pytest.raises(CorruptEventError, match=r"seq=2.*unknown event type 'node.exploded'"):
        await log.read()


async def test_body_of_another_type_than_its_row_is_refused(log):
    inject_raw(log, "node.upserted", 1, encode(clock(2)))
    with pytest.raises(CorruptEventError, match="seq=1"):
        await log.read()


async def test_row_from_a_newer_schema_version_is_refused(log):
    inject_raw(log, "clock.advanced", 3, encode(clock(2)))
    with pytest.raises(CorruptEventError, match=r"seq=1.*newer"):
        await log.read()


async def test_closed_log_refuses_work(log):
    await log.append([clock(1)])
    await log.close()
    await log.close()  # idempotent
    with pytest.raises(LogClosedError):
        await log.append([clock(2)])
    with pytest.raises(LogClosedError):
        await log.read()
    with pytest.raises(LogClosedError):
        await log.tail(1)


async def test_a_large_batch_with_keys_reads_back_equal(log):
    """Large batches take another path on PostgreSQL (COPY); the contract is the same."""
    await log.append([node(0)], idem_keys=["k0"])
    evs = [node(i) if i % 3 else bind(i) for i in range(1, 301)]
    keys = [f"k{i % 250}" for i in range(1, 301)]  # k0 exists; k1..k50 repeat within the batch
    seqs = await log.append(evs, idem_keys=keys)
    assert seqs[:249] == list(range(2, 251))
    assert seqs[249] == 1  # k0
    assert seqs[250:] == list(range(2, 52))
    rows = await log.read(limit=1000)
    assert _seqs(rows) == list(range(1, 251))
    assert [r.event for r in rows[1:]] == evs[:249]
