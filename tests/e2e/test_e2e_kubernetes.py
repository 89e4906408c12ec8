"""`fumarole run --adapter kubernetes` against an API server: the fake here, a real one with KUBE_APISERVER.

The daemon runs as a subprocess with a kubeconfig; the test creates Nodes, Queues, PriorityClasses,
PodGroups and Pods through the API, plays the kubelet (a bound pod becomes Running, later
Succeeded) and checks what the API holds: binds equal to `fumarole schedule --now manifests` over
the same objects, PodGroup phases and pending pods' `PodScheduled` messages, no pod bound twice
across a kill -9 and a restart (and `fumarole replay` identical), a watch broken by a compaction
recovering with a relist and no duplicate events, and the start-up checks (bad kubeconfig,
missing permission, missing CRDs) exiting 2 with the cause named.

With KUBE_APISERVER=/path/to/kube-apiserver (and etcd on the PATH or ETCD_BIN), a session
fixture starts ../shared/k8s/start.sh and the same tests run against it; the ones that need to
control the server (compaction, a server without CRDs) are fake-only.
"""

from __future__ import annotations

import contextlib
import json
import signal
import socket
import subprocess
import sys
import threading
import time
import urllib.error
import urllib.request
import uuid
from collections import Counter
from collections.abc import Iterator
from collections.abc import Set as AbstractSet
from pathlib import Path
from typing import Any

import pytest
import yaml
from fumarole_e2e_kit import FUMAROLE, env, offline_binds, read_log

sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "k8s"))

from cluster_kit import (
    ApiServer,
    Workload,
    api_server,
    as_manifests,
    wait_for,
)
from fake_apiserver import ALL, FakeApiServer
from kube_http import Kube, KubeError, write_kubeconfig

from fumarole.daemon.scheduler.model.quantity import milli_value, whole_value
from fumarole.daemon.scheduler.model.resources import Resource, resource_list
from fumarole.store.events import (
    BindDecided,
    BindFailed,
    BindSucceeded,
    CycleClosed,
    CycleOpened,
    EvictDecided,
    EvictFailed,
    EvictSucceeded,
    JobExplained,
    PodDeleted,
    PodGroupStatusChanged,
    PodUpserted,
)

Api = ApiServer


@pytest.fixture(scope="session")
def api(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Api]:
    reader = {(v, "/pods") for v in ("list", "watch")}
    with api_server(
        tmp_path_factory.mktemp("k8s"), tokens={"admin": ALL, "reader": reader}, bookmark_interval=0.5
    ) as server:
        yield server


@pytest.fixture
def ns() -> str:
    return "t" + uuid.uuid4().hex[:8]


class Kubelet:
    """Plays the kubelet in a thread: bound pods become Running; optionally Succeeded after `runtime` s;
    pods being deleted (an eviction's grace period) are finished at once."""

    def __init__(self, kube: Kube, ns: str, *, runtime: float | None = None) -> None:
        self.kube, self.ns, self.runtime = kube, ns, runtime
        self.started: dict[str, float] = {}
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._run, daemon=True)

    def __enter__(self) -> Kubelet:
        self._thread.start()
        return self

    def __exit__(self, *exc: Any) -> None:
        self._stop.set()
        self._thread.join(10)

    def _run(self) -> None:
        while not self._stop.wait(0.2):
            with contextlib.suppress(KubeError):
                self.step()

    def step(self) -> None:
        for p in self.kube.list("Pod", self.ns):
            name, phase = p["metadata"]["name"], p["status"].get("phase")
            if p["metadata"].get("deletionTimestamp"):
                self.kube.delete("Pod", name, self.ns, grace=0)
            elif p["spec"].get("nodeName") and phase == "Pending":
                self.kube.run_pod(name, self.ns)
                self.started[name] = time.monotonic()
            elif phase == "Running" and self.runtime is not None and self._done(name):
                self.kube.finish_pod(name, self.ns)

    def _done(self, name: str) -> bool:
        assert self.runtime is not None
        return time.monotonic() - self.started.setdefault(name, time.monotonic()) >= self.runtime


LEASE_S = 3  # a short lease, so that a restart after kill -9 takes over soon
_STARTED: list[subprocess.Popen[str]] = []


@pytest.fixture(autouse=True)
def _no_daemon_left_behind() -> Iterator[None]:
    """A failing test must not leave its daemons running."""
    yield
    while _STARTED:
        proc = _STARTED.pop()
        if proc.poll() is None:
            proc.kill()
            proc.communicate(timeout=30)


def start_daemon(
    api: Api,
    tmp: Path,
    *extra: str,
    token: str | None = None,
    data: str = "data",
    lease: str = "",
    lease_ns: str = "default",
    lease_s: float = LEASE_S,
    **extra_env: str,
) -> subprocess.Popen[str]:
    """The daemon with its own data directory; its lease is named after the test (or `lease`)."""
    kc = write_kubeconfig(tmp / "kubeconfig", api.url, token or api.token)
    proc = subprocess.Popen(
        [
            FUMAROLE,
            "run",
            "--adapter",
            "kubernetes",
            "--kubeconfig",
            str(kc),
            "--data-dir",
            str(tmp / data),
            "--listen",
            "127.0.0.1:0",
            "--schedule-period",
            "0.3",
            *extra,
        ],
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
        env=env(
            FUMAROLE_LEASE_NAME=lease or "fumarole-" + tmp.name.lower().replace("_", "-")[-40:].strip("-"),
            FUMAROLE_LEASE_DURATION=str(lease_s),
            FUMAROLE_LEASE_NAMESPACE=lease_ns,
            **extra_env,
        ),
    )
    _STARTED.append(proc)
    return proc


