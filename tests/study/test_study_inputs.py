"""Every workload of the paper reads as its loader reads it, and bad study input is one line, exit 2:

* a pod list with only the multi-GPU lists' five columns (name, cpu_milli, memory_mib, num_gpu,
  gpu_milli) reads with the paper loader's defaults (trace.POD_DEFAULTS) and runs inflation; a
  timeline refuses it (it has no times);
* a list asking more than the target is trimmed to it (TunePodsByNodeTotalResource's tuneDownPods),
  or kept whole with --tune up; a list asking less gets draws up to it;
* a row with too few (or too many) fields, a file that is not UTF-8, and `--seeds 51-42` exit 2
  with one line naming the problem and write nothing;
* each seed's line gives that seed's own time, not the time since the first seed began.
"""

from __future__ import annotations

import re
from pathlib import Path

import pytest
from fumarole_study_kit import NODE_HEADER, write_trace

from fumarole.daemon.cli.main import main
from fumarole.daemon.study.inflation import TUNE_UP, inflation_workload
from fumarole.daemon.study.trace import POD_DEFAULTS, TraceError, TracePod, read_pods

NODES = "n0,32000,65536,4,T4\nn1,16000,65536,0,\n"
FIVE = "name,cpu_milli,memory_mib,num_gpu,gpu_milli\n"


def five_column_list(d: Path, rows: str) -> Path:
    d.mkdir(parents=True, exist_ok=True)
    (d / "openb_pod_list_multigpu50.csv").write_text(FIVE + rows)
    (d / "openb_node_list_all_node.csv").write_text(NODE_HEADER + NODES)
    return d / "openb_pod_list_multigpu50.csv"


def test_five_column_lists_read_with_the_loaders_defaults(tmp_path: Path) -> None:
    f = five_column_list(tmp_path / "t", "p0,12000,16384,1,1000\np1,6000,12288,1,460\np2,2000,0,0,0\n")
    pods = read_pods(f)
    assert [p.name for p in pods] == ["p0", "p1", "p2"]
    assert (pods[1].num_gpu, pods[1].gpu_milli, pods[1].memory_mib) == (1, 460, 12288)
    for p in pods:
        assert (p.gpu_spec, p.qos, p.phase, p.creation, p.deletion, p.scheduled) == (
            (),
            POD_DEFAULTS["qos"],
            "Pending",
            0,
            0,
            None,
        )
    # Without gpu_milli a GPU pod takes whole GPUs (the loader's 1000).
    (tmp_path / "four.csv").write_text("name,cpu_milli,memory_mib,num_gpu\nq,1000,10,2\n")
    assert read_pods(tmp_path / "four.csv")[0].total_gpu_milli == 2000
    # name, cpu_milli and num_gpu have no default.
    (tmp_path / "bad.csv").write_text("name,memory_mib,num_gpu\nq,10,2\n")
    with pytest.raises(TraceError, match="missing column"):
        read_pods(tmp_path / "bad.csv")


