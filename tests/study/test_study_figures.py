"""`fumarole report`'s figures for publication, on real study logs of a small hand-made trace: SVG
parsed as XML (legend entries), PNG dpi metadata, PDF, grouping by every parameter that differs,
the paper's reference curves, 30 groups, no time axis for inflation, no empty queue figure, the
workload x policy table (CSV and HTML), summary columns, a run given twice read once."""

from __future__ import annotations

import csv
import struct
import xml.etree.ElementTree as ET
from pathlib import Path

import pytest
from fumarole_study_kit import write_trace

from fumarole.daemon.cli.main import main
from fumarole.daemon.study.figures import style

PODS = "".join(
    f"p{i:03d},{2000 + 1000 * (i % 5)},4096,{g},{m},,{q},Running,{i * 30},{i * 30 + 400},{i * 30}\n"
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
SVG = "{http://www.w3.org/2000/svg}"


@pytest.fixture(scope="module")
def logs(tmp_path_factory: pytest.TempPathFactory) -> Path:
    d = tmp_path_factory.mktemp("figs")
    trace = write_trace(d / "trace", PODS, NODES)
    base = ["study", "inflation", "--trace", str(trace)]
    assert main([*base, "--policy", "fgd", "--seeds", "1-2", "--out", str(d / "core")]) == 0
    assert (
        main([*base, "--policy", "fgd", "--engine", "fast", "--seeds", "1-2", "--out", str(d / "fast")]) == 0
    )
    assert main([*base, "--policy", "bestfit", "--seeds", "1", "--out", str(d / "bf.db")]) == 0
    assert (
        main(["study", "timeline", "--trace", str(trace), "--period", "10", "--out", str(d / "tl.db")]) == 0
    )
    return d


def report(tmp: Path, *args: str) -> Path:
    out = tmp / "rep"
    assert main(["report", *args, "--out", str(out)]) == 0
    return out


def rows(path: Path) -> list[dict[str, str]]:
    with path.open() as f:
        return list(csv.DictReader(f))


def svg_texts(path: Path) -> list[str]:
    root = ET.parse(path).getroot()  # valid XML or this raises
    assert root.tag == f"{SVG}svg"
    return ["".join(t.itertext()) for t in root.iter(f"{SVG}text")]


def png_dpi(path: Path) -> tuple[int, int]:
    data = path.read_bytes()
    assert data[:8] == b"\x89PNG\r\n\x1a\n"
    i = data.index(b"pHYs")
    x, y, unit = struct.unpack(">IIB", data[i + 4 : i + 13])
    assert unit == 1  # per metre
    return round(x * 0.0254), round(y * 0.0254)


def test_inflation_figure_svg_png_pdf_groups_and_legend(logs: Path, tmp_path: Path) -> None:
    dbs = sorted(map(str, [*(logs / "core").glob("*.db"), *(logs / "fast").glob("*.db"), logs / "bf.db"]))
    out = report(tmp_path, "--db", dbs[0], "--compare", *dbs, "--formats", "png,svg,pdf")
    assert png_dpi(out / "inflation.png") == (300, 300)
    assert (out / "inflation.pdf").read_bytes()[:5] == b"%PDF-"
    texts = svg_texts(out / "inflation.svg")
    # fgd on two engines: two curves, told apart by the engine (and the tie rule that goes with it)
    fgd = [t for t in texts if t.startswith("fgd ·")]
    assert len(fgd) == 2 and any("engine core" in t for t in fgd) and any("engine fast" in t for t in fgd)
    assert all("(mean of 2)" in t for t in fgd)
    assert any(t.startswith("bestfit · engine core") and "(mean of 1)" in t for t in texts)
    assert "shaded band: min–max over seeds" in texts
    assert "diagonal: allocated = arrived (nothing failed)" in texts
    assert not any("virtual time" in t for t in texts)
    # no time-series figure for inflation runs, hence no queue figure either
    names = {p.name for p in out.iterdir()}
    assert not {"utilisation.png", "pending.png", "queues.png", "waits.png"} & names
    summary = rows(out / "summary.csv")
    assert len(summary) == 5  # dbs[0] given twice, read once
    assert {(r["policy"], r["engine"], r["conf"]) for r in summary} == {
        ("fgd", "core", "examples/study/vgpu-fgd.yaml"),
        ("fgd", "fast", ""),
        ("bestfit", "core", "examples/study/vgpu-bestfit.yaml"),
    }
    assert {r["trace"] for r in summary} == {"openb_pod_list_default.csv"}


def test_table_csv_and_html_against_the_curves(logs: Path, tmp_path: Path) -> None:
    dbs = [str(p) for p in sorted((logs / "core").glob("*.db"))] + [str(logs / "bf.db")]
    paper = tmp_path / "expected.csv"
    head = "workload,sc_policy,tune,seed,total_gpus," + ",".join(map(str, range(131)))
    lines = [head] + [
        f"openb_pod_list_default,06-FGD,1.3,{s},6," + ",".join(str(min(k, 90 + s) * 1.0) for k in range(131))
        for s in (1, 2)
    ]
    paper.write_text("\n".join(lines) + "\n")
    out = report(tmp_path, "--db", dbs[0], "--compare", *dbs[1:], "--paper", str(paper))
    texts = svg_texts(out / "inflation.svg")
    assert "paper fgd (Weng et al., mean of 2 seeds)" in texts
    assert "dashed: the paper's curve, same colour" in texts
    table = {r["policy"]: r for r in rows(out / "table.csv")}
    assert set(table) == {"fgd", "bestfit"} and table["fgd"]["runs"] == "2"
    curves = rows(out / "inflation.csv")
    for policy, t in table.items():
        at100 = [
            float(r["allocated_pct"]) for r in curves if r["policy"] == policy and r["arrived_pct"] == "100"
        ]
        assert float(t["alloc_at_100_mean"]) == pytest.approx(sum(at100) / len(at100), abs=1e-3)
        assert t["trace"] == "openb_pod_list_default" and t["engine"] == "core"
    assert float(table["fgd"]["paper_at_100_mean"]) == pytest.approx(91.5)
    assert float(table["fgd"]["paper_at_130_mean"]) == pytest.approx(91.5)
    assert table["bestfit"]["paper_at_130_mean"] == ""
    page = (out / "index.html").read_text()
    assert "Allocated GPUs per workload and policy" in page and "(paper 91.50 / 91.50)" in page
    assert f"{float(table['fgd']['alloc_at_100_mean']):.2f} / " in page


def test_thirty_groups_keep_a_readable_legend(logs: Path, tmp_path: Path) -> None:
    """30 runs differing by ratio: 30 legend entries, each curve its own (colour, marker)."""
    trace = logs / "trace"
    dbs = []
    for i in range(30):
        db = tmp_path / f"r{i}.db"
        ratio = f"{1.0 + i / 100:.2f}"
        args = ["study", "inflation", "--trace", str(trace), "--engine", "fast", "--policy", "fgd"]
        assert main([*args, "--ratio", ratio, "--seeds", "1", "--out", str(db)]) == 0
        dbs.append(str(db))
    out = report(tmp_path, "--db", dbs[0], "--compare", *dbs[1:], "--formats", "svg")
    entries = [t for t in svg_texts(out / "inflation.svg") if t.startswith("fgd · ratio ")]
    assert len(entries) == 30 and len(set(entries)) == 30
    pairs = {(style(i)["color"], style(i).get("marker")) for i in range(30)}
    assert len(pairs) == 30
    assert not (out / "inflation.png").exists()


def test_timeline_figures_have_time_axes_and_no_empty_queue_figure(logs: Path, tmp_path: Path) -> None:
    out = report(tmp_path, "--db", str(logs / "tl.db"))
    for stem in ("utilisation", "pending", "fragmentation", "waits"):
        assert png_dpi(out / f"{stem}.png") == (300, 300)
    assert any("virtual time" in t for t in svg_texts(out / "utilisation.svg"))
    assert "line style: GPU" in svg_texts(out / "utilisation.svg")
    assert not (out / "queues.png").exists()  # a study timeline records no queue shares
    assert "No queue figure" in (out / "index.html").read_text()


def test_axis_flags_and_bad_report_input(logs: Path, tmp_path: Path) -> None:
    db = str(logs / "bf.db")
    out = report(tmp_path, "--db", db, "--xlim", "50,130", "--ylim", "40,100", "--formats", "svg")
    ticks = svg_texts(out / "inflation.svg")
    assert "50" in ticks and "130" in ticks and "40" in ticks
    for bad in (
        ["--xlim", "130,50"],
        ["--ylim", "x"],
        ["--formats", "gif"],
        ["--paper", str(tmp_path / "none.csv")],
    ):
        assert main(["report", "--db", db, *bad, "--out", str(tmp_path / "r2")]) == 2
    assert not (tmp_path / "r2").exists()
