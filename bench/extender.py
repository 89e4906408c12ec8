"""Benchmark of the extender plugin's cost in one session; prints one JSON object.

`--nodes` nodes (32 cpu, 128Gi) and `--jobs` jobs of `--tasks` 1-cpu pods, scheduled in one
session (priority, gang, predicates, nodeorder) without the extender, with it calling a real
aiohttp extender on 127.0.0.1 (predicate and prioritize verbs; the extender refuses every
fifth node and scores by node index), and replayed from the recorded answers (the extender
stopped). Reported per variant: the session's seconds, binds, and for the extender the number
of calls, the calls per second and the recorded answer bytes (what cycle.callouts holds).

Usage: python bench/extender.py [--nodes 50] [--jobs 10] [--tasks 4]
"""

from __future__ import annotations

import argparse
import asyncio
import json
import sys
import threading
import time
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))
sys.path.insert(0, str(Path(__file__).resolve().parent))

from aiohttp import web
from usage import objects

from fumarole.daemon.callouts_http import HttpCalloutPort
from fumarole.daemon.manifests import build_snapshot
from fumarole.daemon.scheduler.framework.callout import RecordingPort, ReplayPort
from fumarole.daemon.scheduler.framework.conf_check import parse_scheduler_conf
from fumarole.daemon.scheduler.framework.run import run_session

CONF = """
actions: "enqueue, allocate"
tiers:
- plugins:
  - name: priority
  - name: gang
- plugins:
  - name: predicates
  - name: nodeorder
"""
EXTENDER = """  - name: extender
    arguments:
      extender.urlPrefix: {url}
      extender.predicateVerb: filter
      extender.prioritizeVerb: score
"""


async def _handle(request: web.Request) -> web.Response:
    body = await request.json()
    if request.match_info["verb"] == "filter":
        index = int(body["node"]["Name"][1:])
        return web.json_response({"status": "refused"} if index % 5 == 0 else {})
    return web.json_response({"nodeScore": {n["Name"]: float(int(n["Name"][1:]) % 7) for n in body["nodes"]}})


def serve() -> tuple[str, asyncio.AbstractEventLoop, threading.Thread]:
    loop = asyncio.new_event_loop()
    ready = threading.Event()
    port: list[int] = []

    def run() -> None:
        asyncio.set_event_loop(loop)
        app = web.Application()
        app.router.add_post("/{verb}", _handle)
        runner = web.AppRunner(app)
        loop.run_until_complete(runner.setup())
        site = web.TCPSite(runner, "127.0.0.1", 0)
        loop.run_until_complete(site.start())
        port.append(site._server.sockets[0].getsockname()[1])  # type: ignore[union-attr]
        ready.set()
        loop.run_forever()
        loop.run_until_complete(runner.cleanup())

    t = threading.Thread(target=run, daemon=True)
    t.start()
    ready.wait(30)
    return f"http://127.0.0.1:{port[0]}", loop, t


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--nodes", type=int, default=50)
    ap.add_argument("--jobs", type=int, default=10)
    ap.add_argument("--tasks", type=int, default=4)
    a = ap.parse_args()
    objs = objects(a.nodes, a.jobs, a.tasks)
    url, loop, thread = serve()
    result: dict[str, Any] = {"nodes": a.nodes, "tasks": a.jobs * a.tasks}

    def session(conf_text: str, port: Any) -> tuple[float, Any]:
        snap = build_snapshot([("bench", i, o) for i, o in enumerate(objs)])
        snap.now = 1000.0
        conf = parse_scheduler_conf(conf_text, "bench")
        t0 = time.perf_counter()
        res = run_session(snap, conf, callouts=port)
        return time.perf_counter() - t0, res

    secs, res = session(CONF, None)
    result["without"] = {"seconds": round(secs, 4), "binds": len(res.binds)}
    recording = RecordingPort(HttpCalloutPort())
    with_text = CONF + EXTENDER.format(url=url)
    secs, live = session(with_text, recording)
    calls = len(recording.records)
    result["live"] = {
        "seconds": round(secs, 4),
        "binds": len(live.binds),
        "calls": calls,
        "calls_per_s": round(calls / secs, 1) if secs else 0.0,
        "recorded_bytes": sum(len(r.answer.body) + len(r.url) + 64 for r in recording.records),
    }
    loop.call_soon_threadsafe(loop.stop)
    thread.join(30)
    secs, again = session(with_text, ReplayPort(recording.records, cycle=1))
    result["replay"] = {
        "seconds": round(secs, 4),
        "binds": len(again.binds),
        "identical": again.binds == live.binds and again.pending == live.pending,
    }
    print(json.dumps(result))


if __name__ == "__main__":
    main()
