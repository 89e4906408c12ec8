"""The studies' core engine: real scheduler sessions deciding trace pods.

* differential: on seeded random small traces the fast placer's `binpack` and the core engine under
  examples/study/vgpu-binpack-plugin.yaml put every pod on the same node and the same cards;
* inflation's one session decides as one session per arriving pod (binpack and spread presets);
* the fgd plugin's batch score decides as the per-node reference score it replaced;
* the CLI: `--engine core` is the default, records its configuration, and bad `--conf` exits 2.
"""

from __future__ import annotations

import json
import random
from pathlib import Path
from typing import Any

import numpy as np
import pytest
from fumarole_study_kit import write_trace

from fumarole.daemon.cli.main import main
from fumarole.daemon.scheduler.framework import combinators as cb
from fumarole.daemon.scheduler.framework import registry
from fumarole.daemon.scheduler.framework.conf import parse_conf
from fumarole.daemon.scheduler.framework.session import Session
from fumarole.daemon.scheduler.model.fit import Code, FitError, fit_error
from fumarole.daemon.scheduler.model.node import NodeInfo
from fumarole.daemon.scheduler.model.task import TaskInfo
from fumarole.daemon.scheduler.plugins.deviceshare import NAME as DEVICESHARE
from fumarole.daemon.scheduler.plugins.deviceshare import DeviceSharePlugin, Pool
from fumarole.daemon.scheduler.plugins.fgd import NAME as FGD
from fumarole.daemon.scheduler.plugins.fgd import FgdPlugin, task_gpu
from fumarole.daemon.study.confs import PRESETS, preset_text
from fumarole.daemon.study.core_engine import CoreCluster
from fumarole.daemon.study.inflation import typical_of
from fumarole.daemon.study.placement import Cluster, Placement
from fumarole.daemon.study.trace import TraceNode, TracePod

ROOT = Path(__file__).resolve().parents[2]


def random_trace(seed: int, nodes: int = 10, pods: int = 80) -> tuple[list[TraceNode], list[TracePod]]:
    r = random.Random(seed)
    ns = [
        TraceNode(
            f"n{i:02d}",
            r.choice([16000, 32000, 64000]),
            r.choice([65536, 131072]),
            r.choice([0, 1, 2, 4, 8]),
            r.choice(["T4", "V100"]),
        )
        for i in range(nodes)
    ]
    ps = []
    for i in range(pods):
        k = r.random()
        if k < 0.2:
            g, m = 0, 0
        elif k < 0.6:
            g, m = 1, r.choice([100, 250, 500, 700])
        else:
            g, m = r.choice([1, 2, 4]), 1000
        spec = (r.choice(["T4", "V100"]),) if g and r.random() < 0.2 else ()
        ps.append(
            TracePod(
                f"p{i:03d}",
                r.choice([1000, 2000, 4000, 8000]),
                r.choice([1024, 4096, 16384]),
                g,
                m,
                spec,
                r.choice(["LS", "BE", "Burstable"]),
                "Running",
                i,
                i + 100,
                i,
            )
        )
    return ns, ps


def one_session(nodes: list[TraceNode], pods: list[TracePod], conf_text: str) -> dict[str, Placement]:
    core = CoreCluster(nodes, parse_conf(conf_text), arrival_order=True)
    return core.run([(p, i * 1000) for i, p in enumerate(pods)], float(len(pods))).placed


def fast(nodes: list[TraceNode], pods: list[TracePod], policy: str) -> dict[str, Placement]:
    cluster = Cluster(nodes, policy, typical_of(pods))
    out: dict[str, Placement] = {}
    for p in pods:
        where = cluster.place(p)
        if where is not None:
            cluster.bind(p, where)
            out[p.name] = where
    return out


@pytest.mark.parametrize("seed", range(12))
def test_fast_binpack_is_volcanos_binpack_plugin(seed: int) -> None:
    nodes, pods = random_trace(seed)
    conf = (ROOT / "examples/study/vgpu-binpack-plugin.yaml").read_text()
    core = one_session(nodes, pods, conf)
    assert core == fast(nodes, pods, "binpack")
    assert len(pods) // 4 < len(core) < len(pods)  # a real test: many pods placed, some not


