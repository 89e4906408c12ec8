"""Property: random append/checkpoint sequences give the same answers on every backend and a plain model."""

from __future__ import annotations

import sys
import tempfile
from pathlib import Path

import anyio
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

sys.path.insert(0, str(Path(__file__).resolve().parent))
from fumarole_store_kit import clock, new_pg_dsn

from fumarole.store.memory import MemoryEventLog
from fumarole.store.postgres import PostgresEventLog
from fumarole.store.sqlite import SqliteEventLog

keys = st.one_of(st.none(), st.sampled_from(["a", "b", "c", "d", "e", "f"]))
batch = st.lists(st.tuples(st.integers(0, 50), keys), max_size=6)
op = st.tuples(batch, st.one_of(st.none(), st.tuples(st.sampled_from(["x", "y"]), st.integers(0, 99))))
ops = st.lists(op, min_size=1, max_size=8)


def model(operations):
    """What the contract says, in plain Python."""
    rows: list[tuple[int, str | None]] = []
    seen: dict[str, int] = {}
    answers: list[list[int]] = []
    cps: dict[str, int] = {}
    for evs, cp in operations:
        ans = []
        for at, k in evs:
            if k is not None and k in seen:
                ans.append(seen[k])
                continue
            rows.append((at, k))
            if k is not None:
                seen[k] = len(rows)
            ans.append(len(rows))
        answers.append(ans)
        if cp is not None:
            cps[cp[0]] = cp[1]
    return answers, rows, cps


async def run(log, operations):
    answers = []
    for evs, cp in operations:
        answers.append(
            await log.append([clock(at) for at, _ in evs], idem_keys=[k for _, k in evs], checkpoint=cp)
        )
    rows = [(r.event.at_ms, r.idem_key) for r in await log.read(limit=1000)]
    cps = {c: await log.checkpoint(c) for c in ("x", "y")}
    last = await log.last_seq()
    await log.close()
    return (
        answers,
        rows,
        {c: s for c, s in cps.items() if s or c in {cp[0] for _, cp in operations if cp}},
        last,
    )


@settings(max_examples=25, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(ops)
def test_backends_match_the_model(operations):
    want_answers, want_rows, want_cps = model(operations)
    with tempfile.TemporaryDirectory() as d:
        dsn = new_pg_dsn()

        async def every():
            mem = await run(MemoryEventLog(), operations)
            sql = await run(await SqliteEventLog.open(Path(d) / "e.db"), operations)
            pg = await run(await PostgresEventLog.open(dsn), operations)
            return mem, sql, pg

        results = anyio.run(every)
    for got in results:
        answers, rows, cps, last = got
        assert answers == want_answers
        assert rows == want_rows
        assert last == len(want_rows)
        assert cps == want_cps
