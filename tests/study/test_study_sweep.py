"""`fumarole study sweep` on a local Dask cluster of 2 workers (loopback): workloads x policies x
seeds, one CSV row per experiment with every parameter a column, the same numbers as one
experiment run alone, and an interrupted sweep resumed (only the missing experiments run).
A scheduler given by address (--scheduler) is used instead of a local cluster; bad input is one
line, exit 2."""

from __future__ import annotations

import csv
import json
from dataclasses import fields
from pathlib import Path

import pytest
from fumarole_study_kit import NODE_HEADER, POD_HEADER

from fumarole.daemon.cli.main import main
from fumarole.daemon.study.sweep import COLUMNS, ROWS_FILE, Experiment, run_experiment

distributed = pytest.importorskip("distributed")

NODES = "n0,32000,65536,4,T4\nn1,64000,131072,8,V100\nn2,16000,65536,0,\nn3,32000,65536,2,T4\n"


def trace(d: Path) -> Path:
    d.mkdir(parents=True, exist_ok=True)
    rows = "".join(
        f"p{i},{1000 * (1 + i % 4)},1024,{g},{m},,LS,Running,{i},{i + 9},{i}\n"
        for i, (g, m) in enumerate([(0, 0), (1, 300), (1, 1000), (2, 1000)] * 6)
    )
    (d / "openb_pod_list_default.csv").write_text(POD_HEADER + rows)
    five = "".join(f"q{i},2000,1024,{1 + i % 2},1000\n" for i in range(30))  # asks 45 of 14 GPUs: trimmed
    (d / "openb_pod_list_multigpu50.csv").write_text("name,cpu_milli,memory_mib,num_gpu,gpu_milli\n" + five)
    (d / "openb_node_list_all_node.csv").write_text(NODE_HEADER + NODES)
    return d


def read_rows(path: Path) -> list[dict[str, str]]:
    with path.open(newline="") as f:
        return list(csv.DictReader(f))


