"""`fumarole study` and `fumarole report` end to end on a small hand-made trace: real SQLite logs,
CSV numbers checked against a recomputation from the log's JSON lines, PNG files checked."""

from __future__ import annotations

import csv
import json
import struct
import subprocess
import sys
from pathlib import Path

import pytest
from fumarole_study_kit import write_trace

from fumarole.daemon.cli.main import main

PODS = "".join(
    f"p{i:03d},{2000 + 1000 * (i % 5)},4096,{g},{m},,{q},Running,"
    f"{i * 30},{i * 30 + 400 + 50 * (i % 7)},{i * 30}\n"
    for i, (g, m, q) in enumerate(
        [
            (1, 500, "LS"),
            (1, 1000, "BE"),
            (2, 1000, "LS"),
            (0, 0, "BE"),
            (1, 250, "Burstable"),
            (1, 700, "BE"),
        ]
        * 6
    )
)
NODES = "n0,32000,131072,0,\nn1,16000,65536,2,T4\nn2,32000,131072,4,P100\n"


@pytest.fixture(scope="module")
def runs(tmp_path_factory: pytest.TempPathFactory) -> Path:
    d = tmp_path_factory.mktemp("study")
    trace = write_trace(d / "trace", PODS, NODES)
    assert (
        main(
            [
                "study",
                "inflation",
                "--trace",
                str(trace),
                "--policy",
                "fgd",
                "--seeds",
                "1-2",
                "--out",
                str(d / "infl"),
            ]
        )
        == 0
    )
    assert (
        main(
            [
                "study",
                "inflation",
                "--trace",
                str(trace),
                "--policy",
                "binpack",
                "--seeds",
                "1",
                "--out",
                str(d / "b1.db"),
            ]
        )
        == 0
    )
    assert (
        main(["study", "timeline", "--trace", str(trace), "--period", "10", "--out", str(d / "tl.db")]) == 0
    )
    return d


def events(db: Path) -> list[dict]:
    out = subprocess.run(
        [sys.executable, "-m", "fumarole.daemon.cli", "events", "--db", str(db)],
        capture_output=True,
        text=True,
        check=True,
    )
    return [json.loads(line) for line in out.stdout.splitlines()]


def gpu_milli(manifest: dict) -> int:
    lim = manifest["spec"]["containers"][0]["resources"].get("limits", {})
    return int(lim.get("volcano.sh/vgpu-number", 0)) * int(lim.get("volcano.sh/vgpu-cores", 0)) * 10


def rows(path: Path) -> list[dict[str, str]]:
    with path.open() as f:
        return list(csv.DictReader(f))


def png_size(path: Path) -> tuple[int, int]:
    data = path.read_bytes()
    assert data[:8] == b"\x89PNG\r\n\x1a\n" and data[12:16] == b"IHDR"
    w, h = struct.unpack(">II", data[16:24])
    return w, h


