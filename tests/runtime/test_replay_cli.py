"""`fumarole replay` over a recorded history: identical, tampered (exit 1), corrupt (exit 2), what-if."""

from __future__ import annotations

import copy
import json
import re
import sqlite3
from pathlib import Path
from typing import Any

import anyio
import msgspec
import pytest

from fumarole.daemon.cache import Projection, save
from fumarole.daemon.cli import main
from fumarole.daemon.manifests import expand_job, load_objects
from fumarole.daemon.runtime.conf_watch import bundled_conf_text, conf_hash, parse_scheduler_conf
from fumarole.daemon.runtime.cycle import decide
from fumarole.daemon.runtime.replay import replay
from fumarole.store.codec import decode, encode
from fumarole.store.events import (
    BindDecided,
    ClockAdvanced,
    ConfigurationRecorded,
    PodUpserted,
    upserted,
)
from fumarole.store.sqlite import SqliteEventLog

ALT_CONF = """\
actions: "enqueue, allocate, backfill"
tiers:
- plugins:
  - name: priority
  - name: gang
- plugins:
  - name: drf
  - name: predicates
  - name: nodeorder
"""


def _observed(at: int) -> list[Any]:
    objs = load_objects("daemon/examples/cluster.yaml")
    pcs = [o for o in objs if o[2]["kind"] == "PriorityClass"]
    out: list[Any] = []
    for f, i, o in objs:
        items = expand_job(f, i, o, priority_classes=pcs) if o["kind"] == "Job" else [o]
        out.extend(upserted(m, at) for m in items if m["kind"] != "Namespace")
    return out


async def _history(path: str, cycles: int = 4, snapshot_after: int | None = None) -> dict[str, Any]:
    """A daemon-like run: observed facts, cycles decided and folded, the cluster answering binds."""
    log = await SqliteEventLog.open(path)
    p = Projection()
    info: dict[str, Any] = {"binds": [], "cycles": []}

    async def write(events: list[Any]) -> list[int]:
        seqs = await log.append(events)
        for s, e in zip(seqs, events, strict=True):
            p.fold(s, e)
        return seqs

    text = bundled_conf_text()
    conf = parse_scheduler_conf(text, "bundled")
    info["conf_seq"] = (await write([ConfigurationRecorded(conf_hash=conf_hash(text), text=text)]))[0]
    await write(_observed(1_000))
    now = 1_000
    for c in range(1, cycles + 1):
        snap = p.freeze(cycle=c)
        d = decide(
            snap,
            conf,
            cycle=c,
            watermark=p.seq,
            conf_hash=conf_hash(text),
            previous=p.explanations(),
            previous_queues=p.queue_figures_in_force(),
        )
        seqs = await write(list(d.events))
        info["cycles"].append(seqs[0])
        answers: list[Any] = []
        for s, ev in zip(seqs, d.events, strict=True):
            if isinstance(ev, BindDecided):
                info["binds"].append(s)
                m = copy.deepcopy(p.manifest("Pod", ev.namespace, ev.name))
                assert m is not None
                m["spec"]["nodeName"] = ev.node
                m.setdefault("status", {})["phase"] = "Running"
                answers.append(PodUpserted(namespace=ev.namespace, name=ev.name, manifest=m, at_ms=now))
        now += 1_000
        answers.append(ClockAdvanced(at_ms=now))
        await write(answers)
        if snapshot_after == c:
            await save(log, p)
    info["last"] = p.seq
    await log.close()
    return info


@pytest.fixture(scope="module")
def recorded(tmp_path_factory: pytest.TempPathFactory) -> tuple[Path, dict[str, Any]]:
    path = tmp_path_factory.mktemp("replay") / "log.db"
    info = anyio.run(_history, str(path), 4, 2)
    return path, info


def _copy(src: Path, tmp_path: Path) -> Path:
    dst = tmp_path / "copy.db"
    with sqlite3.connect(src) as a, sqlite3.connect(dst) as b:
        a.backup(b)
    return dst


def _rewrite(db: Path, seq: int, fn: Any) -> None:
    with sqlite3.connect(db) as c:
        type_, v, body = c.execute("SELECT type, v, body FROM events WHERE seq = ?", (seq,)).fetchone()
        new_type, new_body = fn(type_, v, body)
        c.execute("UPDATE events SET type = ?, body = ? WHERE seq = ?", (new_type, new_body, seq))


def test_replay_recorded_history_is_identical(recorded: tuple[Path, dict[str, Any]], capsys: Any) -> None:
    db, info = recorded
    assert main(["replay", "--db", str(db)]) == 0
    out = capsys.readouterr().out
    assert "4 cycle(s) replayed: 4 identical, 0 different" in out
    assert out.count("identical") >= 5
    lines = out.splitlines()
    header = next(i for i, line in enumerate(lines) if line.startswith("CYCLE"))
    assert re.split(r"\s{2,}", lines[header]) == ["CYCLE", "SEQ", "WATERMARK", "RESULT", "FIRST DIFFERENCE"]
    rows = [re.split(r"\s{2,}", line) for line in lines[header + 1 : header + 5]]
    assert [(int(r[0]), int(r[1]), r[3]) for r in rows] == [
        (c, seq, "identical") for c, seq in zip([1, 2, 3, 4], info["cycles"], strict=True)
    ]
    assert main(["replay", "--db", str(db), "--format", "json"]) == 0
    doc = json.loads(capsys.readouterr().out)
    assert [c["cycle"] for c in doc["cycles"]] == [1, 2, 3, 4]
    assert [c["seq"] for c in doc["cycles"]] == info["cycles"]
    assert all(c["identical"] and c["firstDifference"] is None for c in doc["cycles"])
    assert doc["summary"]["eventsFolded"] >= info["cycles"][-1]