def test_sweep_on_two_local_workers_resumes(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    t = trace(tmp_path / "t")
    out = tmp_path / "sweep"
    args = [
        "study", "sweep", "--trace", str(t), "--workloads", "default,multigpu50",
        "--policies", "fgd,bestfit", "--seeds", "42-43", "--out", str(out), "--workers", "2",
    ]  # fmt: skip
    assert main(args) == 0
    rows = read_rows(out / "results.csv")
    assert list(rows[0]) == list(COLUMNS)
    assert len(rows) == 8
    got = {(Path(r["workload"]).name, r["policy"], r["seed"]) for r in rows}
    assert len(got) == 8
    assert {r["tie_break"] for r in rows} == {"seeded"} and {r["engine"] for r in rows} == {"core"}
    assert {r["tune"] for r in rows} == {"both"} and {r["percentage_nodes_to_find"] for r in rows} == {"100"}
    # The same numbers as the experiment run alone, in this process.
    first = rows[0]
    types = {f.name: f.type for f in fields(Experiment)}
    exp = Experiment(**{k: {"int": int, "float": float}.get(str(types[k]), str)(first[k]) for k in types})
    alone = run_experiment(exp)
    for k in (
        "workload_pods",
        "placed",
        "failed",
        "gpu_allocated_pct_at_100",
        "gpu_allocated_pct",
        "gpu_fragmentation_pct",
    ):
        assert str(alone[k]) == first[k], k
    # The five-column list above its target was trimmed: fewer pods than the list's 30.
    multi = [r for r in rows if r["workload"].endswith("multigpu50.csv")]
    assert all(int(r["workload_pods"]) < 30 for r in multi)
    capsys.readouterr()

    # Interrupted after 5 rows (the last one torn): rerun runs the 3 missing ones only.
    lines = (out / ROWS_FILE).read_text().splitlines()
    (out / ROWS_FILE).write_text("\n".join(lines[:5]) + "\n" + lines[5][:20])
    (out / "results.csv").unlink()
    assert main(args) == 0
    err = capsys.readouterr().err
    assert "8 experiments, 5 done already, 3 to run" in err

    def numbers(rs: list[dict[str, str]]) -> list[dict[str, str]]:
        return [{k: v for k, v in r.items() if k != "cpu_seconds"} for r in rs]  # a measurement

    assert numbers(read_rows(out / "results.csv")) == numbers(rows)
    # Done: nothing runs.
    assert main(args) == 0
    assert "8 done already, 0 to run" in capsys.readouterr().err
    # Another grid in the same folder is refused.
    assert main([*args[:-4], "--seeds", "42", "--out", str(out)]) == 2
    assert "holds another sweep" in capsys.readouterr().err


@pytest.mark.parametrize("engine,policy", [("fast", "binpack"), ("core", "fgd")])
def test_allocation_at_100_is_the_reports_point(tmp_path: Path, engine: str, policy: str) -> None:
    """The sweep's `gpu_allocated_pct_at_100` is the report's inflation curve at arrived 100 %."""
    t = trace(tmp_path / "t")
    db = tmp_path / "run.db"
    common = ["--trace", str(t / "openb_pod_list_default.csv"), "--engine", engine, "--policy", policy]
    assert main(["study", "inflation", *common, "--seeds", "7", "--out", str(db)]) == 0
    assert main(["report", "--db", str(db), "--formats", "svg", "--out", str(tmp_path / "rep")]) == 0
    [at100] = [r for r in read_rows(tmp_path / "rep" / "inflation.csv") if r["arrived_pct"] == "100"]
    nodes = str(t / "openb_node_list_all_node.csv")
    ties, pct = ("first", 0) if engine == "fast" else ("seeded", 100)
    exp = Experiment(str(t / "openb_pod_list_default.csv"), nodes, policy, engine, 7, 1.3, "both", ties, pct)
    row = run_experiment(exp)
    assert round(row["gpu_allocated_pct_at_100"], 3) == float(at100["allocated_pct"])
    [s] = read_rows(tmp_path / "rep" / "summary.csv")
    assert row["gpu_allocated_pct"] == pytest.approx(float(s["gpu_alloc_final_pct"]), abs=1e-3)


def test_sweep_on_a_scheduler_by_address(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    t = trace(tmp_path / "t")
    with distributed.LocalCluster(
        n_workers=2, threads_per_worker=1, processes=True, host="127.0.0.1", dashboard_address=None
    ) as cluster:
        out = tmp_path / "s"
        args = ["study", "sweep", "--trace", str(t), "--policies", "random,fgd", "--engine", "core"]
        assert main([*args, "--seeds", "7", "--out", str(out), "--scheduler", cluster.scheduler_address]) == 0
        rows = read_rows(out / "results.csv")
        assert [(r["policy"], r["seed"]) for r in rows] == [("random", "7"), ("fgd", "7")]
        assert all(
            json.loads(line)["policy"] in ("random", "fgd")
            for line in (out / ROWS_FILE).read_text().splitlines()
        )


@pytest.mark.parametrize(
    ("extra", "message"),
    [
        (["--seeds", "44-42"], "--seeds:"),
        (["--policies", "tetris"], "--policies: unknown"),
        (["--engine", "fast", "--policies", "fgd,tetris"], "--policies: unknown for --engine fast"),
        (["--workloads", "nosuch"], "openb_pod_list_nosuch.csv: cannot read"),
    ],
)
def test_sweep_bad_input_is_one_line(
    tmp_path: Path, capsys: pytest.CaptureFixture[str], extra: list[str], message: str
) -> None:
    t = trace(tmp_path / "t")
    out = tmp_path / "s"
    assert main(["study", "sweep", "--trace", str(t), "--out", str(out), *extra]) == 2
    err = capsys.readouterr().err.strip().splitlines()
    assert len(err) == 1 and message in err[0], err
    assert not out.exists()