def stop(proc: subprocess.Popen[str]) -> tuple[str, str]:
    if proc.poll() is None:
        proc.send_signal(signal.SIGTERM)
    out, err = proc.communicate(timeout=60)
    return out, err


def bound(kube: Kube, ns: str) -> dict[str, str]:
    return {
        p["metadata"]["name"]: p["spec"]["nodeName"]
        for p in kube.list("Pod", ns)
        if p["spec"].get("nodeName")
    }


def scheduled_events(kube: Kube, ns: str) -> Counter[str]:
    return Counter(
        e["involvedObject"]["name"] for e in kube.list("Event", ns) if e.get("reason") == "Scheduled"
    )


# ------------------------------------------------------------------------------------------- tests
def test_binds_statuses_and_reasons_match_the_offline_schedule(api: Api, ns: str, tmp_path: Path) -> None:
    kube = api.kube()
    w = Workload(ns, gangs=8)
    w.create_cluster(kube)
    w.create_jobs(kube)
    try:
        dump = tmp_path / "objects.yaml"
        dump.write_text(yaml.safe_dump_all(as_manifests(kube, w), sort_keys=False))
        expected = offline_binds(dump)
        assert expected and len(expected) < len(w.pods())  # some bound, some left pending

        proc = start_daemon(api, tmp_path)
        try:
            wait_for(
                "the first cycle's binds in the API", lambda: expected.items() <= bound(kube, ns).items()
            )
            wait_for(
                "PodGroup phases in the API",
                lambda: all((pg.get("status") or {}).get("phase") for pg in kube.list("PodGroup", ns)),
            )
            wait_for(
                "PodScheduled=False on the pending pods",
                lambda: all(
                    _unschedulable(p) for p in kube.list("Pod", ns) if p["metadata"]["name"] not in expected
                ),
            )
            # The heavier queue reclaims from the lighter one: evictions go through the API.
            wait_for("an eviction (reclaim) through the API", lambda: _evicted(kube, ns))
            # Queue status.allocated as Volcano's session close writes it: the bound pods not
            # being deleted and the tasks the last session left Allocated, in ConvertRes2ResList's
            # form; root the sum, the idle default zeros.
            db = tmp_path / "data" / "fumarole.db"
            wait_for(
                "Volcano's allocated figures on the Queues",
                lambda: (
                    _queue_allocated(kube, [q for q, _w in w.queues] + ["root", "default"])
                    == volcanos_allocated(kube, w, left_allocated(read_log(db)))
                ),
            )
        finally:
            _out, err = stop(proc)
        assert proc.returncode == 0, err
        assert_root_and_default_queues(kube)
        for p in _evicted(kube, ns):  # Volcano's evictor: conditions, then a graceful delete
            conds = {c["type"]: c for c in p["status"]["conditions"]}
            assert conds["DisruptionTarget"]["reason"] == "PreemptionByScheduler"
            assert conds["Ready"]["reason"] == "Evict" and conds["Ready"]["status"] == "False"
            assert p["metadata"]["deletionTimestamp"]  # the kubelet (none here) would finish it
        evict_events = [e for e in kube.list("Event", ns) if e["reason"] == "Evict"]
        assert evict_events and all(
            e["message"].startswith("Pod is evicted, because of") for e in evict_events
        )

        events = read_log(tmp_path / "data" / "fumarole.db")
        first = next(e.event.cycle for e in events if isinstance(e.event, CycleOpened))
        decided = {e.event.name: e.event.node for e in events if isinstance(e.event, BindDecided)}
        first_binds = {
            e.event.name: e.event.node
            for e in events
            if isinstance(e.event, BindDecided) and e.event.cycle == first
        }
        assert first_binds == expected  # the daemon's first cycle = the offline session
        api_bound = bound(kube, ns)
        assert {k: api_bound[k] for k in decided} == decided  # what the API holds = what was decided
        assert set(api_bound) == set(decided)
        groups = {pg["metadata"]["name"]: pg["status"] for pg in kube.list("PodGroup", ns)}
        full = {g for g, _q, n, _c, _pc in w.groups if all(f"{g}-{j}" in api_bound for j in range(n))}
        assert full and all(groups[g]["phase"] in ("Running", "Inqueue") for g in full)
        assert any(c["type"] == "Scheduled" for g in full for c in groups[g].get("conditions", []))
        waiting = [p for p in kube.list("Pod", ns) if p["metadata"]["name"] not in api_bound]
        assert waiting and all(_unschedulable(p)["message"] for p in waiting)
        assert scheduled_events(kube, ns) == Counter({name: 1 for name in decided})
        failed = Counter(
            e["involvedObject"]["name"] for e in kube.list("Event", ns) if e["reason"] == "FailedScheduling"
        )
        assert {p["metadata"]["name"] for p in waiting} <= set(failed)
        # After the stop the Queues hold what the last session decided: its figures were written
        # before the daemon left.
        written = _queue_allocated(kube, [q for q, _w in w.queues] + ["root", "default"])
        assert written == volcanos_allocated(kube, w, left_allocated(events)), str(tmp_path)
        assert written["default"] == {"cpu": "0", "memory": "0"} and written["root"]["cpu"] != "0"
        replay = subprocess.run(
            [FUMAROLE, "replay", "--db", str(tmp_path / "data" / "fumarole.db")],
            capture_output=True,
            text=True,
        )
        assert replay.returncode == 0, replay.stdout + replay.stderr
    finally:
        w.cleanup(kube)