def test_report_files_numbers_and_figures(runs: Path, tmp_path: Path) -> None:
    dbs = sorted((runs / "infl").glob("*.db"))
    assert [p.name for p in dbs] == ["fgd-seed1.db", "fgd-seed2.db"]
    out = tmp_path / "rep"
    assert (
        main(
            [
                "report",
                "--db",
                str(runs / "tl.db"),
                "--compare",
                *map(str, dbs),
                str(runs / "b1.db"),
                "--out",
                str(out),
            ]
        )
        == 0
    )
    names = {p.name for p in out.iterdir()}
    figures = {
        "utilisation.png",
        "pending.png",
        "evictions.png",
        "fragmentation.png",
        "waits.png",
        "inflation.png",
    }
    assert (
        figures
        | {"index.html", "summary.csv", "utilisation.csv", "inflation.csv", "inflation_mean.csv", "waits.csv"}
        <= names
    )
    for f in figures:
        w, h = png_size(out / f)
        assert 1500 <= w <= 5000 and 800 <= h <= 3000, f  # 300 dpi
        assert 5_000 < (out / f).stat().st_size < 1_500_000, f
    page = (out / "index.html").read_text()
    assert all(f'src="{f}"' in page for f in figures) and "<table>" in page
    assert "queues.png" not in names  # no queue shares recorded by study runs: no empty figure

    summary = {r["run"]: r for r in rows(out / "summary.csv")}
    for db in [*dbs, runs / "b1.db"]:
        ev = events(db)
        cap = sum(
            int(e["event"]["manifest"]["status"]["allocatable"].get("volcano.sh/vgpu-memory", 0))
            for e in ev
            if e["type"] == "node.upserted"
        )
        pods = {
            e["event"]["name"]: gpu_milli(e["event"]["manifest"]) for e in ev if e["type"] == "pod.upserted"
        }
        bound = [e["event"]["name"] for e in ev if e["type"] == "decision.bind"]
        failed = [e["event"]["name"] for e in ev if e["type"] == "pod.deleted"]
        assert len(bound) + len(failed) == len(pods) and failed  # the small cluster overflows
        s = summary[db.stem]
        assert float(s["gpu_alloc_final_pct"]) == pytest.approx(
            round(100 * sum(pods[b] for b in bound) / cap, 3)
        )
        assert int(s["unplaceable"]) == len(failed) and s["mode"] == "inflation"
        # the curve: allocated after the k-th arrival, in arrival order
        order = list(pods)
        curve = [r for r in rows(out / "inflation.csv") if r["run"] == db.stem]
        arrived = allocated = 0
        expect = {}
        for name in order:
            arrived += pods[name]
            allocated += pods[name] if name in bound else 0
            k = 100 * arrived / cap
            for x in range(0, 131):
                if x <= k and x not in expect:
                    expect[x] = round(100 * allocated / cap, 3) if k == x else None
        for r in curve:
            if expect.get(int(r["arrived_pct"])) is not None:
                assert float(r["allocated_pct"]) == pytest.approx(expect[int(r["arrived_pct"])])
    mean = [r for r in rows(out / "inflation_mean.csv") if r["policy"] == "fgd"]
    assert mean and all(
        r["runs"] == "2" and float(r["min"]) <= float(r["mean"]) <= float(r["max"]) for r in mean
    )

    # timeline: waits and makespan recomputed from the log
    ev = events(runs / "tl.db")
    created = {
        e["event"]["name"]: e["event"]["at_ms"]
        for e in ev
        if e["type"] == "pod.upserted" and e["event"]["manifest"]["status"]["phase"] == "Pending"
    }
    now, waits = 0, []
    for e in ev:
        if e["type"] == "cycle.opened":
            now = e["event"]["now_ms"]
        elif e["type"] == "decision.bind":
            waits.append((now - created[e["event"]["name"]]) / 1000)
    s = summary["tl"]
    assert len(waits) == len(created) == 36 and s["mode"] == "timeline"
    assert float(s["wait_mean_s"]) == pytest.approx(round(sum(waits) / len(waits), 3))
    assert float(s["wait_p50_s"]) == pytest.approx(
        round(sorted(waits)[len(waits) // 2 - 1] / 2 + sorted(waits)[len(waits) // 2] / 2, 3)
    )
    assert [r["wait_s"] for r in rows(out / "waits.csv") if r["run"] == "tl"] == [str(w) for w in waits]


def test_bad_input_exits_2_and_writes_nothing(runs: Path, tmp_path: Path) -> None:
    trace = runs / "trace"
    assert (
        main(
            ["study", "inflation", "--trace", str(trace), "--policy", "best", "--out", str(tmp_path / "x.db")]
        )
        == 2
    )
    assert (
        main(["study", "inflation", "--trace", str(tmp_path / "none"), "--out", str(tmp_path / "x.db")]) == 2
    )
    assert main(["study", "timeline", "--trace", str(trace), "--out", str(runs / "tl.db")]) == 2  # exists
    assert main(["report", "--db", str(tmp_path / "missing.db"), "--out", str(tmp_path / "r")]) == 2
    assert (
        main(["study", "timeline", "--trace", str(trace), "--period", "0", "--out", str(tmp_path / "t.db")])
        == 2
    )
    assert main(["study", "timeline", "--trace", str(trace), "--out", str(runs / "tl.db" / "t.db")]) == 2
    bad = runs / "not-a-log.db"
    bad.write_text("garbage")
    assert main(["report", "--db", str(bad), "--out", str(tmp_path / "r")]) == 2
    assert sorted(p.name for p in tmp_path.iterdir()) == []


def test_study_creates_the_directories_out_names(runs: Path, tmp_path: Path) -> None:
    """As in docs/studies.md: `--out runs/fgd` with several seeds, or a file in a new directory."""
    trace = runs / "trace"
    args = ["study", "inflation", "--trace", str(trace), "--engine", "fast"]
    assert main([*args, "--seeds", "1-2", "--out", str(tmp_path / "runs" / "fast")]) == 0
    assert sorted(p.name for p in (tmp_path / "runs" / "fast").iterdir()) == [
        "binpack-seed1.db",
        "binpack-seed2.db",
    ]
    assert main([*args, "--seeds", "3", "--out", str(tmp_path / "one" / "s3.db")]) == 0
    assert (tmp_path / "one" / "s3.db").is_file()


RECLAIM_PREEMPT_CONF = """\
actions: "enqueue, allocate, preempt, reclaim, backfill"
tiers:
- plugins:
  - name: priority
  - name: gang
  - name: conformance
- plugins:
  - name: overcommit
  - name: drf
  - name: predicates
  - name: proportion
  - name: nodeorder
"""


def test_report_of_a_daemon_run_counts_evictions_and_queue_shares(tmp_path: Path) -> None:
    """The bundled sample under the real core (reclaim and preemption happen), its log in SQLite."""
    import anyio

    from fumarole.daemon.adapters.simulator import Simulator
    from fumarole.daemon.adapters.simulator.driver import Driver
    from fumarole.daemon.scheduler.framework.conf import parse_conf
    from fumarole.store.sqlite import SqliteEventLog

    d = Driver(Simulator.bundled(), parse_conf(RECLAIM_PREEMPT_CONF))
    d.run(max_cycles=5000)
    db = tmp_path / "daemon.db"

    async def write() -> None:
        log = await SqliteEventLog.open(db)
        try:
            await log.append(d.log)  # type: ignore[arg-type]
        finally:
            await log.close()

    anyio.run(write)
    out = tmp_path / "rep"
    assert main(["report", "--db", str(db), "--out", str(out)]) == 0
    ev = events(db)
    [s] = rows(out / "summary.csv")
    assert s["mode"] == "daemon" and int(s["evictions"]) == sum(e["type"] == "decision.evict" for e in ev) > 0
    assert (
        float(s["makespan_s"]) == max(e["event"]["now_ms"] for e in ev if e["type"] == "cycle.opened") / 1000
    )
    figures = [e["event"] for e in ev if e["type"] == "decision.queue_figures"]
    queues = rows(out / "queues.csv")
    assert len(queues) == sum(len(f["queues"]) for f in figures) and {q["queue"] for q in queues} >= {
        "prod",
        "dev",
    }
    util = rows(out / "utilisation.csv")
    assert len(util) == sum(e["type"] == "cycle.closed" for e in ev)
    assert int(util[-1]["evictions"]) == int(s["evictions"]) and util[-1]["pending"] == "0"
    assert png_size(out / "queues.png")[0] >= 300
