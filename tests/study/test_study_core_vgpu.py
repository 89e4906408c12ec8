"""The importer's output under the real scheduling core: deviceshare vGPU cards shared by pods,
the fgd plugin choosing the fuller card where Volcano's node order would not, and its decisions
the same on every run (the plugin is deterministic)."""

from __future__ import annotations

from pathlib import Path

from fumarole_study_kit import write_trace

from fumarole.daemon.adapters.simulator import Simulator
from fumarole.daemon.adapters.simulator.alibaba import convert_alibaba
from fumarole.daemon.adapters.simulator.driver import Driver
from fumarole.daemon.scheduler.framework.conf import parse_conf
from fumarole.store.events import BindDecided

ROOT = Path(__file__).resolve().parents[2]
# x (400 milli) arrives first; y (600) can take x's card on one node or an idle card on the other.
PODS = (
    "x,1000,1024,1,400,,LS,Running,0,1000,0\n"
    "y,1000,1024,1,600,,LS,Running,10,1000,10\n"
    "z,2000,2048,2,1000,,BE,Running,20,1000,20\n"
)
NODES = "a,32000,65536,2,T4\nb,32000,65536,2,T4\n"


def binds(tmp_path: Path, conf_name: str, *, without_fgd: bool = False) -> dict[str, tuple[str, str]]:
    trace = write_trace(tmp_path / "trace", PODS, NODES)
    convert_alibaba(trace, tmp_path / "w.yaml", cluster_out=tmp_path / "c.yaml")
    text = (ROOT / "examples/study" / conf_name).read_text()
    if without_fgd:  # Volcano's default node order in its place, no device score
        text = text.replace("  - name: fgd\n    arguments:\n      fgd.weight: 10\n", "  - name: nodeorder\n")
        text = text.replace("      deviceshare.ScheduleWeight: 10\n", "")
        assert "fgd" not in text.split("tiers:")[1]
    conf = parse_conf(text)
    d = Driver(Simulator.from_files(tmp_path / "c.yaml", tmp_path / "w.yaml"), conf)
    d.run(max_cycles=5000)
    assert d.sim.stats().succeeded == 3
    return {
        e.name.removesuffix("-pod-0"): (e.node, e.annotations.get("volcano.sh/vgpu-ids-new", ""))
        for e in d.log
        if isinstance(e, BindDecided)
    }


def test_shared_pods_share_a_card_with_fgd(tmp_path: Path) -> None:
    got = binds(tmp_path, "vgpu-fgd.yaml")
    x_node, x_ids = got["x"]
    y_node, y_ids = got["y"]
    assert x_ids.endswith(",NVIDIA,400,40:") and y_ids.endswith(",NVIDIA,600,60:")
    assert y_node == x_node and y_ids.split(",")[0] == x_ids.split(",")[0]  # the same card, filled
    z_node, z_ids = got["z"]
    assert z_node != x_node and z_ids.count(",NVIDIA,1000,100:") == 2  # two whole cards
    assert binds(tmp_path / "again", "vgpu-fgd.yaml") == got
    volcano = binds(tmp_path / "volcano", "vgpu-fgd.yaml", without_fgd=True)
    assert volcano["y"][0] != volcano["x"][0]  # least requested: the idle node


def test_examples_confs_parse_and_binpack_places_everything(tmp_path: Path) -> None:
    got = binds(tmp_path, "vgpu-binpack.yaml")
    assert set(got) == {"x", "y", "z"} and all(ids for _, ids in got.values())