def assert_root_and_default_queues(kube: Kube) -> None:
    """The `root` and `default` Queues exist as Volcano's scheduler creates them at start-up (cache.go
    newDefaultAndRootQueue: weight 1, root not reclaimable): only the daemon creates them here."""
    for name, reclaimable in (("root", False), ("default", True)):
        spec = kube.get("Queue", name)["spec"]
        assert (spec["weight"], spec["reclaimable"]) == (1, reclaimable), (name, spec)


def _queue_allocated(kube: Kube, names: list[str]) -> dict[str, Any]:
    queues = {q["metadata"]["name"]: q.get("status") or {} for q in kube.list("Queue")}
    return {n: (queues.get(n) or {}).get("allocated") for n in names}


def left_allocated(rows: list[Any]) -> set[str]:
    """The pods the last closed session left Allocated without binding them: a gang that is not
    ready but pipelined is neither committed nor discarded by Volcano's allocate (allocate.go:
    `if ssn.JobReady(job) { stmt.Commit() } else if !ssn.JobPipelined(job) { stmt.Discard() }`), so
    its allocated tasks keep the Allocated status until the session closes, and updateQueueStatus
    counts them.  The daemon's explanation says so of each such pod ("can be placed on N once
    minAvailable is satisfied")."""
    closed = [r.event.cycle for r in rows if isinstance(r.event, CycleClosed)]
    if not closed:
        return set()
    last = closed[-1]
    return {
        pod.split("/", 1)[1]
        for r in rows
        if isinstance(r.event, JobExplained) and r.event.cycle == last
        for pod, message in r.event.pods.items()
        if message.startswith("can be placed on ")
    }


def volcanos_allocated(
    kube: Kube, w: Workload, allocated: AbstractSet[str] = frozenset()
) -> dict[str, dict[str, str]]:
    """What Volcano's updateQueueStatus writes for the API's pods: per queue the requests of the
    pods bound and neither deleting (Releasing) nor finished, and of the pods named in `allocated`
    (left Allocated by the last session, see `left_allocated`), rolled up to root; every queue."""
    queue_of = {g: q for g, q, _n, _c, _pc in w.groups}
    totals = {q: Resource() for q, _w in w.queues} | {"root": Resource(), "default": Resource()}
    for p in kube.list("Pod", w.ns):
        meta, spec, status = p["metadata"], p["spec"], p.get("status") or {}
        bound = spec.get("nodeName") and not meta.get("deletionTimestamp")
        if not bound and meta["name"] not in allocated:
            continue
        if status.get("phase") in ("Succeeded", "Failed"):
            continue
        req = spec["containers"][0]["resources"]["requests"]
        r = Resource(milli_value(req["cpu"]), whole_value(req["memory"]), {"pods": 1})
        totals[queue_of[meta["annotations"]["scheduling.k8s.io/group-name"]]].add(r)
        totals["root"].add(r)
    return {name: resource_list(r) for name, r in totals.items()}


def test_statuses_trail_the_binds_decided_before_them(api: Api, ns: str, tmp_path: Path) -> None:
    """Binds slower than a cycle (the fake holds each for 1.5 s): a PodGroup's status is written
    only after every bind decided before it was answered (tests/adapters/test_kube_sink.py covers
    the coalescing of statuses that wait)."""
    if api.fake is None:
        pytest.skip("reads the order in which the fake answered")
    fake, kube = api.fake, api.kube()
    w = Workload(ns, gangs=12, nodes=8, node_cpu=16, evictions=False)  # room for every pod
    w.create_cluster(kube)
    w.create_jobs(kube)  # a backlog: the first cycle decides every bind
    first_request = len(fake.requests)
    fake.binding_delay = 1.5
    try:
        _trail_binds(api, kube, w, tmp_path, first_request)
    finally:
        fake.binding_delay = 0.0
        w.cleanup(kube)


def _trail_binds(api: Api, kube: Kube, w: Workload, tmp_path: Path, first_request: int) -> None:
    ns, fake = w.ns, api.fake
    assert fake is not None
    proc = start_daemon(api, tmp_path)
    try:
        wait_for("every pod bound", lambda: len(bound(kube, ns)) == len(w.pods()))
        wait_for(
            "every PodGroup Running in the API",
            lambda: all(
                (pg.get("status") or {}).get("phase") == "Running" for pg in kube.list("PodGroup", ns)
            ),
        )
    finally:
        _out, err = stop(proc)
    assert proc.returncode == 0, err
    fake.binding_delay = 0.0
    answered = [(m, path.split("?")[0]) for m, path, _code in fake.requests[first_request:]]
    rows = read_log(tmp_path / "data" / "fumarole.db")
    bind_seq = {r.event.name: r.seq for r in rows if isinstance(r.event, BindDecided)}
    statuses: dict[str, list[int]] = {}
    for r in rows:
        if isinstance(r.event, PodGroupStatusChanged) and r.event.namespace == ns:
            statuses.setdefault(r.event.name, []).append(r.seq)
    bound_at = {
        path.split("/")[-2]: i
        for i, (m, path) in enumerate(answered)
        if m == "POST" and path.startswith(f"/api/v1/namespaces/{ns}/pods/") and path.endswith("/binding")
    }
    patches: dict[str, list[int]] = {}
    for i, (m, path) in enumerate(answered):
        if m == "PATCH" and f"/namespaces/{ns}/podgroups/" in path:
            patches.setdefault(path.rsplit("/", 1)[1], []).append(i)
    assert set(patches) == set(statuses)
    for group, at in patches.items():
        before = [pod for pod, seq in bind_seq.items() if seq < statuses[group][0]]
        assert before and all(bound_at[pod] < at[0] for pod in before), group


