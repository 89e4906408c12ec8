"""The Lease elector and the stable identity against the fake API server (the real wire protocol).

A restarted replica (same data directory, same host) renews the Lease its previous life held on its
first read; a decision stamped before another replica led is superseded, one stamped in the epoch
this replica still leads in is acted on; two live processes never share an identity.
"""

from __future__ import annotations

import sys
from collections.abc import Iterator
from pathlib import Path

import anyio
import pytest

sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "k8s"))

from fake_apiserver import FakeApiServer
from kube_http import write_kubeconfig

from fumarole.daemon.adapters.kubernetes.client import KubeApi
from fumarole.daemon.adapters.kubernetes.identity import claim_identity
from fumarole.daemon.adapters.kubernetes.leader import LeaseElector


@pytest.fixture(scope="module")
def fake() -> Iterator[FakeApiServer]:
    with FakeApiServer() as server:
        yield server


class Clock:
    def __init__(self) -> None:
        self.now = 1000.0

    def __call__(self) -> float:
        return self.now


def test_the_identity_is_stable_per_data_dir_and_never_shared(tmp_path: Path) -> None:
    first = claim_identity(tmp_path / "d", host="pod-a")
    assert first.stable and first.identity.startswith("pod-a_")
    second = claim_identity(tmp_path / "d", host="pod-a")  # the same directory, the first still alive
    assert not second.stable and second.identity != first.identity
    first.release()
    again = claim_identity(tmp_path / "d", host="pod-a")  # the first one's process is gone
    assert again.stable and again.identity == first.identity
    again.release()
    assert claim_identity(tmp_path / "other", host="pod-a").identity != first.identity


def test_a_restart_renews_its_own_lease_and_keeps_its_decisions(fake: FakeApiServer, tmp_path: Path) -> None:
    kc = write_kubeconfig(tmp_path / "kubeconfig", fake.url, "admin")

    async def go() -> None:
        api = await KubeApi.connect(str(kc))
        clock = Clock()
        try:
            life1 = LeaseElector(api, name="own", namespace="default", identity="pod-a_1", clock=clock)
            await life1.step()
            assert life1.leading and await life1.wait_to_act(life1.epoch)
            lease = (await api.request("GET", life1.path))[1]["spec"]
            # kill -9: no release.  The next life, same identity, renews on its first read.
            life2 = LeaseElector(api, name="own", namespace="default", identity="pod-a_1", clock=clock)
            await life2.step()
            assert life2.leading and life2.epoch == 0
            assert await life2.wait_to_act(0)  # the previous life's decisions (epoch 0) go out
            after = (await api.request("GET", life1.path))[1]["spec"]
            assert after["leaseTransitions"] == lease["leaseTransitions"]
            assert after["acquireTime"] == lease["acquireTime"]
        finally:
            await api.close()

    anyio.run(go)


def test_a_decision_made_before_another_replica_led_is_superseded(
    fake: FakeApiServer, tmp_path: Path
) -> None:
    kc = write_kubeconfig(tmp_path / "kubeconfig", fake.url, "admin")

    async def go() -> None:
        api = await KubeApi.connect(str(kc))
        clock = Clock()
        try:
            a = LeaseElector(api, name="two", namespace="default", identity="a", clock=clock)
            b = LeaseElector(api, name="two", namespace="default", identity="b", clock=clock)
            await a.step()
            stamp = a.epoch  # a decision made now, while A leads
            await b.step()
            assert not b.leading and b.holder == "a"
            a._set(False, "a")  # A's renewals come late: it steps down, nobody else leads yet
            waiting: list[bool] = []

            async def wait() -> None:
                waiting.append(await a.wait_to_act(stamp))

            async with anyio.create_task_group() as tg:
                tg.start_soon(wait)
                await anyio.sleep(0.05)
                assert not waiting  # it waits for the lease, it does not fail
                await a.step()  # renews its own lease: same epoch
            assert waiting == [True]
            await b.step()  # B sees A's renewed record ...
            clock.now += 60  # ... which stays unrenewed for longer than a lease: B takes over
            await b.step()
            assert b.leading
            await a.step()  # A sees B: whatever A decided before is superseded
            assert not a.leading and a.holder == "b"
            assert not await a.wait_to_act(stamp)
            b._set(False, "b")  # B steps down; A takes the released-or-expired lease later ...
            clock.now += 60
            await a.step()
            assert a.leading and not await a.wait_to_act(stamp)  # ... still superseded: B led between
        finally:
            await api.close()

    anyio.run(go)
