"""Leader election with a coordination.k8s.io/v1 Lease, as client-go's leaderelection does it.

Every `retry_period` the elector reads the Lease: absent, it creates it holding it; held by us, it
renews it (`renewTime`, an update carrying the resourceVersion it read, so two writers cannot
both win); held by another, it takes it over once the record has not changed for
`lease_duration` seconds *as observed locally* (the holder's clock is never compared with ours);
released (no holder), it takes it at once.  A leader that could not renew for `renew_deadline`
seconds steps down.  `leading` says whether this replica leads now; `holder` names the current
holder.  (client-go: tools/leaderelection/leaderelection.go, tryAcquireOrRenew and renew.)

The holder identity is stable per replica (identity.py): a restarted replica whose previous life
still holds the Lease renews it on its first read, without waiting out the lease duration.

`epoch` counts the times this replica saw the Lease out of its own hands (absent, released, held
or written first by another): whatever another replica did with it, it did at an epoch this
replica had not been leading in.  A decision is stamped with the epoch it was made in (the
KubernetesCluster keeps the stamps; decisions committed by the previous life carry epoch 0, the
first one of this life) and `wait_to_act(stamp)` waits until this replica leads, then says
whether it still leads in that epoch: a leader whose renewals came late steps down and renews
again in the same epoch (no one else led; its decisions go out), while after another replica led
the decision is superseded (the new leader's world re-decides the pod).
"""

from __future__ import annotations

import datetime as dt
import logging
import time
from collections.abc import Callable
from typing import Any

import anyio

from fumarole.daemon.adapters.kubernetes.client import KubeApi, KubeTransientError, message_of

log = logging.getLogger("fumarole.kubernetes.leader")


def _rfc3339_micro() -> str:
    return dt.datetime.now(dt.UTC).strftime("%Y-%m-%dT%H:%M:%S.%fZ")


