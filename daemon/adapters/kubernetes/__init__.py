"""The Kubernetes adapter: a live cluster as source (list + watch) and sink (bind, evict, statuses).

`KubernetesCluster` is what the runtime talks to (daemon/runtime/live_loop.py): `connect()` loads
the credentials and checks the server (client.py); `resume(facts)` rebuilds what the log knows
after a restart; `list_all()` is a reconciled listing; `watch(submit)` runs the watches until
cancelled (source.py); `apply(seq, decision)` acts on a bind or an eviction and `report(seq,
event)` writes PodGroup and Queue statuses and pending pods' conditions (sink.py); with leader
election `run_election()` holds a Lease under this replica's stable identity (identity.py) and
`leading` says whether this replica decides (leader.py).

Before every bind or eviction the sink asks `may_act_on(seq)`: the live loop tells the adapter,
before each cycle, the first seq its decisions may take (`deciding(first_seq)`), so each decision
is stamped with the lease epoch it was made in (decisions of the previous life: epoch 0); the
call waits until this replica leads and is True when no other replica can have led since the
decision was made, else False (the sink records a superseded outcome and the pod is re-decided).
`may_act()` is the same wait for what has no seq (reports): stamped with the epoch at the call.
Which objects are kept and what is stripped before logging: objects.py.
"""

from __future__ import annotations

import logging
from bisect import bisect_right
from collections.abc import Iterable
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import anyio

from fumarole.daemon.adapters.base import Submit
from fumarole.daemon.adapters.kubernetes.client import (
    REQUIRED_PERMISSIONS,
    KubeApi,
    KubeSetupError,
    KubeTransientError,
    Permission,
    message_of,
)
from fumarole.daemon.adapters.kubernetes.flow import AdaptiveLimit
from fumarole.daemon.adapters.kubernetes.identity import ClaimedIdentity, claim_identity, random_identity
from fumarole.daemon.adapters.kubernetes.leader import LeaseElector
from fumarole.daemon.adapters.kubernetes.metrics import MetricsSettings, PrometheusSource
from fumarole.daemon.adapters.kubernetes.sink import KubeSink
from fumarole.daemon.adapters.kubernetes.source import KubeSource
from fumarole.store.events import BindDecided, EvictDecided, ObservedEvent, OutcomeEvent
from fumarole.store.events.base import EventBase

log = logging.getLogger("fumarole.kubernetes")

__all__ = ["KubeSetupError", "KubeTransientError", "KubernetesCluster", "LeaseSettings"]


def lease_permissions(namespace: str) -> tuple[Permission, ...]:
    return tuple(
        Permission(v, "coordination.k8s.io", "leases", namespace=namespace)
        for v in ("get", "create", "update")
    )


DEFAULT_QUEUE = "default"


async def create_root_and_default_queues(api: KubeApi) -> None:
    """The Queues `root` (not reclaimable) and `default` (reclaimable), weight 1, created when
    missing, as Volcano's scheduler does at start-up (pkg/scheduler/cache/cache.go
    newDefaultAndRootQueue: GET, then create; AlreadyExists is fine).  Volcano retries a failed
    create for a minute and then exits; here a failure is one warning line and the daemon goes on
    (the queues' status writes are then skipped, and pods naming them wait, as without Volcano)."""
    path = "/apis/scheduling.volcano.sh/v1beta1/queues"
    for name, reclaimable in (("root", False), (DEFAULT_QUEUE, True)):
        code, body = await api.request("GET", f"{path}/{name}", timeout=10)
        if code == 200:
            continue
        queue = {
            "apiVersion": "scheduling.volcano.sh/v1beta1",
            "kind": "Queue",
            "metadata": {"name": name},
            "spec": {"reclaimable": reclaimable, "weight": 1},
        }
        code, body = await api.request("POST", path, body=queue, timeout=10)
        if code in (200, 201):
            log.info("created Queue %s (as Volcano's scheduler does at start-up)", name)
        elif code != 409:
            log.warning("Queue %s: could not create it: %s %s", name, code, message_of(body))


SA_NAMESPACE = Path("/var/run/secrets/kubernetes.io/serviceaccount/namespace")


@dataclass(frozen=True, slots=True)
class LeaseSettings:
    name: str = "fumarole"
    namespace: str = ""  # "" = the pod's namespace in a cluster, else "default"
    duration: float = 15.0
    identity: str = ""  # "" = HOSTNAME + the id kept in identity_dir (identity.py)
    identity_dir: str = ""  # the data directory ("" = a random id, new at every start)


def in_cluster_namespace() -> str:
    try:
        return SA_NAMESPACE.read_text().strip() or "default"
    except OSError:
        return "default"


