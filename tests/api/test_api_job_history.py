"""A job's history (when and why it waited, binds, evictions, phases) over a real daemon's finished log:
`fumarole explain` (text and JSON) and GET /v1/jobs/{namespace}/{name}, checked against the log itself."""

from __future__ import annotations

import asyncio
import json
import sqlite3
import subprocess
import sys
from collections import defaultdict
from pathlib import Path
from typing import Any

import pytest
from fumarole_api_kit import FUMAROLE, child_env, start_serve, stop, write_history

from fumarole.daemon.runtime.job_history import (
    Bound,
    Evicted,
    Explained,
    JobHistoryReader,
    Phase,
    Timeline,
    fold_decisions,
)
from fumarole.store.events import (
    BindDecided,
    CycleOpened,
    EvictDecided,
    JobExplained,
    PodGroupStatusChanged,
)

sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "e2e"))
from fumarole_e2e_kit import read_log, run_daemon, write_small_sim


@pytest.fixture(scope="module")
def finished(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """The log of the real daemon run to the end on the e2e kit's small simulated workload."""
    tmp = tmp_path_factory.mktemp("job-history")
    cluster, workload = write_small_sim(tmp)
    p = run_daemon("--data-dir", str(tmp / "data"), "--cluster", str(cluster), "--workload", str(workload))
    assert p.returncode == 0, p.stdout + p.stderr
    return tmp / "data" / "fumarole.db"


def _explain(db: Path, job: str, *args: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [FUMAROLE, "explain", "--db", str(db), job, *args],
        capture_output=True,
        text=True,
        timeout=120,
        env=child_env(),
    )


def _expected(db: Path, job: str) -> dict[str, Any]:
    """The job's history recomputed from a full read of the log (every event, no index)."""
    now: dict[int, int] = {}
    explained: list[tuple[int, frozenset[str], bool]] = []
    binds: dict[int, dict[str, str]] = defaultdict(dict)
    evictions: list[dict[str, Any]] = []
    phases: list[tuple[int, str]] = []
    for row in read_log(db):
        ev = row.event
        if isinstance(ev, CycleOpened):
            now[ev.cycle] = ev.now_ms
        elif isinstance(ev, JobExplained) and f"{ev.namespace}/{ev.name}" == job:
            explained.append(
                (ev.cycle, frozenset(r.code for r in ev.reasons), bool(ev.message or ev.reasons))
            )
        elif isinstance(ev, BindDecided) and ev.job == job:
            binds[ev.cycle][f"{ev.namespace}/{ev.name}"] = ev.node
        elif isinstance(ev, EvictDecided) and ev.job == job:
            evictions.append({"cycle": ev.cycle, "pod": f"{ev.namespace}/{ev.name}", "node": ev.node})
        elif (
            isinstance(ev, PodGroupStatusChanged)
            and f"{ev.namespace}/{ev.name}" == job
            and (not phases or phases[-1][1] != ev.phase)
        ):
            phases.append((ev.cycle, ev.phase))
    spans: list[list[Any]] = []  # [first, until, codes]
    for cycle, codes, waiting in explained:
        if spans and spans[-1][1] is None and (not waiting or spans[-1][2] != codes):
            spans[-1][1] = cycle
        if waiting and (not spans or spans[-1][1] is not None):
            spans.append([cycle, None, codes])
    last = max(now)
    cycles = sorted(now)
    return {
        "now": now,
        "spans": [
            {
                "first_cycle": a,
                "until_cycle": b,
                "from_ms": now[a],
                "until_ms": now[b] if b is not None else None,
                "cycles": sum(1 for c in cycles if a <= c < (b if b is not None else last + 1)),
                "reasons": codes,
            }
            for a, b, codes in spans
        ],
        "binds": [{"cycle": c, "at_ms": now[c], "pods": pods} for c, pods in sorted(binds.items())],
        "evictions": [{**e, "at_ms": now[e["cycle"]]} for e in evictions],
        "phases": [{"cycle": c, "at_ms": now[c], "phase": p} for c, p in phases],
    }


def _jobs_that_waited_then_ran(db: Path) -> list[str]:
    waited = {
        f"{r.event.namespace}/{r.event.name}" for r in read_log(db) if isinstance(r.event, JobExplained)
    }
    bound = {r.event.job for r in read_log(db) if isinstance(r.event, BindDecided)}
    return sorted(waited & bound)


def test_explain_json_history_of_a_finished_log_matches_the_log(finished: Path) -> None:
    jobs = _jobs_that_waited_then_ran(finished)
    assert len(jobs) >= 3, jobs
    evicted = 0
    for job in jobs:
        r = _explain(finished, job, "--format", "json")
        assert r.returncode == 0, r.stderr
        d = json.loads(r.stdout)
        h = d["history"]
        want = _expected(finished, job)
        assert d["phase"] == "Completed" and d["pending"] is False and d["explanation"] is None
        got_spans = [
            {k: s[k] for k in ("first_cycle", "until_cycle", "from_ms", "until_ms", "cycles")}
            | {"reasons": frozenset(s["reasons"])}
            for s in h["waits"]
        ]
        assert got_spans == want["spans"], job
        assert all(s["last_cycle"] < s["until_cycle"] and s["message"] for s in h["waits"])
        assert h["waiting"] is False and h["waits_total"] == len(want["spans"]) >= 1
        assert h["wait_cycles"] == sum(s["cycles"] for s in want["spans"])
        assert h["waited_ms"] == sum(s["until_ms"] - s["from_ms"] for s in want["spans"])
        assert (h["waited_from_cycle"], h["waited_from_ms"]) == (
            want["spans"][0]["first_cycle"],
            want["spans"][0]["from_ms"],
        )
        assert h["waited_until_cycle"] == want["spans"][-1]["until_cycle"]
        assert h["binds"] == want["binds"] and h["binds_total"] == len(want["binds"])
        assert [{k: e[k] for k in ("cycle", "pod", "node", "at_ms")} for e in h["evictions"]] == want[
            "evictions"
        ]
        assert all(e["action"] and e["reason"] for e in h["evictions"])
        assert h["phases"] == want["phases"] and h["phases"][-1]["phase"] == "Completed"
        evicted += len(h["evictions"])
    assert evicted > 0  # the workload reclaims: some job's history shows its evictions


def test_explain_text_shows_the_history_as_a_timeline(finished: Path) -> None:
    job = next(j for j in _jobs_that_waited_then_ran(finished) if _expected(finished, j)["evictions"])
    want = _expected(finished, job)
    r = _explain(finished, job)
    assert r.returncode == 0, r.stderr
    out = r.stdout
    assert "pending: no" in out and "history (t = virtual time, [n] = cycle id):" in out
    first, last = want["spans"][0], want["spans"][-1]
    since = f"from t={first['from_ms'] // 1000}s [{first['first_cycle']}]"
    assert f"{since} to t={last['until_ms'] // 1000}s [{last['until_cycle']}]" in out
    for s in want["spans"]:
        assert f"waiting {s['cycles']} cycle" in out
        assert f", until t={s['until_ms'] // 1000}s [{s['until_cycle']}]: [" in out
    for b in want["binds"]:
        pod, node = next(iter(b["pods"].items()))
        assert f"t={b['at_ms'] // 1000}s [{b['cycle']}]" in out and f"{pod} -> {node}" in out
    e = want["evictions"][0]
    assert f"evicted {e['pod']} from {e['node']} (" in out
    assert "phase Completed" in out
    lines = [ln for ln in out.splitlines() if ln.startswith("  t=")]
    cycles = [int(ln.split("[")[1].split("]")[0].split("-")[0]) for ln in lines]
    assert cycles == sorted(cycles) and len(lines) >= len(want["spans"]) + len(want["binds"])


def test_rest_job_detail_carries_the_same_history(finished: Path, tmp_path: Path) -> None:
    import urllib.request

    job = _jobs_that_waited_then_ran(finished)[0]
    db = tmp_path / "log.db"
    db.write_bytes(finished.read_bytes())
    proc, base = start_serve(db)
    try:
        with urllib.request.urlopen(f"{base}/v1/jobs/{job}", timeout=10) as resp:
            api = json.loads(resp.read())
        with urllib.request.urlopen(f"{base}/openapi.json", timeout=10) as resp:
            schemas = json.loads(resp.read())["components"]["schemas"]
    finally:
        assert stop(proc) == 0
    cli = json.loads(_explain(finished, job, "--format", "json").stdout)
    assert api["history"] == cli["history"] and api["history"]["waits"]
    assert schemas["JobDetail"]["properties"]["history"] == {"$ref": "#/components/schemas/JobHistory"}
    assert "history" in schemas["JobDetail"]["required"]
    assert set(schemas["JobHistory"]["required"]) == set(api["history"])
    assert set(schemas["WaitSpan"]["required"]) == set(api["history"]["waits"][0])


def test_a_job_still_waiting_has_an_open_span_through_the_last_cycle(tmp_path: Path) -> None:
    db = tmp_path / "log.db"
    asyncio.run(write_history(str(db), cycles=3))
    d = json.loads(_explain(db, "team-a/bad-fit", "--format", "json").stdout)
    h = d["history"]
    assert d["pending"] is True and h["waiting"] is True
    span = h["waits"][-1]
    assert span["until_cycle"] is None and span["until_ms"] is None and span["last_cycle"] == 3
    assert span["reasons"] == [r["code"] for r in d["explanation"]["reasons"]]
    assert h["wait_cycles"] == 3 and h["waited_ms"] == 2000  # cycles 1..3, one virtual second apart
    text = _explain(db, "team-a/bad-fit").stdout
    assert "and still waits at the end of the log" in text and "[1-3]" in text
    assert "waiting 3 cycles, still at the end of the log: [" in text


def test_the_history_lists_the_most_recent_entries_and_stops_at_the_folded_seq(finished: Path) -> None:
    job = max(_jobs_that_waited_then_ran(finished), key=lambda j: len(_expected(finished, j)["spans"]))
    want = _expected(finished, job)
    assert len(want["spans"]) > 2
    reader = JobHistoryReader(str(finished))
    try:
        last = max(want["now"])
        full = reader.history(job, upto_seq=10**9, last_cycle=last)
        short = reader.history(job, upto_seq=10**9, last_cycle=last, listed=2)
        assert short.waits == full.waits[-2:] and short.waits_total == full.waits_total
        assert short.waited_ms == full.waited_ms and short.wait_cycles == full.wait_cycles
        assert short.phases == full.phases[-2:] and short.listed == 2
        # as of the seq of the second span's first explanation: the span is open there
        rows = [
            r.seq
            for r in read_log(finished)
            if isinstance(r.event, JobExplained)
            and f"{r.event.namespace}/{r.event.name}" == job
            and r.event.cycle == want["spans"][1]["first_cycle"]
        ]
        then = reader.history(job, upto_seq=rows[0], last_cycle=want["spans"][1]["first_cycle"])
        assert then.waits_total == 2 and then.waiting and then.waits[-1].until_cycle is None
        assert [b.cycle for b in then.binds] == [
            b["cycle"] for b in want["binds"] if b["cycle"] <= want["spans"][1]["first_cycle"]
        ]
    finally:
        reader.close()


def test_rows_indexed_before_the_detail_column_are_read_from_their_events(
    finished: Path, tmp_path: Path
) -> None:
    db = tmp_path / "log.db"
    db.write_bytes(finished.read_bytes())
    jobs = _jobs_that_waited_then_ran(finished)
    before = {job: json.loads(_explain(db, job, "--format", "json").stdout)["history"] for job in jobs}
    conn = sqlite3.connect(db)
    with conn:
        assert conn.execute("UPDATE decision_index SET detail = NULL WHERE detail IS NOT NULL").rowcount > 0
    conn.close()
    after = {job: json.loads(_explain(db, job, "--format", "json").stdout)["history"] for job in jobs}
    assert after == before


def test_fold_groups_explanations_by_reason_set() -> None:
    t = fold_decisions(
        Timeline(),
        [
            Explained(1, 10, ("gang-unsatisfied", "predicates-failed")),
            Bound(2, "ns/a-0", "n1"),
            Bound(2, "ns/a-1", "n2"),
            Explained(2, 20, ("predicates-failed", "gang-unsatisfied")),  # the same set: the same span
            Phase(3, "Inqueue"),
            Phase(3, "Inqueue"),  # no change
            Explained(4, 40, ("queue-overused",)),
            Explained(5, 50, None),  # no longer waiting
            Evicted(6, 60),
            Explained(7, 70, ("pipelined",)),
        ],
    )
    assert [(s.first_cycle, s.seq, s.until_cycle, s.codes) for s in t.spans] == [
        (1, 10, 4, ("gang-unsatisfied", "predicates-failed")),
        (4, 40, 5, ("queue-overused",)),
        (7, 70, None, ("pipelined",)),
    ]
    assert t.binds == [(2, {"ns/a-0": "n1", "ns/a-1": "n2"})]
    assert [(p.cycle, p.phase) for p in t.phases] == [(3, "Inqueue")]
    assert [e.seq for e in t.evictions] == [60]
