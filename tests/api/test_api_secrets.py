"""POST /v1/events: a pod a workload pushes is logged without its secrets (daemon/manifests/redaction.py),
as the adapters' pods are, and GET /v1/events serves it so."""

from __future__ import annotations

import asyncio
import json
from pathlib import Path
from typing import Any

from fumarole_api_kit import TOKEN, LiveFixture, write_history

from fumarole.api.app import build_app
from fumarole.store.events import PodUpserted

SECRET = "hunter2-s3cr3t"


def _pod() -> dict[str, Any]:
    return {
        "apiVersion": "v1",
        "kind": "Pod",
        "metadata": {"name": "pushed", "namespace": "default", "uid": "u-pushed"},
        "spec": {
            "schedulerName": "volcano",
            "containers": [
                {
                    "name": "c",
                    "image": "x",
                    "env": [{"name": "DB_PASSWORD", "value": SECRET}],
                    "args": [f"--password={SECRET}"],
                    "resources": {"requests": {"cpu": "1"}},
                }
            ],
        },
        "status": {"phase": "Pending"},
    }


async def test_a_pushed_pod_is_logged_and_served_without_its_secrets(
    tmp_path: Path, aiohttp_client: Any
) -> None:
    db = tmp_path / "log.db"
    await write_history(str(db), cycles=1)
    fx = await LiveFixture.open(str(db))
    try:
        client = await aiohttp_client(build_app(fx.view, token=TOKEN))
        event = {
            "type": "pod.upserted",
            "namespace": "default",
            "name": "pushed",
            "manifest": _pod(),
            "at_ms": 1,
        }
        r = await client.post(
            "/v1/events",
            json={"events": [{"idem_key": "push-1", "event": event}]},
            headers={"Authorization": f"Bearer {TOKEN}"},
        )
        assert r.status == 200, await r.text()
        (seq,) = (await r.json())["seqs"]
        (row,) = await fx.log.read(seq, 1)
        assert isinstance(row.event, PodUpserted)
        assert row.event.manifest["spec"]["containers"][0] == {
            "name": "c",
            "image": "x",
            "env": [{"name": "DB_PASSWORD"}],
            "resources": {"requests": {"cpu": "1"}},
        }
        page = await (await client.get(f"/v1/events?since={seq}")).json()
        assert page["items"][0]["event"]["manifest"]["spec"]["containers"][0]["env"] == [
            {"name": "DB_PASSWORD"}
        ]
        await client.close()
    finally:
        await fx.close()
    await asyncio.sleep(0)
    assert SECRET.encode() not in db.read_bytes()
    assert SECRET not in json.dumps(page)