class KubernetesCluster:
    """A live cluster behind the Kubernetes API (see the package notes); a `LiveCluster`."""

    def __init__(
        self,
        *,
        kubeconfig: str,
        scheduler_names: Iterable[str],
        concurrency: int = 32,
        concurrency_max: int = 128,
        schedule_period: float = 1.0,
        lease: LeaseSettings | None = None,
        metrics: MetricsSettings | None = None,
    ) -> None:
        self.kubeconfig = kubeconfig
        # Node usage from Prometheus (metrics.py), polled beside the watches; None: not collected.
        self.metrics = metrics
        self.metrics_source: PrometheusSource | None = None
        self.scheduler_names = tuple(scheduler_names)
        self.concurrency = concurrency
        self.concurrency_max = max(concurrency, concurrency_max)
        self.schedule_period = schedule_period
        self.lease = lease
        self.elector: LeaseElector | None = None
        self._api: KubeApi | None = None
        self._source: KubeSource | None = None
        self._sink: KubeSink | None = None
        self._facts: list[EventBase] = []
        self._claimed: ClaimedIdentity | None = None
        # (first seq, lease epoch) of each run of cycles in one epoch, in seq order (see may_act_on)
        self._stamp_seqs: list[int] = []
        self._stamps: list[int] = []

    async def connect(self) -> None:
        """Credentials, then the server's start-up checks; KubeSetupError names what is wrong."""
        api = await KubeApi.connect(self.kubeconfig)
        lease_ns = (self.lease.namespace or in_cluster_namespace()) if self.lease else ""
        permissions = REQUIRED_PERMISSIONS + (lease_permissions(lease_ns) if self.lease else ())
        try:
            await api.preflight(permissions=permissions)
            await create_root_and_default_queues(api)
        except BaseException:
            with anyio.CancelScope(shield=True):  # also when a signal cancelled the wait
                await api.close()
            raise
        self._api = api
        if self.lease is not None:
            self.elector = LeaseElector(
                api,
                name=self.lease.name,
                namespace=lease_ns,
                identity=self.lease.identity or random_identity(),  # run_election() claims the stable one
                lease_duration=self.lease.duration,
                renew_deadline=self.lease.duration * 2 / 3,
                retry_period=max(0.2, self.lease.duration / 7.5),
            )
        self._source = KubeSource(api, self.scheduler_names)
        if self.metrics is not None:
            source = self._source
            self.metrics_source = PrometheusSource(
                self.metrics, lambda: (key[2] for key in source.known if key[0] == "Node")
            )
        self._sink = KubeSink(
            api,
            scheduler_name=self.scheduler_names[0] if self.scheduler_names else "volcano",
            may_act=self.may_act,
            limit=AdaptiveLimit(
                initial=self.concurrency,
                minimum=min(16, self.concurrency),
                maximum=self.concurrency_max,
            ),
            may_act_on=self.may_act_on,
            status_hold=1.5 * self.schedule_period,
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

    def deciding(self, first_seq: int) -> None:
        """The live loop is about to run a cycle whose decisions take seqs from `first_seq` on:
        stamp them with the lease epoch now (-1, never acted on, when this replica does not lead)."""
        if self.elector is None:
            return
        stamp = self.elector.epoch if self.elector.leading else -1
        if not self._stamps or self._stamps[-1] != stamp:
            self._stamp_seqs.append(first_seq)
            self._stamps.append(stamp)

    def epoch_of(self, seq: int) -> int:
        """The lease epoch the decision at `seq` was made in (0: before this process started)."""
        i = bisect_right(self._stamp_seqs, seq)
        return self._stamps[i - 1] if i else 0

    async def may_act_on(self, seq: int) -> bool:
        """Wait until this replica leads; True when the decision at `seq` may be acted on (no other
        replica can have led since it was made), False when it is superseded (leader.py)."""
        if self.elector is None:
            return True
        return await self.elector.wait_to_act(self.epoch_of(seq))

    async def may_act(self) -> bool:
        """Wait until this replica leads; False when another replica was seen leading meanwhile
        (for what carries no seq, such as status reports; decisions use `may_act_on`)."""
        if self.elector is None:
            return True
        return await self.elector.wait_to_act(self.elector.epoch)

    async def run_election(self) -> None:
        if self.elector is None or self.lease is None:
            return
        if not self.lease.identity and self.lease.identity_dir and self._claimed is None:
            self._claimed = claim_identity(self.lease.identity_dir)
            self.elector.identity = self._claimed.identity
        await self.elector.run()

    async def close(self) -> None:
        if self._sink is not None:
            log.info("%s", self._sink.summary())
        if self._api is not None:
            await self._api.close()
        if self._claimed is not None:
            self._claimed.release()
            self._claimed = None

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

        if self.metrics_source is None:
            await self.source.run(observed)
            return
        async with anyio.create_task_group() as tg:
            tg.start_soon(self.source.run, observed)
            tg.start_soon(self.metrics_source.run, submit)

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
