"""How long a leader cut off from its PostgreSQL log past its lease takes to step down and stand
by, and to lead again: prints JSON (seconds, min/median/max over --runs).

A throwaway server (initdb + pg_ctl, as the tests start it); per run a new log, a leader A that
reaches it through a TCP proxy (tests/store/fumarole_pg_proxy.py) with its REST API, and a
standby B connected directly (`fumarole run --db …`, the bundled simulation, `lease_duration`
--lease).  Mid-run the proxy is cut; once B has taken over (and --extra seconds more) it is
restored.  Then:

- takeover: the cut → B's first event (epoch 2);
- step_down: the proxy restored → A's `/readyz` answers as a standby naming B (A stepped down,
  its read-only API follows the log);
- re_lead: B killed (SIGKILL) → A's first event of epoch 3 (a takeover from the log).

Usage: python bench/pg_stepdown.py [--runs 3] [--lease 1] [--extra 0.5]
"""

from __future__ import annotations

import argparse
import json
import signal
import socket
import subprocess
import sys
import time
import urllib.request
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT / "bench"))
sys.path.insert(0, str(ROOT / "tests" / "store"))
from fumarole_pg_proxy import CuttableProxy  # noqa: E402
from fumarole_pg_server import PgServer, fresh_dsn  # noqa: E402
from pg_outage import FUMAROLE, _env, head, local_server, spread, wait_past  # noqa: E402


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


def _standby_naming(port: int, pid: int) -> bool:
    try:
        with urllib.request.urlopen(f"http://127.0.0.1:{port}/readyz", timeout=1) as r:
            body = json.load(r)
    except (OSError, ValueError):
        return False
    return body.get("leading") is False and body.get("leader", "").split("/")[1:2] == [str(pid)]


def _until(check: object, timeout: float = 60) -> float:
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        if check():  # type: ignore[operator]
            return time.monotonic()
        time.sleep(0.005)
    raise RuntimeError("timed out")


def one_run(server: PgServer, lease: float, extra: float) -> dict[str, float]:
    dsn = fresh_dsn(server)
    subprocess.run([FUMAROLE, "migrate", "--db", dsn], check=True, capture_output=True, env=_env(lease))
    proxy = CuttableProxy(server.port)
    port = _free_port()
    a = subprocess.Popen(
        [FUMAROLE, "run", "--db", proxy.dsn_through(dsn), "--listen", f"127.0.0.1:{port}", "--serve"],
        stdout=subprocess.DEVNULL,
        stderr=subprocess.DEVNULL,
        env=_env(lease),
    )
    wait_past(dsn, 0)  # A leads (epoch 1) before B starts
    b = subprocess.Popen(
        [FUMAROLE, "run", "--db", dsn, "--no-api"],
        stdout=subprocess.DEVNULL,
        stderr=subprocess.DEVNULL,
        env=_env(lease),
    )
    try:
        wait_past(dsn, 1000)
        time.sleep(0.5)  # B is up and following
        h = head(dsn)
        assert h is not None
        t_cut = time.monotonic()
        proxy.cut()
        took = wait_past(dsn, h[0], epoch=2)
        time.sleep(extra)
        t_back = time.monotonic()
        proxy.restore()
        standing_by = _until(lambda: _standby_naming(port, b.pid))
        h = head(dsn)
        assert h is not None
        t_kill = time.monotonic()
        b.send_signal(signal.SIGKILL)
        b.wait()
        led = wait_past(dsn, h[0], epoch=3)
        return {"takeover": took - t_cut, "step_down": standing_by - t_back, "re_lead": led - t_kill}
    finally:
        for p in (a, b):
            p.kill()
            p.wait()
        proxy.close()


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--runs", type=int, default=3)
    ap.add_argument("--lease", type=float, default=1.0)
    ap.add_argument("--extra", type=float, default=0.5)
    args = ap.parse_args()
    server = local_server()
    out: dict[str, object] = {"lease_s": args.lease, "extra_s": args.extra, "runs": args.runs}
    try:
        runs = [one_run(server, args.lease, args.extra) for _ in range(args.runs)]
    finally:
        server.stop()
    for key in ("takeover", "step_down", "re_lead"):
        out[key] = spread([r[key] for r in runs])
    print(json.dumps(out, indent=2))


if __name__ == "__main__":
    main()