def _assert_gangs_whole_and_nodes_fit(db: Path, w: Workload) -> None:
    """Cycle by cycle, as the log says: a gang's binds come all in one cycle (whole), and no node
    ever holds more than its cpu (pods bound and not yet finished or deleted)."""
    size = {g: n for g, _q, n, _c, _pc in w.groups}
    cpu = {f"{g}-{j}": c for g, _q, n, c, _pc in w.groups for j in range(n)}
    capacity = dict(w.nodes)
    on: dict[str, str] = {}  # pod -> node, while it holds resources
    per_cycle: dict[tuple[int, str], int] = Counter()
    for row in read_log(db):
        e = row.event
        if isinstance(e, BindDecided) and e.name in cpu:
            per_cycle[(e.cycle, e.name.rsplit("-", 1)[0])] += 1
            on[e.name] = e.node
            used = sum(cpu[p] for p, n in on.items() if n == e.node)
            assert used <= capacity.get(e.node, 0) or e.node not in capacity, (e.node, used)
            # (a node another test left behind is not this workload's to check)
        elif isinstance(e, PodUpserted) and e.name in on:
            if (e.manifest.get("status") or {}).get("phase") in ("Succeeded", "Failed"):
                on.pop(e.name)
        elif isinstance(e, PodDeleted):
            on.pop(e.name, None)
    for (_cycle, group), n in per_cycle.items():
        assert n == size[group], (group, n)


def _evicted(kube: Kube, ns: str) -> list[dict[str, Any]]:
    return [p for p in kube.list("Pod", ns) if p["metadata"].get("deletionTimestamp")]


def _unschedulable(p: dict[str, Any]) -> dict[str, Any] | None:
    for c in p["status"].get("conditions") or []:
        if c["type"] == "PodScheduled" and c["status"] == "False" and c.get("reason") == "Unschedulable":
            return dict(c)
    return None


@pytest.mark.parametrize("kill_after_s", [0.0, 0.35, 0.9], ids=["first-bind", "mid-dispatch", "later"])
def test_kill9_and_restart_binds_every_pod_once_and_replays_identically(
    kill_after_s: float, api: Api, ns: str, tmp_path: Path
) -> None:
    """kill -9 at the first bind, and while binds and their Events are in flight (the fake holds
    every bind 0.1 s, so the pipelined dispatcher has many out), then a restart: every pod is bound
    once, gangs whole, no node over its capacity, one Scheduled Event per pod, replay identical."""
    kube = api.kube()
    w = Workload(ns, gangs=12, nodes=3, evictions=False)
    w.create_cluster(kube)
    try:
        with Kubelet(kube, ns, runtime=1.0):
            if api.fake is not None and kill_after_s:
                api.fake.binding_delay = 0.1
            proc = start_daemon(api, tmp_path)
            w.create_jobs(kube)
            wait_for("a first bind", lambda: bound(kube, ns), every=0.05)
            time.sleep(kill_after_s)
            proc.send_signal(signal.SIGKILL)
            proc.communicate(timeout=30)
            if api.fake is not None:
                api.fake.binding_delay = 0.0
            half = bound(kube, ns)
            assert len(half) < len(w.pods())  # killed mid-workload
            proc = start_daemon(api, tmp_path)
            try:
                wait_for("every pod bound once (evicted ones included)", lambda: _all_bound_once(kube, w))
                # An eviction decided in the last cycle may not be forwarded yet (a stop leaves it
                # to the next start, which re-forwards it): wait for every one to have an outcome.
                wait_for("every eviction decided forwarded", lambda: _evictions_forwarded(tmp_path))
            finally:
                _out, err = stop(proc)
            assert proc.returncode == 0, err
        now = bound(kube, ns)
        assert {k: v for k, v in half.items() if k in now} == {k: now[k] for k in half if k in now}
        assert max(scheduled_events(kube, ns).values()) == 1  # no pod bound twice
        _assert_gangs_whole_and_nodes_fit(tmp_path / "data" / "fumarole.db", w)
        if api.fake is not None:
            binds = Counter(
                path
                for method, path, status in api.fake.requests
                if path.endswith("/binding") and status == 201
            )
            assert binds and max(binds.values()) == 1
        db = tmp_path / "data" / "fumarole.db"
        decided = Counter(e.event.name for e in read_log(db) if isinstance(e.event, BindDecided))
        assert set(decided) == {name for _g, name in w.pods()}
        evicted = {e.event.name for e in read_log(db) if isinstance(e.event, EvictDecided)}
        evict_events = {e["involvedObject"]["name"] for e in kube.list("Event", ns) if e["reason"] == "Evict"}
        assert evicted <= evict_events  # preemption evicted through the API (Volcano's way)
        # An evicted pod is gone, unless it had finished before the eviction reached it (the
        # kubelet plays Succeeded after 1 s): then it stays, finished, on its node.
        phases = {p["metadata"]["name"]: p["status"].get("phase") for p in kube.list("Pod", ns)}
        assert all(phases[name] in ("Succeeded", "Failed") for name in evicted & set(now)), phases
        replay = subprocess.run([FUMAROLE, "replay", "--db", str(db)], capture_output=True, text=True)
        assert replay.returncode == 0, replay.stdout + replay.stderr
        assert " 0 different" in replay.stdout
    finally:
        w.cleanup(kube)


