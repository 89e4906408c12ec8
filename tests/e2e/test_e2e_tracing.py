"""Spans of the real daemon arrive at a local OTLP/HTTP receiver; decisions carry their cycle's trace id."""

from __future__ import annotations

import asyncio
import sys
from pathlib import Path

from aiohttp import web
from fumarole_e2e_kit import FUMAROLE, env, read_log, write_small_sim
from opentelemetry.proto.collector.trace.v1.trace_service_pb2 import ExportTraceServiceRequest

from fumarole.store.events import BindDecided, CycleOpened


async def _run(tmp_path: Path) -> tuple[int, str, list[tuple[str, str, dict[str, object]]]]:
    spans: list[tuple[str, str, dict[str, object]]] = []

    async def traces(request: web.Request) -> web.Response:
        req = ExportTraceServiceRequest()
        req.ParseFromString(await request.read())
        for rs in req.resource_spans:
            for ss in rs.scope_spans:
                for sp in ss.spans:
                    attrs: dict[str, object] = {}
                    for kv in sp.attributes:
                        v = kv.value
                        attrs[kv.key] = v.int_value if v.HasField("int_value") else v.string_value
                    spans.append((sp.name, sp.trace_id.hex(), attrs))
        return web.Response(status=200)

    app = web.Application()
    app.router.add_post("/v1/traces", traces)
    runner = web.AppRunner(app)
    await runner.setup()
    site = web.TCPSite(runner, "127.0.0.1", 0)
    await site.start()
    port = site._server.sockets[0].getsockname()[1]  # type: ignore[union-attr]
    c, w = write_small_sim(tmp_path, jobs=4)
    proc = await asyncio.create_subprocess_exec(
        FUMAROLE,
        "run",
        "--data-dir",
        str(tmp_path / "data"),
        "--cluster",
        str(c),
        "--workload",
        str(w),
        "--no-api",
        stdout=asyncio.subprocess.PIPE,
        stderr=asyncio.subprocess.PIPE,
        env=env(OTEL_EXPORTER_OTLP_ENDPOINT=f"http://127.0.0.1:{port}", OTEL_SERVICE_NAME="fumarole-test"),
    )
    out, err = await asyncio.wait_for(proc.communicate(), timeout=240)
    await runner.cleanup()
    sys.stderr.write(err.decode()[-2000:])
    assert proc.returncode is not None
    return proc.returncode, out.decode(), spans


def test_spans_reach_otlp_receiver(tmp_path: Path) -> None:
    rc, out, spans = asyncio.run(_run(tmp_path))
    assert rc == 0, out
    names = {name for name, _, _ in spans}
    assert {"cycle", "session", "action allocate", "action enqueue"} <= names, names
    assert any(n.startswith("plugin.open ") for n in names)
    cycles = [(tid, attrs) for name, tid, attrs in spans if name == "cycle"]
    assert cycles and all(
        "cycle.watermark" in a and "conf.hash" in a and "cycle.binds" in a for _, a in cycles
    )
    cycle_traces = {tid for tid, _ in cycles}
    rows = read_log(tmp_path / "data" / "fumarole.db")
    opened = [r.event for r in rows if isinstance(r.event, CycleOpened)]
    binds = [r.event for r in rows if isinstance(r.event, BindDecided)]
    assert opened and binds
    assert {o.trace_id for o in opened} <= cycle_traces
    assert all(b.trace_id in cycle_traces for b in binds)
    # The session span is a child of its cycle span: same trace.
    session_traces = {tid for name, tid, _ in spans if name == "session"}
    assert session_traces <= cycle_traces