def test_fast_placer_only_approximates_the_named_configurations() -> None:
    """What docs/studies.md and --help say: Volcano's presets' core decisions differ from the
    placer's (its fgd decides as the core's: test_study_fgd_policy.py)."""
    traces = [random_trace(seed) for seed in range(4)]
    for policy in ("binpack", "spread"):
        assert any(one_session(n, p, preset_text(policy)) != fast(n, p, policy) for n, p in traces), policy


@pytest.mark.parametrize("policy", ["binpack", "spread"])
def test_one_inflation_session_decides_as_one_session_per_arrival(policy: str) -> None:
    conf = parse_conf(preset_text(policy))
    for seed in range(4):
        nodes, pods = random_trace(100 + seed)
        once = one_session(nodes, pods, preset_text(policy))
        core = CoreCluster(nodes, conf, arrival_order=True)
        each: dict[str, Placement] = {}
        for i, p in enumerate(pods):
            each.update(core.run([(p, i * 1000)], float(i + 1)).placed)
            core.drop_pending()  # a pod placed nowhere fails for good
        assert once == each
        assert 0 < len(once) < len(pods)


class ReferenceFgd(FgdPlugin):
    """The fgd plugin's score one node at a time (no batch): every pod scored, a CPU-only pod by
    the cpu it takes, shapes judged by the node's GPU model."""

    def reference(self, task: TaskInfo, node: NodeInfo) -> float:
        cards, milli = task_gpu(task)
        if self.typical is None:
            return 0.0
        left = self.node_cards(node)
        if left is None:
            if cards:
                return 0.0
            left = [0]
        model = self._models(np.array([node.index]))
        cpu = int(node.idle.cpu)
        before = self._frag(np.array([cpu]), np.array([left]), model)[0]
        options: list[list[int]] = []
        if cards == 0:
            options.append(list(left))
        elif cards == 1 and milli < 1000:
            for k in range(len(left)):
                if left[k] >= milli:
                    options.append([*left[:k], left[k] - milli, *left[k + 1 :]])
        else:
            free = [k for k in range(len(left)) if left[k] >= milli][:cards]
            options.append([v - milli if k in free else v for k, v in enumerate(left)])
        if not options:
            return 0.0
        n = len(options)
        after = self._frag(
            np.full(n, cpu - int(task.resreq.cpu)), np.array(options), np.repeat(model, n)
        ).min()
        return float(np.floor(100.0 / (1.0 + np.exp((after - before) / 1000.0)))) * self.weight

    def on_session_open(self, ssn: Session) -> None:
        super().on_session_open(ssn)
        ssn.fns[cb.NODE_ORDER][FGD] = self.reference
        ssn.batch_fns[cb.NODE_ORDER].pop(FGD, None)


def test_fgd_batch_score_decides_as_the_per_node_score(monkeypatch: pytest.MonkeyPatch) -> None:
    conf = preset_text("fgd")
    for seed in range(6):
        nodes, pods = random_trace(200 + seed, nodes=12, pods=120)
        batch = one_session(nodes, pods, conf)
        with monkeypatch.context() as m:
            m.setitem(registry.PLUGINS, FGD, lambda args: ReferenceFgd(args))
            reference = one_session(nodes, pods, conf)
        assert batch == reference


def events(db: Path) -> list[dict[str, Any]]:
    import subprocess
    import sys

    out = subprocess.run(
        [sys.executable, "-m", "fumarole.daemon.cli", "events", "--db", str(db)],
        capture_output=True,
        text=True,
        check=True,
        cwd=ROOT,
    ).stdout
    return [json.loads(line)["event"] for line in out.splitlines()]