def test_five_column_list_runs_inflation_not_timeline(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    f = five_column_list(tmp_path / "t", "p0,4000,1024,1,1000\np1,2000,1024,1,500\np2,2000,0,0,0\n")
    assert (
        main(["study", "inflation", "--trace", str(f), "--policy", "fgd", "--out", str(tmp_path / "i.db")])
        == 0
    )
    assert (tmp_path / "i.db").exists()
    capsys.readouterr()
    assert main(["study", "timeline", "--trace", str(f), "--out", str(tmp_path / "t.db")]) == 2
    err = capsys.readouterr().err.strip().splitlines()
    assert len(err) == 1 and "no creation_time or deletion_time column" in err[0]
    assert not (tmp_path / "t.db").exists()


def _pod(name: str, gpus: int, milli: int = 1000) -> TracePod:
    return TracePod(name, 1000, 1024, gpus, milli, (), "LS", "Running", 0, 1, 0)


def test_a_list_above_the_target_is_trimmed_to_it() -> None:
    pods = [_pod(f"p{i}", 1 + i % 4) for i in range(100)] + [_pod(f"c{i}", 0, 0) for i in range(20)]
    asked = sum(p.total_gpu_milli for p in pods)  # 250 GPUs
    capacity = 105_000  # 105 GPUs: the list asks for 238% of it, the target is 130%
    for seed in (42, 43):
        tuned = inflation_workload(pods, capacity, 1.3, seed)
        total = sum(p.total_gpu_milli for p in tuned)
        assert total <= 1.3 * capacity < total + 4000  # trimmed until under, one pod at most too many
        assert {p.name for p in tuned} < {p.name for p in pods}  # only removals, no draws
        assert len({p.name for p in tuned}) == len(tuned)
    assert inflation_workload(pods, capacity, 1.3, 42) != inflation_workload(pods, capacity, 1.3, 43)
    kept = inflation_workload(pods, capacity, 1.3, 42, tune=TUNE_UP)
    assert sum(p.total_gpu_milli for p in kept) == asked and len(kept) == len(pods)
    # Below the target: the list and draws up to it (the simulator's check adds one GPU of the
    # draw, so a 4-GPU draw may pass the target by 3 GPUs).
    grown = inflation_workload(pods, 400_000, 1.3, 42)
    assert len(grown) > len(pods)
    assert 1.3 * 400_000 - 4000 < sum(p.total_gpu_milli for p in grown) <= 1.3 * 400_000 + 3000


def _err_line(capsys: pytest.CaptureFixture[str]) -> str:
    err = capsys.readouterr().err.strip().splitlines()
    assert len(err) == 1, err
    return err[0]


@pytest.mark.parametrize(
    ("pods", "message"),
    [
        (b"x,1000,10,0,0,,LS\n", r"line 2: 7 field\(s\), the header has 11"),
        (b"x,1000,10,0,0,,LS,Running,0,1,0,extra\n", r"line 2: 12 field\(s\), the header has 11"),
        (b"x,1000,10,0,0,,LS,Running,0,1,0\ny\xff,1000,10,0,0,,LS,Running,0,1,0\n", "line 3: not UTF-8 text"),
    ],
)
def test_bad_files_are_one_line_and_exit_2(
    tmp_path: Path, capsys: pytest.CaptureFixture[str], pods: bytes, message: str
) -> None:
    trace = write_trace(tmp_path / "t", "", NODES)
    f = trace / "openb_pod_list_default.csv"
    f.write_bytes(f.read_bytes() + pods)
    for mode in ("inflation", "timeline"):
        out = tmp_path / f"{mode}.db"
        assert main(["study", mode, "--trace", str(trace), "--out", str(out)]) == 2
        line = _err_line(capsys)
        assert str(f) in line and re.search(message, line), line
        assert not out.exists()


@pytest.mark.parametrize("seeds", ["51-42", "", "a-b", "42,x"])
def test_bad_seeds_are_one_line_and_exit_2(
    tmp_path: Path, capsys: pytest.CaptureFixture[str], seeds: str
) -> None:
    trace = write_trace(tmp_path / "t", "x,1000,10,0,0,,LS,Running,0,1,0\n", NODES)
    out = tmp_path / "runs"
    assert main(["study", "inflation", "--trace", str(trace), "--seeds", seeds, "--out", str(out)]) == 2
    line = _err_line(capsys)
    assert line.startswith("fumarole: error: --seeds:") and repr(seeds) in line
    if seeds == "51-42":
        assert "empty" in line
    assert not out.exists()


def test_each_seed_prints_its_own_time(
    tmp_path: Path, capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch
) -> None:
    """A clock that moves one second a reading: each seed's line says 1.0 s (the time since the
    first seed began would say 2.0, 3.0, 4.0)."""
    import fumarole.daemon.cli.study as study_cli

    ticks = iter(range(1000))
    monkeypatch.setattr(study_cli, "_clock", lambda: float(next(ticks)))
    rows = "".join(f"p{i},1000,10,1,{100 + 10 * i},,LS,Running,{i},{i + 9},{i}\n" for i in range(40))
    trace = write_trace(tmp_path / "t", rows, NODES)
    assert (
        main(["study", "inflation", "--trace", str(trace), "--seeds", "42-44", "--out", str(tmp_path / "r")])
        == 0
    )
    lines = [ln for ln in capsys.readouterr().out.splitlines() if ln.startswith("inflation")]
    assert len(lines) == 3
    assert [ln.split(" seed ")[1].split(":")[0] for ln in lines] == ["42", "43", "44"]
    assert all(ln.endswith("(1.0s)") for ln in lines), lines
