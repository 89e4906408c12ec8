"""Provisional Event recorder (replaced by the correlator branch): a bounded queue of core/v1 Events
written at the lowest priority, named deterministically when a dedup token is given."""

from __future__ import annotations

import collections
import datetime as dt
import hashlib
import logging
import time
from collections.abc import Awaitable, Callable
from dataclasses import dataclass
from typing import Any

import anyio

log = logging.getLogger("fumarole.kubernetes.events")

Send = Callable[[str, str, Any, str], Awaitable[tuple[int, Any]]]


@dataclass(frozen=True, slots=True)
class ObjectRef:
    kind: str
    namespace: str
    name: str
    uid: str
    api_version: str


class EventRecorder:
    def __init__(self, *, component: str, instance: str, queue_size: int = 1000) -> None:
        self.component = component
        self.instance = instance
        self.queue: collections.deque[dict[str, Any]] = collections.deque()
        self.queue_size = queue_size
        self.dropped = 0
        self.created = 0
        self._wake = anyio.Event()

    def record(self, obj: ObjectRef, type_: str, reason: str, message: str, *, dedup_token: str = "") -> None:
        if len(self.queue) >= self.queue_size:
            self.dropped += 1
            return
        now = dt.datetime.now(dt.UTC).strftime("%Y-%m-%dT%H:%M:%SZ")
        suffix = (
            hashlib.sha256(f"{obj.uid}/{reason}/{dedup_token}".encode()).hexdigest()[:16]
            if dedup_token
            else f"{time.time_ns():x}"
        )
        self.queue.append(
            {
                "apiVersion": "v1",
                "kind": "Event",
                "metadata": {"name": f"{obj.name}.{suffix}", "namespace": obj.namespace},
                "involvedObject": {
                    "kind": obj.kind,
                    "namespace": obj.namespace,
                    "name": obj.name,
                    "uid": obj.uid,
                    "apiVersion": obj.api_version,
                },
                "reason": reason,
                "message": message,
                "source": {"component": self.component},
                "firstTimestamp": now,
                "lastTimestamp": now,
                "count": 1,
                "type": type_,
                "reportingComponent": self.component,
                "reportingInstance": self.instance,
            }
        )
        self._wake.set()

    async def run(self, send: Send) -> None:
        async with anyio.create_task_group() as tg:
            while True:
                while not self.queue:
                    self._wake = anyio.Event()
                    await self._wake.wait()
                event = self.queue.popleft()
                tg.start_soon(self._one, send, event)
                await anyio.sleep(0)

    async def _one(self, send: Send, event: dict[str, Any]) -> None:
        ns = event["metadata"]["namespace"]
        code, _ = await send("POST", f"/api/v1/namespaces/{ns}/events", event, "application/json")
        if code in (200, 201, 409):
            self.created += 1