class LeaseElector:
    def __init__(
        self,
        api: KubeApi,
        *,
        name: str,
        namespace: str,
        identity: str,
        lease_duration: float = 15.0,
        renew_deadline: float = 10.0,
        retry_period: float = 2.0,
        clock: Callable[[], float] = time.monotonic,
    ) -> None:
        self.api = api
        self.name = name
        self.namespace = namespace
        self.identity = identity
        self.lease_duration = lease_duration
        self.renew_deadline = renew_deadline
        self.retry_period = retry_period
        self.clock = clock
        self.leading = False
        self.holder = ""
        self.epoch = 0  # bumped whenever the lease is seen out of this replica's hands (see the notes)
        self.transitions = 0
        self._observed: tuple[Any, float] | None = None  # (record, when we saw it change)
        self._last_renew = 0.0
        self.changed = anyio.Event()

    @property
    def path(self) -> str:
        return f"/apis/coordination.k8s.io/v1/namespaces/{self.namespace}/leases/{self.name}"

    async def run(self) -> None:
        """Try to acquire or renew every `retry_period` until cancelled."""
        try:
            while True:
                try:
                    await self.step()
                except KubeTransientError as e:
                    log.warning("lease %s/%s: %s", self.namespace, self.name, e)
                if self.leading and self.clock() - self._last_renew > self.renew_deadline:
                    log.error(
                        "lease %s/%s: could not renew for %.0fs; stepping down",
                        self.namespace,
                        self.name,
                        self.renew_deadline,
                    )
                    self._set(False, "")
                await anyio.sleep(self.retry_period)
        finally:
            if self.leading:
                with anyio.CancelScope(shield=True), anyio.move_on_after(2):
                    await self.release()

    async def step(self) -> None:
        now = self.clock()
        code, lease = await self.api.request("GET", self.path, timeout=10)
        if code == 404:
            self._bump()  # nobody holds it now: whoever held it before is not us in this epoch
            body = self._lease_body(None, transitions=0)
            code, created = await self.api.request(
                "POST", f"/apis/coordination.k8s.io/v1/namespaces/{self.namespace}/leases", body=body
            )
            if code in (200, 201):
                self._won(created, now)
            elif code == 409:
                self._bump()  # another replica created it first
            return
        if code != 200:
            raise KubeTransientError(f"GET lease: {code} {message_of(lease)}")
        spec = lease.get("spec") or {}
        holder = spec.get("holderIdentity") or ""
        record = (holder, spec.get("renewTime"), spec.get("leaseDurationSeconds"))
        if self._observed is None or self._observed[0] != record:
            self._observed = (record, now)
        if holder == self.identity:
            await self._update(lease, spec, now, transitions=int(spec.get("leaseTransitions") or 0))
            return
        self._bump()  # released, or held by another replica
        duration = float(spec.get("leaseDurationSeconds") or self.lease_duration)
        if holder and now - self._observed[1] < duration:
            self._set(False, holder)
            return
        await self._update(lease, spec, now, transitions=int(spec.get("leaseTransitions") or 0) + 1)

    async def _update(
        self, lease: dict[str, Any], spec: dict[str, Any], now: float, *, transitions: int
    ) -> None:
        body = {**lease, "spec": self._lease_body(spec, transitions=transitions)["spec"]}
        code, updated = await self.api.request("PUT", self.path, body=body, timeout=10)
        if code == 200:
            self._won(updated, now)
        elif code == 409:
            self._bump()  # someone else wrote first; read again next time
            self._set(False, self.holder)

    def _lease_body(self, spec: dict[str, Any] | None, *, transitions: int) -> dict[str, Any]:
        now = _rfc3339_micro()
        keep = spec is not None and spec.get("holderIdentity") == self.identity
        return {
            "apiVersion": "coordination.k8s.io/v1",
            "kind": "Lease",
            "metadata": {"name": self.name, "namespace": self.namespace},
            "spec": {
                "holderIdentity": self.identity,
                "leaseDurationSeconds": round(self.lease_duration),
                "acquireTime": (spec or {}).get("acquireTime") if keep else now,
                "renewTime": now,
                "leaseTransitions": transitions,
            },
        }

    async def wait_to_act(self, stamp: int) -> bool:
        """Wait until this replica leads, or the epoch moved past `stamp`; True when it leads in
        epoch `stamp` (a decision made then may be acted on), False when another replica may have
        led since (the decision is superseded)."""
        while self.epoch == stamp and not self.leading:
            await self.changed.wait()
        return self.leading and self.epoch == stamp

    def _bump(self) -> None:
        self.epoch += 1
        self._notify()

    def _notify(self) -> None:
        prev, self.changed = self.changed, anyio.Event()
        prev.set()

    def _won(self, lease: Any, now: float) -> None:
        self._last_renew = now
        spec = (lease or {}).get("spec") or {}
        self.transitions = int(spec.get("leaseTransitions") or 0)
        record = (self.identity, spec.get("renewTime"), spec.get("leaseDurationSeconds"))
        self._observed = (record, now)
        self._set(True, self.identity)

    def _set(self, leading: bool, holder: str) -> None:
        if leading != self.leading:
            log.info(
                "lease %s/%s: %s",
                self.namespace,
                self.name,
                "acquired: this replica leads" if leading else f"standby (held by {holder or 'nobody'})",
            )
            self.leading = leading
            self._notify()
        self.holder = holder

    async def release(self) -> None:
        """Give the lease up on a clean stop (the next replica need not wait for it to expire)."""
        code, lease = await self.api.request("GET", self.path, timeout=5)
        if code != 200 or ((lease.get("spec") or {}).get("holderIdentity") != self.identity):
            return
        spec = dict(lease["spec"])
        spec.update({"holderIdentity": "", "leaseDurationSeconds": 1, "renewTime": _rfc3339_micro()})
        await self.api.request("PUT", self.path, body={**lease, "spec": spec}, timeout=5)
        self._set(False, "")
