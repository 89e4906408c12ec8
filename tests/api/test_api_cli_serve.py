"""`fumarole explain` and `fumarole serve` (read-only, follows the log as another process appends)."""

from __future__ import annotations

import asyncio
import json
import subprocess
import time
import urllib.error
import urllib.request
from pathlib import Path
from typing import Any

import pytest
from fumarole_api_kit import FUMAROLE, child_env, history_fixture, start_serve, stop

from fumarole.store.events import NodeUpserted
from fumarole.store.sqlite import SqliteEventLog

history = history_fixture("api-cli", cycles=2)


def _explain(*args: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [FUMAROLE, "explain", *args], capture_output=True, text=True, timeout=120, env=child_env()
    )


def test_explain_prints_the_ranked_reasons(history: Path) -> None:
    r = _explain("--db", str(history), "team-a/bad-fit")
    assert r.returncode == 0, r.stderr
    out = r.stdout
    assert out.startswith("job team-a/bad-fit: queue research")
    assert "pending: " in out and "reasons (most important first):" in out
    assert "  1. [" in out and "0/6 nodes fit" in out
    assert "position in queue research: " in out
    assert "team-a/bad-fit-" in out  # the pods and their own reasons


def test_explain_json_is_the_api_job_detail(history: Path) -> None:
    r = _explain("--db", str(history), "team-a/bad-fit", "--format", "json")
    assert r.returncode == 0, r.stderr
    d = json.loads(r.stdout)
    assert d["name"] == "bad-fit" and d["pending"] is True
    assert d["explanation"]["reasons"][0]["rank"] == 0
    ok = json.loads(_explain("--db", str(history), "team-a/train", "--format", "json").stdout)
    assert ok["pending"] is False and ok["explanation"] is None


@pytest.mark.parametrize(
    ("args", "code", "msg"),
    [
        (["team-a/nope"], 1, "not known"),
        (["nonamespace"], 2, "expected <namespace>/<job>"),
        (["a/b/c"], 2, "expected <namespace>/<job>"),
    ],
)
def test_explain_unknown_and_bad_input(history: Path, args: list[str], code: int, msg: str) -> None:
    r = _explain("--db", str(history), *args)
    assert r.returncode == code and msg in r.stderr


def test_explain_missing_file_is_bad_input(tmp_path: Path) -> None:
    r = _explain("--db", str(tmp_path / "none.db"), "a/b")
    assert r.returncode == 2 and "no such file" in r.stderr


def _get(url: str) -> tuple[int, Any]:
    try:
        with urllib.request.urlopen(url, timeout=10) as resp:
            return resp.status, json.loads(resp.read())
    except urllib.error.HTTPError as e:
        return e.code, json.loads(e.read())


def test_serve_is_read_only_and_follows_the_log(history: Path, tmp_path: Path) -> None:
    db = tmp_path / "log.db"
    db.write_bytes(history.read_bytes())
    proc, base = start_serve(db)
    try:
        status, jobs = _get(f"{base}/v1/jobs")
        assert status == 200 and any(j["name"] == "bad-fit" for j in jobs["items"])
        status, ready = _get(f"{base}/readyz")
        assert status == 200 and ready["ready"] is True
        req = urllib.request.Request(
            f"{base}/v1/events",
            data=json.dumps({"events": []}).encode(),
            headers={"Content-Type": "application/json", "Authorization": "Bearer x"},
            method="POST",
        )
        with pytest.raises(urllib.error.HTTPError) as ei:
            urllib.request.urlopen(req, timeout=10)
        assert ei.value.code == 403 and "read-only" in json.loads(ei.value.read())["detail"]

        async def append() -> int:
            log = await SqliteEventLog.open(db)
            try:
                manifest = {
                    "metadata": {"name": "late"},
                    "status": {"allocatable": {"cpu": "2", "memory": "1Gi"}},
                }
                return (await log.append([NodeUpserted(name="late", manifest=manifest, at_ms=99_000)]))[0]
            finally:
                await log.close()

        seq = asyncio.run(append())
        deadline = time.monotonic() + 20
        while time.monotonic() < deadline:
            status, node = _get(f"{base}/v1/nodes/late")
            if status == 200:
                break
            time.sleep(0.2)
        assert status == 200 and node["allocatable"]["cpu"] == "2"
        assert _get(f"{base}/readyz")[1]["folded_seq"] == seq
    finally:
        assert stop(proc) == 0


def test_serve_refuses_remote_listen_without_allow_remote(history: Path) -> None:
    r = subprocess.run(
        [FUMAROLE, "serve", "--db", str(history), "--listen", "0.0.0.0:0"],
        capture_output=True,
        text=True,
        timeout=60,
        env=child_env(),
    )
    assert r.returncode == 2 and "beyond loopback" in r.stderr
