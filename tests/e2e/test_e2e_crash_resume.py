"""A crash must not change a simulation: the daemon killed between any two steps of the lockstep
(and at random moments) and restarted ends with exactly the log of the uninterrupted run.

The cut points come from the test-only FUMAROLE_TEST_CRASH_AFTER_COMMITS (the daemon exits 137
right after its Nth commit) with FUMAROLE_TEST_DISPATCH_BATCH=1 (one commit per forwarded
decision, so a cycle's dispatch can be cut half way).  Logs are compared event by event with
`fumarole.daemon.runtime.cycle.comparable` (timings and trace ids aside): same cycles, same binds and
evictions in the same cycles, same virtual times, same everything else.
"""

from __future__ import annotations

import random
import signal
import subprocess
import time
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import pytest
import yaml
from fumarole_e2e_kit import FUMAROLE, _job, env, read_log, write_small_sim

from fumarole.daemon.runtime.cycle import comparable, describe
from fumarole.daemon.runtime.fault_injection import CRASH_AFTER_COMMITS, CRASH_EXIT_STATUS, DISPATCH_BATCH
from fumarole.daemon.runtime.lockstep import LockstepTracker, Position, Step
from fumarole.store.events import BindDecided, EvictDecided
from fumarole.store.log import StoredEvent

SEED = 15


@dataclass(frozen=True)
class Reference:
    args: tuple[str, ...]
    rows: list[StoredEvent]
    commits: int
    """How many commits the run makes with one forwarded decision per commit."""


def _workload(dir_: Path) -> tuple[Path, Path]:
    """The small e2e workload (gangs, preemption, reclaim) with a second job in the first cycle (so
    its dispatch is several commits) and a pod no node can hold (so the run ends the way a stuck
    workload does: an advance that moves nothing, then one last cycle)."""
    c, w = write_small_sim(dir_, jobs=10)
    docs = list(yaml.safe_load_all(w.read_text()))
    docs.insert(0, _job("pair", "b", 2, 1, at=0, dur=5, pc="low"))
    docs.append(_job("huge", "a", 1, 16, at=60, dur=10, pc="low"))
    w.write_text(yaml.safe_dump_all(docs, sort_keys=False))
    return c, w


def _run(ref_args: tuple[str, ...], data: Path, *, crash_after: int | None = None) -> int:
    extra = {DISPATCH_BATCH: "1"}
    if crash_after is not None:
        extra[CRASH_AFTER_COMMITS] = str(crash_after)
    p = subprocess.run(
        [FUMAROLE, "run", "--data-dir", str(data), *ref_args],
        capture_output=True,
        text=True,
        timeout=120,
        env=env(**extra),
    )
    assert p.returncode in (0, CRASH_EXIT_STATUS), p.stdout + p.stderr
    return p.returncode


def _position(rows: list[StoredEvent]) -> Position:
    t = LockstepTracker()
    for r in rows:
        t.fold(r.seq, r.event)
    return t.position()


def _cut(rows: list[StoredEvent]) -> str:
    """Which lockstep step the log stops after."""
    pos = _position(rows)
    if pos.step is Step.CYCLE:
        return "advance"
    if pos.step is Step.LIST or pos.cycle == 0:
        return "listing"
    decided = [
        r.seq for r in rows if isinstance(r.event, BindDecided | EvictDecided) and r.event.cycle == pos.cycle
    ]
    if not pos.undispatched:
        return "dispatch" if decided else "cycle"
    return "cycle" if len(pos.undispatched) == len(decided) else "mid-dispatch"


def _short(event: Any) -> str:
    text = repr(comparable(event))
    return text if len(text) < 200 else text[:200] + "…"


def _same_prefix(got: list[StoredEvent], ref: list[StoredEvent], what: str) -> None:
    for g, r in zip(got, ref, strict=False):
        if comparable(g.event) != comparable(r.event):
            pytest.fail(
                f"{what}: seq {g.seq} is {describe(g.event)!r} ({_short(g.event)}), "
                f"the uninterrupted run has {describe(r.event)!r} ({_short(r.event)})"
            )
    assert len(got) <= len(ref), f"{what}: the log runs past the uninterrupted one ({len(got)} > {len(ref)})"


def _same_run(got: list[StoredEvent], ref: list[StoredEvent], what: str) -> None:
    _same_prefix(got, ref, what)
    assert len(got) == len(ref), f"{what}: the log ends at seq {len(got)}, the reference at {len(ref)}"


def _commits(rows: list[StoredEvent]) -> int:
    """Listing + one per clock advance, recorded configuration, cycle and forwarded decision."""
    kinds = ("clock.advanced", "config.recorded", "cycle.opened", "outcome.")
    return 1 + sum(1 for r in rows if r.type.startswith(kinds))