def _evictions_forwarded(tmp_path: Path) -> bool:
    """Every EvictDecided in the daemon's log has its outcome (EvictSucceeded or EvictFailed)."""
    records = read_log(tmp_path / "data" / "fumarole.db")
    decided = {r.seq for r in records if isinstance(r.event, EvictDecided)}
    answered = {r.event.decision_seq for r in records if isinstance(r.event, EvictSucceeded | EvictFailed)}
    return decided <= answered


def _all_bound_once(kube: Kube, w: Workload) -> bool:
    """Every pod of the workload was bound (one Scheduled Event each) and no existing pod waits."""
    events = scheduled_events(kube, w.ns)
    waiting = [p for p in kube.list("Pod", w.ns) if not p["spec"].get("nodeName")]
    return set(events) == {name for _g, name in w.pods()} and not waiting


def test_an_expired_watch_relists_without_duplicate_events(api: Api, ns: str, tmp_path: Path) -> None:
    if api.fake is None:
        pytest.skip("needs a server the test can compact (the fake)")
    fake = api.fake
    kube = api.kube()
    w = Workload(ns, gangs=6)
    w.create_cluster(kube)
    try:

        def pod_lists() -> int:  # (a list's query may carry limit/continue; a watch is recorded at its end)
            return sum(
                1
                for m, p, _s in fake.requests
                if m == "GET" and p.split("?")[0] == "/api/v1/pods" and "watch=" not in p
            )

        lists_at_start = pod_lists()
        proc = start_daemon(api, tmp_path)
        try:
            wait_for("the cluster listed", lambda: pod_lists() > lists_at_start)
            lists_before = pod_lists()
            fake.compact()
            fake.break_watches()
            w.create_jobs(kube)
            wait_for("a relist of pods", lambda: pod_lists() > lists_before)
            wait_for("binds after the relist", lambda: bound(kube, ns))
        finally:
            _out, err = stop(proc)
        assert proc.returncode == 0, err
        rows = read_log(tmp_path / "data" / "fumarole.db")
        versions = Counter(
            (r.event.manifest["metadata"]["uid"], r.event.manifest["metadata"]["resourceVersion"])
            for r in rows
            if isinstance(r.event, PodUpserted)
        )
        assert versions and max(versions.values()) == 1  # no change logged twice
        assert not [r for r in rows if isinstance(r.event, PodDeleted)]  # nothing vanished by mistake
        assert all(
            "managedFields" not in r.event.manifest["metadata"]
            for r in rows
            if isinstance(r.event, PodUpserted)
        )
    finally:
        w.cleanup(kube)


# ------------------------------------------------------------------------------------- start-up checks
def _run_to_exit(api_url: str, token: str, tmp: Path) -> subprocess.CompletedProcess[str]:
    kc = write_kubeconfig(tmp / "kubeconfig", api_url, token)
    return _run_with_kubeconfig(kc, tmp / "data")


def _run_with_kubeconfig(
    kubeconfig: Path, data_dir: Path, **extra_env: str
) -> subprocess.CompletedProcess[str]:
    """`fumarole run --adapter kubernetes` to its exit (start-up checks)."""
    argv = [FUMAROLE, "run", "--adapter", "kubernetes", "--kubeconfig", str(kubeconfig)]
    return subprocess.run(
        [*argv, "--data-dir", str(data_dir)],
        capture_output=True,
        text=True,
        timeout=120,
        env=env(**extra_env),
    )


def test_a_missing_permission_exits_2_naming_it(api: Api, tmp_path: Path) -> None:
    token = "reader"
    if api.fake is None:  # a real server: a ServiceAccount with no RoleBinding at all
        kube = api.kube()
        name = "sa" + uuid.uuid4().hex[:6]
        kube.create(
            {"apiVersion": "v1", "kind": "ServiceAccount", "metadata": {"name": name, "namespace": "default"}}
        )
        tr = kube.request(
            "POST",
            f"/api/v1/namespaces/default/serviceaccounts/{name}/token",
            {"apiVersion": "authentication.k8s.io/v1", "kind": "TokenRequest", "spec": {}},
        )
        token = tr["status"]["token"]
    r = _run_to_exit(api.url, token, tmp_path)
    assert r.returncode == 2, r.stderr
    assert "lack" in r.stderr and "list nodes" in r.stderr and "create pods/binding" in r.stderr
    assert not (tmp_path / "data").exists()


def test_a_bad_kubeconfig_exits_2_naming_the_file(tmp_path: Path) -> None:
    bad = tmp_path / "kubeconfig"
    bad.write_text("clusters: [not a kubeconfig")
    r = _run_with_kubeconfig(bad, tmp_path / "d")
    assert r.returncode == 2
    assert str(bad) in r.stderr
    missing = tmp_path / "nope"
    r = _run_with_kubeconfig(missing, tmp_path / "d")
    assert r.returncode == 2 and f"kubeconfig {missing}: no such file" in r.stderr
    assert not (tmp_path / "d").exists()


def test_missing_volcano_crds_exit_2(tmp_path: Path) -> None:
    fake = FakeApiServer(crds=False).start()
    try:
        r = _run_to_exit(fake.url, "admin", tmp_path)
    finally:
        fake.stop()
    assert r.returncode == 2
    assert "Volcano's CRDs are not installed" in r.stderr and "podgroups" in r.stderr