def test_replay_range_uses_the_snapshot_and_selects_cycles(
    recorded: tuple[Path, dict[str, Any]], capsys: Any
) -> None:
    db, info = recorded
    first, *_, last = info["cycles"]
    assert main(["replay", "--db", str(db), "--from", str(info["cycles"][2]), "--format", "json"]) == 0
    doc = json.loads(capsys.readouterr().out)
    assert [c["cycle"] for c in doc["cycles"]] == [3, 4]
    assert doc["summary"]["identical"] == 2
    assert main(["replay", "--db", str(db), "--to", str(first), "--format", "json"]) == 0
    assert [c["cycle"] for c in json.loads(capsys.readouterr().out)["cycles"]] == [1]
    assert last > first


def test_replay_names_the_first_difference_and_exits_1(
    recorded: tuple[Path, dict[str, Any]], tmp_path: Path, capsys: Any
) -> None:
    db = _copy(recorded[0], tmp_path)
    seq = recorded[1]["binds"][0]

    def other_node(type_: str, v: int, body: bytes) -> tuple[str, bytes]:
        ev = decode(type_, v, body)
        assert isinstance(ev, BindDecided)
        return type_, encode(msgspec.structs.replace(ev, node="nowhere"))

    _rewrite(db, seq, other_node)
    assert main(["replay", "--db", str(db), "--format", "json"]) == 1
    doc = json.loads(capsys.readouterr().out)
    bad = [c for c in doc["cycles"] if not c["identical"]]
    assert bad and bad[0]["cycle"] == 1
    assert "decision 1: recorded decision.bind" in bad[0]["firstDifference"]
    assert "-> nowhere" in bad[0]["firstDifference"]
    assert main(["replay", "--db", str(db)]) == 1
    assert "DIFFERENT" in capsys.readouterr().out


def test_replay_corrupt_or_unknown_rows_exit_2_naming_the_seq(
    recorded: tuple[Path, dict[str, Any]], tmp_path: Path, capsys: Any
) -> None:
    db = _copy(recorded[0], tmp_path)
    _rewrite(db, 7, lambda t, v, b: (t, b"\xc1\x00garbage"))
    assert main(["replay", "--db", str(db)]) == 2
    assert "seq=7" in capsys.readouterr().err
    db2 = tmp_path / "copy2.db"
    db2.write_bytes(recorded[0].read_bytes())
    _rewrite(db2, 9, lambda t, v, b: ("no.such.type", b))
    assert main(["replay", "--db", str(db2)]) == 2
    assert "seq=9" in capsys.readouterr().err


def test_replay_missing_configuration_or_file_is_bad_input(
    recorded: tuple[Path, dict[str, Any]], tmp_path: Path, capsys: Any
) -> None:
    db = _copy(recorded[0], tmp_path)
    conf_seq = recorded[1]["conf_seq"]
    _rewrite(db, conf_seq, lambda t, v, b: ("clock.advanced", encode(ClockAdvanced(at_ms=1))))
    assert main(["replay", "--db", str(db)]) == 2
    assert "is not recorded in the log" in capsys.readouterr().err
    assert main(["replay", "--db", str(tmp_path / "absent.db")]) == 2
    bad_conf = tmp_path / "bad.yaml"
    bad_conf.write_text("actions: 'enqueue, nosuch'\n")
    assert main(["replay", "--db", str(recorded[0]), "--conf", str(bad_conf)]) == 2


def test_replay_with_an_alternative_configuration_reports_what_would_differ(
    recorded: tuple[Path, dict[str, Any]], tmp_path: Path, capsys: Any
) -> None:
    alt = tmp_path / "alt.yaml"
    alt.write_text(ALT_CONF)
    assert main(["replay", "--db", str(recorded[0]), "--conf", str(alt), "--format", "json"]) == 0
    doc = json.loads(capsys.readouterr().out)
    assert doc["summary"]["alternativeConfHash"] == conf_hash(ALT_CONF)
    first = doc["cycles"][0]
    assert first["identical"]
    what = first["whatIf"]
    # Without proportion the ETL gang is no longer held back by its queue's share.
    assert what["bindsByJob"]["team-a/etl"] == {"recorded": 0, "alternative": 6}
    assert set(what["queueShares"]) >= {"batch"}
    assert main(["replay", "--db", str(recorded[0]), "--conf", str(alt)]) == 0
    assert "binds team-a/etl 0->6" in capsys.readouterr().out


def test_replay_strict_refuses_an_alternative_that_draws_a_warning(
    recorded: tuple[Path, dict[str, Any]], tmp_path: Path, capsys: Any
) -> None:
    alt = tmp_path / "alt.yaml"
    alt.write_text(ALT_CONF.replace("name: gang", "name: gangg"))
    assert main(["replay", "--db", str(recorded[0]), "--conf", str(alt), "--strict"]) == 2
    err = capsys.readouterr().err
    assert f"{alt}: tiers[0].plugins[1].name: unknown plugin 'gangg'" in err and "strict" in err
    assert main(["replay", "--db", str(recorded[0]), "--conf", str(alt)]) == 0
    err = capsys.readouterr().err
    assert err.count("warning: ") == 1 and "did you mean 'gang'?" in err


def test_replay_progress_is_reported_per_cycle(recorded: tuple[Path, dict[str, Any]]) -> None:
    seen: list[tuple[int, int]] = []

    async def run() -> Any:
        log = await SqliteEventLog.open(str(recorded[0]), readonly=True)
        try:
            return await replay(log, progress=lambda d, t: seen.append((d, t)))
        finally:
            await log.close()

    report = anyio.run(run)
    assert seen == [(1, 4), (2, 4), (3, 4), (4, 4)]
    assert not report.different
