"""The Kubernetes adapter: a live cluster as source (list + watch) and sink (bind, evict, statuses).

`KubernetesCluster` is what the runtime talks to (daemon/runtime/live_loop.py): `connect()` loads
the credentials and checks the server (client.py); `resume(facts)` rebuilds what the log knows
after a restart; `list_all()` is a reconciled listing; `watch(submit)` runs the watches until
cancelled (source.py); `apply(seq, decision)` acts on a bind or an eviction and `report(seq,
event)` writes PodGroup and Queue statuses and pending pods' conditions (sink.py); with leader
election `run_election()` holds a Lease and `leading` / `may_act()` say whether this replica
decides (leader.py).  Which objects are kept and what is stripped before logging: objects.py.
"""

from __future__ import annotations

import logging
import os
import socket
import uuid
from collections.abc import Iterable
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from daemon.adapters.base import Submit
from daemon.adapters.kubernetes.client import (
    REQUIRED_PERMISSIONS,
    KubeApi,
    KubeSetupError,
    KubeTransientError,
    Permission,
)
from daemon.adapters.kubernetes.flow import AdaptiveLimit
from daemon.adapters.kubernetes.leader import LeaseElector
from daemon.adapters.kubernetes.sink import KubeSink
from daemon.adapters.kubernetes.source import KubeSource
from store.events import BindDecided, EvictDecided, ObservedEvent, OutcomeEvent
from store.events.base import EventBase

log = logging.getLogger("fumarole.kubernetes")

__all__ = ["KubeSetupError", "KubeTransientError", "KubernetesCluster", "LeaseSettings"]


def lease_permissions(namespace: str) -> tuple[Permission, ...]:
    return tuple(
        Permission(v, "coordination.k8s.io", "leases", namespace=namespace)
        for v in ("get", "create", "update")
    )


SA_NAMESPACE = Path("/var/run/secrets/kubernetes.io/serviceaccount/namespace")


@dataclass(frozen=True, slots=True)
class LeaseSettings:
    name: str = "fumarole"
    namespace: str = ""  # "" = the pod's namespace in a cluster, else "default"
    duration: float = 15.0
    identity: str = ""  # "" = hostname + a random suffix


def in_cluster_namespace() -> str:
    try:
        return SA_NAMESPACE.read_text().strip() or "default"
    except OSError:
        return "default"


def default_identity() -> str:
    return f"{os.environ.get('HOSTNAME') or socket.gethostname()}_{uuid.uuid4().hex[:8]}"


class KubernetesCluster:
    """A live cluster behind the Kubernetes API (see the package notes); a `LiveCluster`."""

    def __init__(
        self,
        *,
        kubeconfig: str,
        scheduler_names: Iterable[str],
        concurrency: int = 32,
        concurrency_max: int = 512,
        lease: LeaseSettings | None = None,
    ) -> None:
        self.kubeconfig = kubeconfig
        self.scheduler_names = tuple(scheduler_names)
        self.concurrency = concurrency
        self.concurrency_max = max(concurrency, concurrency_max)
        self.lease = lease
        self.elector: LeaseElector | None = None
        self._api: KubeApi | None = None
        self._source: KubeSource | None = None
        self._sink: KubeSink | None = None
        self._facts: list[EventBase] = []

    async def connect(self) -> None:
        """Credentials, then the server's start-up checks; KubeSetupError names what is wrong."""
        api = await KubeApi.connect(self.kubeconfig)
        lease_ns = (self.lease.namespace or in_cluster_namespace()) if self.lease else ""
        permissions = REQUIRED_PERMISSIONS + (lease_permissions(lease_ns) if self.lease else ())
        try:
            await api.preflight(permissions=permissions)
        except BaseException:
            await api.close()
            raise
        self._api = api
        if self.lease is not None:
            self.elector = LeaseElector(
                api,
                name=self.lease.name,
                namespace=lease_ns,
                identity=self.lease.identity or default_identity(),
                lease_duration=self.lease.duration,
                renew_deadline=self.lease.duration * 2 / 3,
                retry_period=max(0.2, self.lease.duration / 7.5),
            )
        self._source = KubeSource(api, self.scheduler_names)
        self._sink = KubeSink(
            api,
            scheduler_name=self.scheduler_names[0] if self.scheduler_names else "volcano",
            may_act=self.may_act,
            limit=AdaptiveLimit(
                initial=self.concurrency,
                minimum=min(4, self.concurrency),
                maximum=self.concurrency_max,
            ),
        )
        self._source.resume(self._facts)
        self._sink.observe(self._facts)
        self._facts = []

    @property
    def leading(self) -> bool:
        """Whether this replica may decide (always, without leader election)."""
        return self.elector is None or self.elector.leading

    @property
    def leader(self) -> str:
        """The current holder of the lease ("" without leader election or when nobody holds it)."""
        return self.elector.holder if self.elector is not None else ""

    def leadership(self) -> tuple[bool | None, str]:
        """(whether this replica leads, the lease holder), or (None, "") without leader election."""
        if self.elector is None:
            return None, ""
        return self.leading, self.leader

    async def may_act(self) -> bool:
        """Whether the sink may act now (waits a little for a late renewal; see leader.py)."""
        if self.elector is None:
            return True
        return await self.elector.wait_leading(self.elector.lease_duration)

    async def run_election(self) -> None:
        if self.elector is not None:
            await self.elector.run()

    async def close(self) -> None:
        if self._sink is not None:
            log.info("%s", self._sink.summary())
        if self._api is not None:
            await self._api.close()

    @property
    def source(self) -> KubeSource:
        assert self._source is not None, "connect() first"
        return self._source

    @property
    def sink(self) -> KubeSink:
        assert self._sink is not None, "connect() first"
        return self._sink

    def resume(self, facts: list[EventBase]) -> None:
        if self._source is None:
            self._facts = list(facts)
        else:
            self._source.resume(facts)
            self.sink.observe(facts)

    async def list_all(self) -> tuple[list[ObservedEvent], list[str | None]]:
        events, keys = await self.source.list_all()
        self.sink.observe(events)
        return events, keys

    async def watch(self, submit: Submit) -> None:
        async def observed(events: list[ObservedEvent], keys: list[str | None]) -> None:
            self.sink.observe(events)
            await submit(events, keys)

        await self.source.run(observed)

    def admit(self, seq: int, event: Any) -> None:
        self.sink.admit(seq, event)

    async def run(self) -> None:
        await self.sink.run()

    async def apply(
        self, seq: int, decision: BindDecided | EvictDecided
    ) -> tuple[OutcomeEvent, list[ObservedEvent]]:
        return await self.sink.apply(seq, decision)

    async def report(self, seq: int, event: Any) -> None:
        await self.sink.report(seq, event)