def test_an_unreachable_server_is_waited_for_with_a_repeated_log_line(tmp_path: Path) -> None:
    fake = FakeApiServer()
    url = "http://127.0.0.1:9"  # discard port: nothing listens
    proc = start_daemon(Api(url, "admin", fake), tmp_path)
    try:
        assert proc.stderr is not None
        line = proc.stderr.readline()
        while "waiting for the Kubernetes API server" not in line:
            assert line, "the daemon exited instead of waiting"
            line = proc.stderr.readline()
        assert url in line
    finally:
        proc.kill()
        proc.communicate(timeout=30)


def test_two_daemons_one_leads_and_the_standby_takes_over_after_kill9(
    api: Api, ns: str, tmp_path: Path
) -> None:
    kube = api.kube()
    w = Workload(ns, gangs=10, nodes=3, evictions=False)
    w.create_cluster(kube)
    first, second = w.groups[:5], w.groups[5:]
    try:
        with Kubelet(kube, ns, runtime=1.0):
            a = start_daemon(api, tmp_path, data="a")
            b = start_daemon(api, tmp_path, data="b")
            procs = {"a": a, "b": b}
            w.groups = first
            w.create_jobs(kube)
            wait_for("the first jobs bound", lambda: _all_bound_once(kube, w))
            lease = kube.get(
                "Lease", "fumarole-" + tmp_path.name.lower().replace("_", "-")[-40:].strip("-"), "default"
            )
            holder = lease["spec"]["holderIdentity"]
            cycles = {k: _cycles(tmp_path / k / "fumarole.db") for k in procs}
            leader = next(k for k, n in cycles.items() if n)
            standby = "b" if leader == "a" else "a"
            assert cycles[standby] == 0  # only one decides
            ready = {k: _readyz(p) for k, p in procs.items()}
            assert (ready[leader]["leading"], ready[standby]["leading"]) == (True, False)
            assert ready[leader]["leader"] == ready[standby]["leader"] == holder
            assert "fumarole_leader 1.0" in _metrics(procs[leader])
            assert _pods_logged(tmp_path / standby / "fumarole.db") >= len(w.pods())  # ... both watch
            procs[leader].send_signal(signal.SIGKILL)
            procs[leader].communicate(timeout=30)
            w.groups = second
            w.create_jobs(kube)
            w.groups = first + second
            try:
                wait_for("the standby to take over and bind the rest", lambda: _all_bound_once(kube, w))
            finally:
                _out, err = stop(procs[standby])
            assert procs[standby].returncode == 0, err
        assert kube.get("Lease", lease["metadata"]["name"], "default")["spec"]["holderIdentity"] != holder
        assert _cycles(tmp_path / standby / "fumarole.db") > 0
        assert max(scheduled_events(kube, ns).values()) == 1  # no pod bound twice
    finally:
        w.cleanup(kube)


def test_two_daemons_on_one_postgresql_log_hand_over_after_kill9(api: Api, ns: str, tmp_path: Path) -> None:
    """The Kubernetes adapter on a shared PostgreSQL log: the log's lease picks the one replica that
    watches and binds; after SIGKILL the standby takes over (log lease, then the Lease object) and
    binds the rest; no pod is bound twice and the shared log replays identically."""
    sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "store"))
    from fumarole_pg_server import fresh_dsn, require_pg
    from fumarole_store_kit import run_pg

    dsn = fresh_dsn(require_pg())
    kube = api.kube()
    w = Workload(ns, gangs=8, nodes=3, evictions=False)
    w.create_cluster(kube)
    first, second = w.groups[:4], w.groups[4:]
    try:
        with Kubelet(kube, ns, runtime=1.0):
            procs = [start_daemon(api, tmp_path, "--db", dsn, data=k) for k in ("a", "b")]
            w.groups = first
            w.create_jobs(kube)
            wait_for("the first jobs bound", lambda: _all_bound_once(kube, w))
            holder = str(run_pg(dsn, "SELECT holder FROM leadership")[0][0])
            leader = next(p for p in procs if holder.split("/")[1] == str(p.pid))
            standby = next(p for p in procs if p is not leader)
            assert _readyz(leader)["leading"] is True
            leader.send_signal(signal.SIGKILL)
            leader.communicate(timeout=30)
            w.groups = second
            w.create_jobs(kube)
            w.groups = first + second
            try:
                wait_for("the standby to take over and bind the rest", lambda: _all_bound_once(kube, w))
            finally:
                _out, err = stop(standby)
            assert standby.returncode == 0, err
        assert max(scheduled_events(kube, ns).values()) == 1  # no pod bound twice
        terms = run_pg(dsn, "SELECT epoch, holder FROM leader_terms ORDER BY epoch")
        assert len(terms) == 2 and terms[0][1] == holder
        r = subprocess.run([FUMAROLE, "replay", "--db", dsn], capture_output=True, text=True, timeout=120)
        assert r.returncode == 0 and " 0 different" in r.stdout, r.stdout + r.stderr
    finally:
        w.cleanup(kube)


_PORTS: dict[int, str] = {}


def _base(proc: subprocess.Popen[str]) -> str:
    if proc.pid not in _PORTS:
        assert proc.stdout is not None
        line = proc.stdout.readline()  # the daemon's first line: "REST API on http://HOST:PORT"
        _PORTS[proc.pid] = line.strip().rpartition(" ")[2]
    return _PORTS[proc.pid]


def _readyz(proc: subprocess.Popen[str]) -> dict[str, Any]:
    try:
        with urllib.request.urlopen(_base(proc) + "/readyz", timeout=10) as r:
            return dict(json.loads(r.read()))
    except urllib.error.HTTPError as e:  # 503 while not ready: same body
        return dict(json.loads(e.read()))