def test_cli_core_engine_is_default_and_records_its_conf(tmp_path: Path) -> None:
    nodes, pods = random_trace(7, nodes=4, pods=30)
    rows = "".join(
        f"{p.name},{p.cpu_milli},{p.memory_mib},{p.num_gpu},{p.gpu_milli},{'|'.join(p.gpu_spec)},{p.qos},"
        f"Running,{p.creation},{p.deletion},{p.scheduled}\n"
        for p in pods
    )
    node_rows = "".join(f"{n.name},{n.cpu_milli},{n.memory_mib},{n.gpus},{n.model}\n" for n in nodes)
    trace = write_trace(tmp_path / "trace", rows, node_rows)
    db = tmp_path / "core.db"
    assert main(["study", "inflation", "--trace", str(trace), "--out", str(db)]) == 0
    evs = events(db)
    params = json.loads(evs[0]["text"])
    assert params["engine"] == "core" and params["conf"] == "examples/study/vgpu-binpack.yaml"
    binds = [e for e in evs if e["type"] == "decision.bind"]
    assert binds and all(b["queue"] == "inflation" for b in binds)
    assert any("volcano.sh/vgpu-ids-new" in b["annotations"] for b in binds)
    assert main(["study", "timeline", "--trace", str(trace), "--out", str(tmp_path / "t.db")]) == 0
    tl = events(tmp_path / "t.db")
    models = {n.model for n in nodes if n.gpus}
    placeable = [p for p in pods if not p.gpu_spec or set(p.gpu_spec) & models]
    assert sum(e["type"] == "decision.bind" for e in tl) == len(placeable) < len(pods)


def test_cli_bad_engine_input_exits_2_and_writes_nothing(tmp_path: Path) -> None:
    nodes, pods = random_trace(8, nodes=2, pods=3)
    trace = write_trace(
        tmp_path / "trace",
        "".join(
            f"{p.name},1000,1024,0,0,,BE,Running,{p.creation},{p.deletion},{p.scheduled}\n" for p in pods
        ),
        "".join(f"{n.name},{n.cpu_milli},{n.memory_mib},{n.gpus},{n.model}\n" for n in nodes),
    )
    bad = tmp_path / "bad.yaml"
    bad.write_text("actions: [1\n")
    out = tmp_path / "x.db"
    base = ["study", "inflation", "--trace", str(trace), "--out", str(out)]
    assert main([*base, "--conf", str(bad)]) == 2
    assert main([*base, "--conf", str(tmp_path / "missing.yaml")]) == 2
    assert main([*base, "--engine", "fast", "--conf", str(ROOT / "examples/study/vgpu-fgd.yaml")]) == 2
    assert main([*base, "--policy", "tetris"]) == 2
    assert not out.exists()


def test_presets_are_the_example_files() -> None:
    for name, (file, text) in PRESETS.items():
        body = "".join(
            line + "\n"
            for line in (ROOT / "examples/study" / file).read_text().splitlines()
            if not line.startswith("#")
        )
        assert body == text, name


class UnbatchedDeviceShare(DeviceSharePlugin):
    """deviceshare as before its batch callbacks and FilterNode memo: one node at a time, always
    fitting afresh."""

    def predicate(self, task: TaskInfo, node: NodeInfo) -> FitError | None:
        for p in self.pools(node.name):
            if not p.has_request(task):
                continue
            msg = p.filter(task, self.args.schedule_policy)
            if msg is not None:
                return fit_error(task.namespace, task.name, node.name, Code.UNSCHEDULABLE, msg)
        return None

    def _pool_score(self, p: Pool, task: TaskInfo, node: NodeInfo) -> float:
        return p.score(task)  # the score the pool's last FilterNode left (its cards are fresh)

    def on_session_open(self, ssn: Session) -> None:
        super().on_session_open(ssn)
        ssn.fns[cb.PREDICATE][DEVICESHARE] = self.predicate
        ssn.batch_fns[cb.PREDICATE].pop(DEVICESHARE, None)
        ssn.batch_fns[cb.NODE_ORDER].pop(DEVICESHARE, None)


@pytest.mark.parametrize("policy", ["binpack", "spread", "fgd"])
def test_deviceshare_batch_and_memo_decide_as_one_node_at_a_time(
    policy: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    for seed in range(3):
        nodes, pods = random_trace(300 + seed, nodes=12, pods=120)
        batch = one_session(nodes, pods, preset_text(policy))
        with monkeypatch.context() as m:
            m.setitem(registry.PLUGINS, DEVICESHARE, lambda args: UnbatchedDeviceShare(args))
            single = one_session(nodes, pods, preset_text(policy))
        assert batch == single
