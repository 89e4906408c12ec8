"""End to end: the real daemon (`fumarole run --serve`) queried over HTTP, and schemathesis against
/openapi.json of live servers on 127.0.0.1 (bounded examples): no server error, no schema violation."""

from __future__ import annotations

import asyncio
import json
import subprocess
import sys
import time
import urllib.error
import urllib.request
from pathlib import Path
from typing import Any

from fumarole_api_kit import child_env, start_serve, stop, wait_for_url, write_history

sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "e2e"))
from fumarole_e2e_kit import start_daemon, write_small_sim

TOKEN = "e2e-token"
SCHEMATHESIS = str(Path(sys.executable).parent / "schemathesis")


def _req(url: str, body: Any = None, token: str | None = None) -> tuple[int, Any]:
    headers = {"Content-Type": "application/json"}
    if token is not None:
        headers["Authorization"] = f"Bearer {token}"
    data = json.dumps(body).encode() if body is not None else None
    req = urllib.request.Request(url, data=data, headers=headers, method="POST" if data else "GET")
    try:
        with urllib.request.urlopen(req, timeout=15) as resp:
            raw = resp.read()
            return resp.status, json.loads(
                raw
            ) if resp.headers.get_content_type() == "application/json" else raw
    except urllib.error.HTTPError as e:
        return e.code, json.loads(e.read())


def _schemathesis(base: str, cwd: Path, *extra: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [
            SCHEMATHESIS,
            "run",
            f"{base}/openapi.json",
            "--checks",
            "not_a_server_error,response_schema_conformance,content_type_conformance",
            "--max-examples",
            "8",
            "--seed",
            "7",
            "--phases",
            "coverage,fuzzing",
            "--no-color",
            "--request-timeout",
            "20",
            *extra,
        ],
        capture_output=True,
        text=True,
        timeout=600,
        env=child_env(),
        cwd=str(cwd),
    )


def _wait_drained(proc: subprocess.Popen[str], timeout: float = 240) -> None:
    assert proc.stdout is not None
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        line = proc.stdout.readline()
        if "serving the API until SIGTERM" in line:
            return
        if not line and proc.poll() is not None:
            raise AssertionError(
                f"the daemon exited with {proc.returncode}: {proc.stderr.read() if proc.stderr else ''}"
            )
    raise AssertionError("the workload did not drain")


def test_live_daemon_answers_over_http_and_survives_schemathesis(tmp_path: Path) -> None:
    c, w = write_small_sim(tmp_path, jobs=8)
    data = tmp_path / "data"
    proc = start_daemon(
        "--data-dir",
        str(data),
        "--cluster",
        str(c),
        "--workload",
        str(w),
        "--listen",
        "127.0.0.1:0",
        "--serve",
        FUMAROLE_API_TOKEN=TOKEN,
    )
    try:
        base = wait_for_url(proc)
        _wait_drained(proc)
        status, ready = _req(f"{base}/readyz")
        assert status == 200 and ready["ready"] is True and ready["folded_seq"] == ready["last_seq"]
        status, cycles = _req(f"{base}/v1/cycles?limit=1000")
        assert status == 200 and cycles["items"] and cycles["items"][0]["cycle"] == 1
        assert all(cy["closed"] is not None for cy in cycles["items"])
        status, binds = _req(f"{base}/v1/decisions?type=decision.bind&limit=1000")
        assert status == 200 and binds["items"]
        first = binds["items"][0]["event"]
        status, by_job = _req(f"{base}/v1/decisions?job={first['job']}&type=decision.bind")
        assert {d["event"]["job"] for d in by_job["items"]} == {first["job"]}
        ns, name = first["job"].split("/")
        status, job = _req(f"{base}/v1/jobs/{ns}/{name}")
        assert status == 200 and job["queue"] == first["queue"]
        status, queues = _req(f"{base}/v1/queues")
        assert {"a", "b"} <= {q["name"] for q in queues["items"]}
        status, nodes = _req(f"{base}/v1/nodes")
        assert [n["name"] for n in nodes["items"]] == ["n0", "n1", "n2", "n3"]
        with urllib.request.urlopen(f"{base}/metrics", timeout=10) as resp:
            text = resp.read().decode()
        assert "volcano_e2e_scheduling_latency_milliseconds_count" in text
        # writes: token required, then idempotent
        node = {
            "idem_key": "e2e-node-9",
            "event": {
                "type": "node.upserted",
                "name": "n9",
                "manifest": {
                    "metadata": {"name": "n9"},
                    "status": {"allocatable": {"cpu": "4", "memory": "8Gi"}},
                },
            },
        }
        assert _req(f"{base}/v1/events", {"events": [node]})[0] == 401
        status, out = _req(f"{base}/v1/events", {"events": [node]}, token=TOKEN)
        assert status == 200 and out["written"] == 1
        status, again = _req(f"{base}/v1/events", {"events": [node]}, token=TOKEN)
        assert again == {"seqs": out["seqs"], "written": 0, "duplicates": 1}
        assert _req(f"{base}/v1/nodes/n9")[0] == 200
        # schemathesis, authenticated (POST /v1/events accepts what the schema allows)
        st = _schemathesis(base, tmp_path, "--header", f"Authorization: Bearer {TOKEN}")
        assert st.returncode == 0, st.stdout[-6000:] + st.stderr[-2000:]
        assert "passed" in st.stdout
        assert _req(f"{base}/healthz")[0] == 200  # still alive
    finally:
        assert stop(proc) == 0


def test_schemathesis_against_fumarole_serve(tmp_path: Path) -> None:
    db = tmp_path / "log.db"
    asyncio.run(write_history(str(db), cycles=2))
    proc, base = start_serve(db)
    try:
        st = _schemathesis(base, tmp_path)
        assert st.returncode == 0, st.stdout[-6000:] + st.stderr[-2000:]
    finally:
        assert stop(proc) == 0