@pytest.fixture(scope="module")
def reference(tmp_path_factory: pytest.TempPathFactory) -> Reference:
    d = tmp_path_factory.mktemp("crash-resume")
    c, w = _workload(d)
    args = ("--cluster", str(c), "--workload", str(w), "--no-api")
    p = subprocess.run(
        [FUMAROLE, "run", "--data-dir", str(d / "reference"), *args],
        capture_output=True,
        text=True,
        timeout=120,
        env=env(),
    )
    assert p.returncode == 0 and "workload drained" in p.stdout, p.stdout + p.stderr
    rows = read_log(d / "reference" / "fumarole.db")
    types = {r.type for r in rows}
    assert {"decision.bind", "decision.evict", "outcome.evict_succeeded"} <= types
    return Reference(args, rows, _commits(rows))


def _crash_one_commit_at_a_time(ref: Reference, data: Path, *, until: Any, limit: int) -> set[str]:
    """Restart with a crash after every single commit while `until(position)` is false; check each
    log is a prefix of the reference; return the kinds of cut points seen."""
    db = data / "fumarole.db"
    cuts: set[str] = set()
    length = len(read_log(db)) if db.exists() else 0
    for _ in range(limit):
        rc = _run(ref.args, data, crash_after=1)
        rows = read_log(db)
        _same_prefix(rows, ref.rows, f"after a crash at seq {len(rows)} (restarted at seq {length})")
        if rc == 0:
            return cuts
        assert len(rows) > length, "a restart committed nothing before the crash"
        length = len(rows)
        cuts.add(_cut(rows))
        if until(_position(rows)):
            return cuts
    pytest.fail(f"no end after {limit} restarts")


def test_a_crash_between_any_two_steps_of_the_first_cycles_changes_nothing(
    reference: Reference, tmp_path: Path
) -> None:
    data = tmp_path / "data"

    def past_cycle_3(pos: Position) -> bool:
        return pos.step is Step.ADVANCE and pos.cycle >= 3 and not pos.undispatched

    cuts = _crash_one_commit_at_a_time(reference, data, until=past_cycle_3, limit=30)
    # after the listing, each clock advance, each cycle, half way through a dispatch, after one
    assert cuts == {"listing", "advance", "cycle", "mid-dispatch", "dispatch"}
    assert _run(reference.args, data) == 0
    _same_run(read_log(data / "fumarole.db"), reference.rows, "after the crashes in the first cycles")


def test_a_crash_between_any_two_steps_of_the_last_cycles_changes_nothing(
    reference: Reference, tmp_path: Path
) -> None:
    data = tmp_path / "data"
    assert _run(reference.args, data, crash_after=reference.commits - 6) == CRASH_EXIT_STATUS
    _crash_one_commit_at_a_time(reference, data, until=lambda pos: False, limit=20)
    _same_run(read_log(data / "fumarole.db"), reference.rows, "after the crashes in the last cycles")
    # The run ends with an advance that moved nothing (only a pod no node holds is left) and
    # one last cycle; a restart after it appends nothing.
    last = _position(reference.rows)
    assert last.exhausted and last.step is Step.ADVANCE
    assert _run(reference.args, data) == 0
    assert len(read_log(data / "fumarole.db")) == len(reference.rows)


def test_crashes_at_random_commits_change_nothing(reference: Reference, tmp_path: Path) -> None:
    """Three crashes in one run, each restart crashing again after a seeded random number of commits."""
    rng = random.Random(SEED)
    data = tmp_path / "data"
    for n in (rng.randrange(1, reference.commits // 3) for _ in range(3)):
        assert _run(reference.args, data, crash_after=n) == CRASH_EXIT_STATUS
        _same_prefix(read_log(data / "fumarole.db"), reference.rows, f"after a crash {n} commits in")
    assert _run(reference.args, data) == 0
    _same_run(read_log(data / "fumarole.db"), reference.rows, "after three crashes")


def test_sigkill_at_random_moments_changes_nothing(reference: Reference, tmp_path: Path) -> None:
    """The real thing, no test hook: SIGKILL after a seeded random delay, restart, compare."""
    rng = random.Random(SEED)
    for i in range(2):
        data = tmp_path / f"data{i}"
        proc = subprocess.Popen(
            [FUMAROLE, "run", "--data-dir", str(data), *reference.args],
            stdout=subprocess.DEVNULL,
            stderr=subprocess.DEVNULL,
            env=env(),
        )
        db = data / "fumarole.db"
        while not db.exists() and proc.poll() is None:
            time.sleep(0.01)
        time.sleep(rng.uniform(0.0, 0.3))
        proc.send_signal(signal.SIGKILL)
        proc.wait(timeout=30)
        assert _run(reference.args, data) == 0
        _same_run(read_log(db), reference.rows, f"after SIGKILL #{i}")