def _metrics(proc: subprocess.Popen[str]) -> str:
    with urllib.request.urlopen(_base(proc) + "/metrics", timeout=10) as r:
        return str(r.read().decode())


def _cycles(db: Path) -> int:
    return sum(1 for r in read_log(db) if isinstance(r.event, CycleOpened)) if db.exists() else 0


def _pods_logged(db: Path) -> int:
    return len({r.event.name for r in read_log(db) if isinstance(r.event, PodUpserted)})


RBAC = Path(__file__).resolve().parents[2] / "deploy" / "kubernetes" / "10-rbac.yaml"
SA_USER = "system:serviceaccount:fumarole-system:fumarole"


def test_the_deploy_clusterrole_suffices(api: Api, ns: str, tmp_path: Path) -> None:
    """The daemon with deploy/kubernetes' ServiceAccount token (not an admin's) schedules a workload."""
    kube = api.kube()
    docs = [d for d in yaml.safe_load_all(RBAC.read_text()) if d]
    with contextlib.suppress(KubeError):
        kube.create({"apiVersion": "v1", "kind": "Namespace", "metadata": {"name": "fumarole-system"}})
    for doc in docs:
        if api.fake is not None and doc["kind"] != "ServiceAccount":
            continue  # the fake has no RBAC objects: it is given the same rules below
        with contextlib.suppress(KubeError):  # already there from an earlier run on this server
            kube.create(doc)
    if api.fake is not None:
        api.fake.grants[SA_USER] = {
            (verb, f"{group}/{res}")
            for d in docs
            if d["kind"] in ("ClusterRole", "Role")
            for rule in d["rules"]
            for group in rule["apiGroups"]
            for res in rule["resources"]
            for verb in rule["verbs"]
        }
    token = kube.request(
        "POST",
        "/api/v1/namespaces/fumarole-system/serviceaccounts/fumarole/token",
        {"apiVersion": "authentication.k8s.io/v1", "kind": "TokenRequest", "spec": {}},
    )["status"]["token"]
    w = Workload(ns, gangs=4)
    w.create_cluster(kube)
    w.create_jobs(kube)
    try:
        with Kubelet(kube, ns):
            proc = start_daemon(api, tmp_path, token=token, lease_ns="fumarole-system")
            try:
                wait_for("binds by the ServiceAccount", lambda: bound(kube, ns))
                wait_for(
                    "PodGroup statuses written by the ServiceAccount",
                    lambda: all((pg.get("status") or {}).get("phase") for pg in kube.list("PodGroup", ns)),
                )
            finally:
                _out, err = stop(proc)
        assert proc.returncode == 0, err
        assert "forbidden" not in err.lower(), err
    finally:
        w.cleanup(kube)


# ------------------------------------------------------------------ a restart keeps its lease and its work
def _lease_name(tmp: Path) -> str:
    return "fumarole-" + tmp.name.lower().replace("_", "-")[-40:].strip("-")


def test_a_replica_restarted_after_kill9_renews_its_own_lease_and_fails_nothing(
    api: Api, ns: str, tmp_path: Path
) -> None:
    """A single replica killed with -9 mid-dispatch and restarted: its stable identity still holds the
    Lease, so it renews it on its first read (no takeover, the transitions count unchanged) and the
    decisions its previous life committed but had not forwarded go out: no failed or superseded
    outcome, no 'not the leader' line.  (The lease is long: waiting it out would show.)"""
    kube = api.kube()
    w = Workload(ns, gangs=10, nodes=3, evictions=False)
    w.create_cluster(kube)
    lease_s = 30
    slow = {"FUMAROLE_KUBE_CONCURRENCY": "1"}
    try:
        with Kubelet(kube, ns, runtime=1.0):
            if api.fake is not None:
                api.fake.binding_delay = 0.3  # binds trail the decisions: some are left to the restart
            proc = start_daemon(api, tmp_path, lease_s=lease_s, **slow)
            w.create_jobs(kube)
            wait_for("a first bind", lambda: bound(kube, ns))
            before = kube.get("Lease", _lease_name(tmp_path), "default")["spec"]
            proc.send_signal(signal.SIGKILL)
            proc.communicate(timeout=30)
            if api.fake is not None:
                api.fake.binding_delay = 0.0
            rows = read_log(tmp_path / "data" / "fumarole.db")
            decided = {r.seq for r in rows if isinstance(r.event, BindDecided)}
            answered = {r.event.decision_seq for r in rows if isinstance(r.event, BindSucceeded | BindFailed)}
            if api.fake is not None:
                assert decided - answered, "the kill left no decision to forward again"
            started = time.monotonic()
            proc = start_daemon(api, tmp_path, lease_s=lease_s, **slow)
            try:
                wait_for("a bind by the restarted replica", lambda: _binds_after(tmp_path, answered))
                first_bind_s = time.monotonic() - started
                wait_for("every pod bound once", lambda: _all_bound_once(kube, w))
                after = kube.get("Lease", _lease_name(tmp_path), "default")["spec"]  # (released at stop)
            finally:
                _out, err = stop(proc)
            assert proc.returncode == 0, err
        assert after["holderIdentity"] == before["holderIdentity"]  # the same identity...
        assert after["leaseTransitions"] == before["leaseTransitions"]  # ... renewed, not taken over
        rows = read_log(tmp_path / "data" / "fumarole.db")
        assert not [r for r in rows if isinstance(r.event, BindFailed)]
        assert "not the leader" not in err and "superseded" not in err and "Traceback" not in err
        assert max(scheduled_events(kube, ns).values()) == 1
        print(f"restart to first bind: {first_bind_s:.2f}s (lease_duration {lease_s}s)")
    finally:
        if api.fake is not None:
            api.fake.binding_delay = 0.0
        w.cleanup(kube)


def _binds_after(tmp_path: Path, answered: set[int]) -> bool:
    rows = read_log(tmp_path / "data" / "fumarole.db")
    return any(isinstance(r.event, BindSucceeded) and r.event.decision_seq not in answered for r in rows)


# ------------------------------------------------------------ signals at any point: exit 0, no traceback
@pytest.mark.parametrize("sig", [signal.SIGTERM, signal.SIGINT], ids=["SIGTERM", "SIGINT"])
def test_a_signal_while_waiting_for_the_server_exits_0(sig: signal.Signals, tmp_path: Path) -> None:
    with socket.socket() as s:  # a port nothing listens on
        s.bind(("127.0.0.1", 0))
        url = f"http://127.0.0.1:{s.getsockname()[1]}"
    proc = start_daemon(Api(url, "admin", None), tmp_path)
    assert proc.stderr is not None
    seen = []
    for line in proc.stderr:
        seen.append(line)
        if "waiting for the Kubernetes API server" in line:
            break
    proc.send_signal(sig)
    out, err = proc.communicate(timeout=60)
    err = "".join(seen) + err
    assert proc.returncode == 0, err
    assert "Traceback" not in err and "Unclosed" not in err, err
    assert out.strip().splitlines() == ["stopped before the start-up checks were done"]
    assert not (tmp_path / "data").exists()  # nothing created


@pytest.mark.parametrize("sig", [signal.SIGTERM, signal.SIGINT], ids=["SIGTERM", "SIGINT"])
def test_a_signal_while_running_exits_0(sig: signal.Signals, api: Api, ns: str, tmp_path: Path) -> None:
    kube = api.kube()
    w = Workload(ns, gangs=3)
    w.create_cluster(kube)
    w.create_jobs(kube)
    try:
        proc = start_daemon(api, tmp_path)
        wait_for("binds", lambda: bound(kube, ns))
        proc.send_signal(sig)
        out, err = proc.communicate(timeout=60)
        assert proc.returncode == 0, err
        assert "Traceback" not in err and "Unclosed" not in err, err
        assert "stopped:" in out
    finally:
        w.cleanup(kube)


# ------------------------------------------------------------------ every kubeconfig error: one line, exit 2
def _kubeconfig(**change: Any) -> dict[str, Any]:
    cfg: dict[str, Any] = {
        "apiVersion": "v1",
        "kind": "Config",
        "clusters": [{"name": "c", "cluster": {"server": "http://127.0.0.1:9"}}],
        "users": [{"name": "u", "user": {"token": "admin"}}],
        "contexts": [{"name": "x", "context": {"cluster": "c", "user": "u"}}],
        "current-context": "x",
    }
    cfg.update(change)
    return cfg


KUBECONFIG_ERRORS: dict[str, tuple[str | None, str]] = {
    "missing file": (None, "no such file"),
    "empty file": ("", "empty"),
    "not YAML": ("clusters: [not a kubeconfig", "not valid YAML: expected ',' or ']'"),
    "YAML, not a mapping": ("- a\n- b\n", "expected a mapping, got a list"),
    "no clusters": (json.dumps(_kubeconfig(clusters=[])), "names cluster 'c', which is not in clusters"),
    "no current-context": (json.dumps(_kubeconfig(**{"current-context": ""})), "no current-context"),
    "current-context names no context": (
        json.dumps(_kubeconfig(**{"current-context": "y"})),
        "current-context 'y' names no entry of contexts",
    ),
    "context names a missing user": (
        json.dumps(_kubeconfig(contexts=[{"name": "x", "context": {"cluster": "c", "user": "nobody"}}])),
        "names user 'nobody', which is not in users",
    ),
    "cluster without server": (
        json.dumps(_kubeconfig(clusters=[{"name": "c", "cluster": {}}])),
        "cluster 'c' has no server address",
    ),
    "server with a bad scheme": (
        json.dumps(_kubeconfig(clusters=[{"name": "c", "cluster": {"server": "ftp://127.0.0.1:9"}}])),
        "is not an http(s):// URL",
    ),
    "a directory": ("DIR", "is a directory"),
}


@pytest.mark.parametrize("loader", ["static", "kubernetes_asyncio"])
@pytest.mark.parametrize("case", list(KUBECONFIG_ERRORS))
def test_every_kubeconfig_error_is_one_line_naming_the_file_and_cause(
    case: str, loader: str, tmp_path: Path
) -> None:
    """Through both ways of reading credentials (credentials.py): the direct one and the loader's."""
    content, cause = KUBECONFIG_ERRORS[case]
    path = tmp_path / "kubeconfig"
    if content == "DIR":
        path.mkdir()
    elif content is not None:
        path.write_text(content)
    r = _run_with_kubeconfig(path, tmp_path / "d", FUMAROLE_KUBECONFIG_LOADER=loader)
    assert r.returncode == 2, r.stderr
    lines = r.stderr.strip().splitlines()
    assert len(lines) == 1, r.stderr
    assert lines[0].startswith(f"fumarole: error: --adapter kubernetes: kubeconfig {path}: ")
    assert cause in lines[0], lines[0]
    assert not (tmp_path / "d").exists()
