"""Benchmark of Fumarole's live Kubernetes adapter (and Volcano's vc-scheduler) on an API server; JSON out.

Scenarios (`--scenarios burst,backlog,churn`, `scale` on its own flag), each run on a fresh API
server: the fake (tests/k8s/fake_apiserver.py, run as its own process) unless `KUBE_APISERVER`
names a kube-apiserver binary (then ../shared/k8s/start.sh starts one with etcd, per run).  With
`VC_SCHEDULER=/path/to/vc-scheduler` every scenario also runs Volcano's scheduler, alternating
(fumarole, volcano, fumarole, … `--repeat` times), and the summary gives ratios computed from this
invocation's runs only.  Both schedulers get the same configuration (bench/kubernetes-scheduler.yaml:
Volcano's default plus binpack), the same schedule period, and no leader election.

- burst: gangs (PodGroup then its pods) created while the scheduler runs;
  last create → last bind and first create → last bind.
- backlog: the same gangs created pending before the scheduler starts; start → last bind.
- churn: gangs created at `--churn-rate` pods/s for `--churn-seconds`; per pod, the time from the
  bench's watch seeing it added to the watch seeing `spec.nodeName` (p50/p99/max).
- minimal client (burst and backlog): after the scheduler stopped, as many bindings by a plain
  aiohttp client with `--minimal-connections` connections onto fresh nodes first-fit: the API's own
  limit here, and our ratio to it.
- scale (`--scale`): `--scale-nodes` nodes and `--scale-pods` pods (most already bound), the daemon's
  start → listed → first cycle, cycle times while a trickle of pods arrives, and RSS (Fumarole only).

Every run reports API writes per bound pod by kind (from `/metrics` `apiserver_request_total`, the
bench's own writes subtracted), the scheduler's CPU (user+sys, /proc/PID/stat) per bound pod and
RSS, and a correctness check (gangs whole, no node over capacity, no pod bound twice).  There is no
kubelet: bound pods stay in phase Pending.  Progress goes to stderr.  docs/kubernetes.md describes
every key.

Usage: python bench/kubernetes.py [--scenarios burst,backlog,churn] [--repeat 1] [--nodes 100]
       [--gangs 300] [--mix 1:0.25,4:0.35,8:0.25,10:0.15] [--seed 1] [--scale] ...
"""

from __future__ import annotations

import argparse
import asyncio
import contextlib
import json
import os
import random
import shlex
import signal
import socket
import statistics
import subprocess
import sys
import tempfile
import threading
import time
from collections import Counter
from collections.abc import Awaitable, Callable, Iterable
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import aiohttp
import msgspec

ROOT = Path(__file__).resolve().parent.parent
KIT = ROOT.parent / "shared" / "k8s"
FAKE = ROOT / "tests" / "k8s" / "fake_apiserver.py"
CONF = Path(__file__).resolve().parent / "kubernetes-scheduler.yaml"
FUMAROLE = str(Path(sys.executable).parent / "fumarole")
NS = "bench"
MINIMAL_NS = "bench-minimal"
MINIMAL_SCHEDULER = "bench-minimal"  # no scheduler watches this name: only the minimal client binds them
CLK_TCK = os.sysconf("SC_CLK_TCK")
WRITE_VERBS = {"POST", "PUT", "PATCH", "DELETE", "APPLY"}
REVIEWS = {"selfsubjectaccessreviews", "subjectaccessreviews", "selfsubjectrulesreviews", "tokenreviews"}
WRITE_KINDS = ("bindings", "events", "podgroups", "queues_status", "pods_status", "other")


def say(msg: str) -> None:
    print(f"[bench {time.strftime('%H:%M:%S')}] {msg}", file=sys.stderr, flush=True)


# ---------------------------------------------------------- workload
@dataclass(frozen=True)
class Gang:
    name: str
    queue: str
    size: int
    cpu: int  # per pod


def parse_mix(text: str) -> list[tuple[int, float]]:
    """`SIZE:WEIGHT,…` → [(size, weight)]; one clear line on bad input."""
    out = []
    for part in text.split(","):
        size, _, weight = part.partition(":")
        try:
            out.append((int(size), float(weight or 1)))
        except ValueError:
            raise SystemExit(f"bench: --mix: {part!r} is not SIZE:WEIGHT") from None
        if out[-1][0] < 1 or out[-1][1] <= 0:
            raise SystemExit(f"bench: --mix: {part!r}: size ≥ 1 and weight > 0")
    return out


def make_gangs(count: int, mix: list[tuple[int, float]], seed: int, prefix: str = "g") -> list[Gang]:
    """`count` gangs with sizes drawn from `mix` (seeded), queues alternating 3:1 between two queues."""
    rng = random.Random(seed)
    sizes = rng.choices([s for s, _ in mix], weights=[w for _, w in mix], k=count)
    return [Gang(f"{prefix}{i:05d}", "bench-a" if i % 4 else "bench-b", s, 1) for i, s in enumerate(sizes)]


def node_obj(name: str) -> dict[str, Any]:
    return {
        "apiVersion": "v1",
        "kind": "Node",
        "metadata": {"name": name, "labels": {"kubernetes.io/hostname": name}},
    }


def node_status(cpu: int) -> dict[str, Any]:
    res = {"cpu": str(cpu), "memory": f"{cpu * 4}Gi", "pods": "110"}
    cond = {"type": "Ready", "status": "True", "reason": "KubeletReady", "message": "ready"}
    return {"status": {"capacity": res, "allocatable": res, "conditions": [cond]}}


def podgroup_obj(g: Gang) -> dict[str, Any]:
    return {
        "apiVersion": "scheduling.volcano.sh/v1beta1",
        "kind": "PodGroup",
        "metadata": {"name": g.name, "namespace": NS},
        "spec": {"minMember": g.size, "queue": g.queue},
    }


def pod_obj(
    ns: str, name: str, group: str, cpu: int, scheduler: str = "volcano", node: str = ""
) -> dict[str, Any]:
    spec: dict[str, Any] = {
        "schedulerName": scheduler,
        "restartPolicy": "Never",
        "terminationGracePeriodSeconds": 0,
        "containers": [
            {"name": "c", "image": "busybox", "resources": {"requests": {"cpu": str(cpu), "memory": "1Gi"}}}
        ],
    }
    if node:
        spec["nodeName"] = node
    meta: dict[str, Any] = {"name": name, "namespace": ns}
    if group:
        meta["annotations"] = {"scheduling.k8s.io/group-name": group}
    return {"apiVersion": "v1", "kind": "Pod", "metadata": meta, "spec": spec}


def queue_obj(name: str, weight: int) -> dict[str, Any]:
    return {
        "apiVersion": "scheduling.volcano.sh/v1beta1",
        "kind": "Queue",
        "metadata": {"name": name},
        "spec": {"weight": weight, "reclaimable": True},
    }


def pct(values: list[float], q: float) -> float | None:
    if not values:
        return None
    s = sorted(values)
    return s[min(len(s) - 1, max(0, round(q * (len(s) - 1))))]


def r3(x: float | None) -> float | None:
    return None if x is None else round(x, 3)


# ---------------------------------------------------------- servers
def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


class Server:
    """A fresh API server for one run: the fake as a process, or kube-apiserver + etcd via start.sh."""

    def __init__(self, tmp: Path) -> None:
        self.tmp = tmp
        self.real = bool(os.environ.get("KUBE_APISERVER"))
        self.proc: subprocess.Popen[bytes] | None = None
        self.url = ""
        self.token = "admin"
        self.version = ""

    def start(self) -> Server:
        self.tmp.mkdir(parents=True, exist_ok=True)
        if self.real:
            r = subprocess.run([str(KIT / "start.sh"), str(self.tmp / "k8s")], capture_output=True, text=True)
            if r.returncode:
                raise SystemExit(f"bench: kube-apiserver did not start: {r.stdout[-1500:]}{r.stderr[-1500:]}")
            env = {}
            for line in (self.tmp / "k8s" / "env").read_text().splitlines():
                k, _, v = line.removeprefix("export ").partition("=")
                env[k] = v.strip("'\"")
            self.url, self.token = env["K8S_API"], env["K8S_TOKEN"]
        else:
            port_file = self.tmp / "fake.port"
            self.proc = subprocess.Popen(
                [sys.executable, str(FAKE), "--port-file", str(port_file), "--token", self.token],
                stdout=subprocess.DEVNULL,
                stderr=open(self.tmp / "fake.err", "w"),  # noqa: SIM115
            )
            deadline = time.monotonic() + 30
            while not port_file.exists() or not port_file.read_text():
                if self.proc.poll() is not None or time.monotonic() > deadline:
                    raise SystemExit(
                        "bench: the fake API server did not start: "
                        + (self.tmp / "fake.err").read_text()[-1500:]
                    )
                time.sleep(0.05)
            self.url = f"http://127.0.0.1:{port_file.read_text().strip()}"
        self.kubeconfig = self.tmp / "kubeconfig"
        cluster = {"server": self.url, "insecure-skip-tls-verify": True}
        self.kubeconfig.write_text(
            json.dumps(
                {
                    "apiVersion": "v1",
                    "kind": "Config",
                    "clusters": [{"name": "bench", "cluster": cluster}],
                    "users": [{"name": "bench", "user": {"token": self.token}}],
                    "contexts": [{"name": "bench", "context": {"cluster": "bench", "user": "bench"}}],
                    "current-context": "bench",
                }
            )
        )
        return self

    @property
    def kind(self) -> str:
        return "kube-apiserver" if self.real else "fake"

    def pid(self) -> int | None:
        """The API server's process id (for its CPU), when known."""
        if self.proc is not None:
            return self.proc.pid
        pids = self.tmp / "k8s" / "pids"
        if pids.exists():
            for line in pids.read_text().split():
                with contextlib.suppress(ValueError, OSError):
                    pid = int(line.split("=")[-1])
                    if "kube-apiserver" in Path(f"/proc/{pid}/cmdline").read_bytes().decode(errors="replace"):
                        return pid
        return None

    def stop(self) -> None:
        if self.real:
            subprocess.run([str(KIT / "stop.sh"), str(self.tmp / "k8s")], check=False, capture_output=True)
        elif self.proc is not None:
            self.proc.terminate()
            try:
                self.proc.wait(10)
            except subprocess.TimeoutExpired:
                self.proc.kill()
                self.proc.wait()


# ---------------------------------------------------------- API client
PATHS = {
    "Namespace": ("/api/v1", "namespaces", False),
    "Node": ("/api/v1", "nodes", False),
    "Pod": ("/api/v1", "pods", True),
    "PodGroup": ("/apis/scheduling.volcano.sh/v1beta1", "podgroups", True),
    "Queue": ("/apis/scheduling.volcano.sh/v1beta1", "queues", False),
}


def path_of(kind: str, ns: str = "", name: str = "", sub: str = "") -> str:
    base, plural, namespaced = PATHS[kind]
    p = f"{base}/namespaces/{ns}/{plural}" if namespaced and ns else f"{base}/{plural}"
    return p + (f"/{name}" if name else "") + (f"/{sub}" if sub else "")


class Api:
    """The bench's own aiohttp client; counts its own writes by (verb, resource, subresource)."""

    def __init__(self, server: Server, connections: int = 16) -> None:
        self.base = server.url.rstrip("/")
        self.headers = {"Authorization": f"Bearer {server.token}", "Accept": "application/json"}
        self.session = aiohttp.ClientSession(
            connector=aiohttp.TCPConnector(limit=connections, ssl=False),
            timeout=aiohttp.ClientTimeout(total=120),
        )
        self.own_writes: Counter[tuple[str, str, str]] = Counter()

    async def close(self) -> None:
        await self.session.close()

    async def request(self, method: str, path: str, body: Any = None, ctype: str = "application/json") -> Any:
        headers = dict(self.headers)
        data = None
        if body is not None:
            data = msgspec.json.encode(body)
            headers["Content-Type"] = ctype
        if method in WRITE_VERBS:
            parts = path.split("?")[0].split("/")
            resource, sub = _resource_of(parts)
            self.own_writes[(method, resource, sub)] += 1
        for attempt in range(8):
            async with self.session.request(method, self.base + path, data=data, headers=headers) as r:
                raw = await r.read()
                if r.status == 429 or (r.status >= 500 and attempt < 7):
                    await asyncio.sleep(0.2 * (attempt + 1))
                    continue
                if r.status >= 400:
                    raise RuntimeError(f"{method} {path}: {r.status} {raw[:300]!r}")
                return msgspec.json.decode(raw) if raw and r.content_type == "application/json" else raw
        raise RuntimeError(f"{method} {path}: gave up after retries")

    async def create(self, obj: dict[str, Any]) -> Any:
        ns = obj["metadata"].get("namespace", "")
        return await self.request("POST", path_of(obj["kind"], ns), obj)

    async def patch(self, kind: str, name: str, patch: dict[str, Any], sub: str = "", ns: str = "") -> Any:
        return await self.request(
            "PATCH", path_of(kind, ns, name, sub), patch, "application/merge-patch+json"
        )

    async def list(self, kind: str, ns: str = "") -> dict[str, Any]:
        return dict(await self.request("GET", path_of(kind, ns)))

    async def metrics(self) -> Counter[tuple[str, str, str, str, str]]:
        """apiserver_request_total as {(verb, group, resource, subresource, code): n}."""
        text = (await self.request("GET", "/metrics")).decode()
        out: Counter[tuple[str, str, str, str, str]] = Counter()
        for line in text.splitlines():
            if not line.startswith("apiserver_request_total{"):
                continue
            labels_text, _, value = line[len("apiserver_request_total{") :].rpartition("} ")
            labels = dict(
                (kv.split("=", 1)[0], kv.split("=", 1)[1].strip('"')) for kv in _split_labels(labels_text)
            )
            key = (
                labels.get("verb", ""),
                labels.get("group", ""),
                labels.get("resource", ""),
                labels.get("subresource", ""),
                labels.get("code", ""),
            )
            out[key] += int(float(value))
        return out


def _split_labels(text: str) -> Iterable[str]:
    cur, quoted = "", False
    for ch in text:
        if ch == '"':
            quoted = not quoted
        if ch == "," and not quoted:
            yield cur
            cur = ""
        else:
            cur += ch
    if cur:
        yield cur


def _resource_of(parts: list[str]) -> tuple[str, str]:
    rest = parts[3:] if parts[1] == "api" else parts[4:]
    if rest and rest[0] == "namespaces" and len(rest) >= 3:
        rest = rest[2:]
    return (rest[0] if rest else "", rest[2] if len(rest) > 2 else "")


def write_kind(resource: str, sub: str) -> str:
    if resource == "pods" and sub == "binding":
        return "bindings"
    if resource == "events":
        return "events"
    if resource == "podgroups":
        return "podgroups"
    if resource == "queues" and sub == "status":
        return "queues_status"
    if resource == "pods" and sub == "status":
        return "pods_status"
    return "other"


def scheduler_writes(
    before: Counter[tuple[str, str, str, str, str]],
    after: Counter[tuple[str, str, str, str, str]],
    own: Counter[tuple[str, str, str]],
) -> dict[str, Any]:
    """Writes between the two snapshots, less the bench's own, by kind; failed ones (code ≥ 400) apart."""
    by_kind: Counter[str] = Counter({k: 0 for k in WRITE_KINDS})
    failed: Counter[str] = Counter()
    detail: Counter[str] = Counter()
    ok_bindings = 0
    for key, n in (after - before).items():
        verb, _group, resource, sub, code = key
        if verb not in WRITE_VERBS:
            continue
        if resource in REVIEWS:  # a question to the authorizer: a POST that stores nothing
            detail[f"{verb} {resource} {code} (not counted: stores nothing)"] += n
            continue
        detail[f"{verb} {resource}{'/' + sub if sub else ''} {code}"] += n
        kind = write_kind(resource, sub)
        by_kind[kind] += n
        if code.isdigit() and int(code) >= 400:
            failed[kind] += n
        elif kind == "bindings":
            ok_bindings += n
    for (verb, resource, sub), n in own.items():
        by_kind[write_kind(resource, sub)] -= n
        detail[f"{verb} {resource}{'/' + sub if sub else ''} (bench's own)"] -= n
    return {
        "by_kind": dict(by_kind),
        "failed_by_kind": dict(failed),
        "ok_bindings": ok_bindings,
        "detail": {k: v for k, v in sorted(detail.items()) if v},
    }


# ---------------------------------------------------------- the bench's watch
@dataclass
class PodSeen:
    added: float = 0.0  # wall clock (time.time()) when the watch first saw the pod
    bound: float = 0.0  # when it first saw spec.nodeName
    node: str = ""
    created_ts: str = ""
    rebinds: int = 0  # nodeName changed from one node to another (a pod bound twice)


class PodWatch:
    """List then watch the pods of a namespace; the wall-clock time each pod was seen added and bound."""

    def __init__(self, server: Server, ns: str) -> None:
        self.server = server
        self.ns = ns
        self.pods: dict[str, PodSeen] = {}
        self.bound = 0
        self.changed = asyncio.Event()
        self._task: asyncio.Task[None] | None = None
        self.listed = asyncio.Event()

    async def start(self) -> None:
        self._task = asyncio.create_task(self._run())
        await self.listed.wait()

    async def stop(self) -> None:
        if self._task is not None:
            self._task.cancel()
            with contextlib.suppress(asyncio.CancelledError):
                await self._task

    def _see(self, obj: dict[str, Any], now: float) -> None:
        meta = obj.get("metadata") or {}
        name = meta.get("name", "")
        p = self.pods.get(name)
        if p is None:
            p = self.pods[name] = PodSeen(added=now, created_ts=meta.get("creationTimestamp") or "")
        node = (obj.get("spec") or {}).get("nodeName") or ""
        if node and not p.node:
            p.node, p.bound = node, now
            self.bound += 1
            self.changed.set()
        elif node and node != p.node:
            p.rebinds += 1
            p.node = node

    async def _run(self) -> None:
        headers = {"Authorization": f"Bearer {self.server.token}", "Accept": "application/json"}
        base = self.server.url.rstrip("/") + f"/api/v1/namespaces/{self.ns}/pods"
        decoder = msgspec.json.Decoder()
        async with aiohttp.ClientSession(
            connector=aiohttp.TCPConnector(ssl=False),
            timeout=aiohttp.ClientTimeout(total=None),
            read_bufsize=1 << 20,
        ) as session:
            rv = ""
            while True:
                if not rv:
                    async with session.get(base, headers=headers) as r:
                        body = decoder.decode(await r.read())
                    now = time.time()
                    for obj in body.get("items") or []:
                        self._see(obj, now)
                    rv = body["metadata"]["resourceVersion"]
                    self.listed.set()
                url = f"{base}?watch=1&allowWatchBookmarks=true&timeoutSeconds=3600&resourceVersion={rv}"
                try:
                    async with session.get(url, headers=headers) as r:
                        async for line in r.content:
                            if not line.strip():
                                continue
                            ev = decoder.decode(line)
                            obj = ev.get("object") or {}
                            if ev.get("type") == "ERROR":
                                rv = ""  # expired: relist
                                break
                            rv = (obj.get("metadata") or {}).get("resourceVersion") or rv
                            if ev.get("type") in ("ADDED", "MODIFIED"):
                                self._see(obj, time.time())
                except (TimeoutError, aiohttp.ClientError) as e:
                    say(f"watch pods: {e}; reconnecting")
                    await asyncio.sleep(0.2)

    async def wait_bound(self, names: set[str], timeout: float, alive: Callable[[], str | None]) -> bool:
        deadline = time.monotonic() + timeout
        last_report = time.monotonic()
        while True:
            left = [n for n in names if not (self.pods.get(n) and self.pods[n].node)]
            if not left:
                return True
            if time.monotonic() > deadline:
                return False
            why = alive()
            if why:
                raise RuntimeError(why)
            if time.monotonic() - last_report > 10:
                say(f"  {len(names) - len(left)}/{len(names)} bound")
                last_report = time.monotonic()
            self.changed.clear()
            with contextlib.suppress(asyncio.TimeoutError):
                await asyncio.wait_for(self.changed.wait(), 0.5)


# ---------------------------------------------------------- schedulers
def proc_cpu_s(pid: int) -> float:
    """user+sys CPU seconds of a process (and its reaped children), from /proc/PID/stat."""
    try:
        stat = Path(f"/proc/{pid}/stat").read_text()
    except OSError:
        return 0.0
    fields = stat[stat.rindex(")") + 2 :].split()
    return sum(int(x) for x in fields[11:15]) / CLK_TCK


def proc_rss_mb(pid: int) -> tuple[float, float]:
    """(VmRSS, VmHWM) in MiB."""
    rss = hwm = 0.0
    with contextlib.suppress(OSError):
        for line in Path(f"/proc/{pid}/status").read_text().splitlines():
            if line.startswith("VmRSS:"):
                rss = int(line.split()[1]) / 1024
            elif line.startswith("VmHWM:"):
                hwm = int(line.split()[1]) / 1024
    return rss, hwm


class Scheduler:
    """One scheduler process (fumarole or vc-scheduler); its stderr kept with arrival times."""

    def __init__(self, which: str, server: Server, tmp: Path, args: argparse.Namespace) -> None:
        self.which = which
        self.server = server
        self.tmp = tmp
        self.args = args
        self.port = free_port()
        self.lines: list[tuple[float, str]] = []
        self.proc: subprocess.Popen[bytes] | None = None
        self.started = 0.0

    def command(self) -> tuple[list[str], dict[str, str]]:
        env = {k: v for k, v in os.environ.items() if not k.startswith(("FUMAROLE_", "OTEL_"))}
        if self.which == "fumarole":
            env |= {
                "FUMAROLE_LEADER_ELECT": "false",
                "FUMAROLE_SCHEDULER_NAMES": "volcano",
                "OTEL_SDK_DISABLED": "true",
            }
            env |= dict(kv.split("=", 1) for kv in self.args.fumarole_env)
            cmd = [
                FUMAROLE, "run", "--adapter", "kubernetes",
                "--kubeconfig", str(self.server.kubeconfig),
                "--data-dir", str(self.tmp / "fumarole-data"),
                "--conf", str(self.args.conf),
                "--schedule-period", str(self.args.schedule_period),
                "--listen", f"127.0.0.1:{self.port}",
                "--log-level", "info",
            ]  # fmt: skip
            if self.args.wrap:  # e.g. a profiler: "py-spy record -o prof.txt -f raw --"
                cmd = shlex.split(self.args.wrap) + cmd
            return cmd, env
        self.healthz_port = free_port()
        # vc-scheduler opens its klog control socket there, removing a stale one: one directory each.
        env["DEBUG_SOCKET_DIR"] = str(self.tmp / "klog-socks")
        cmd = [
            os.environ["VC_SCHEDULER"],
            f"--kubeconfig={self.server.kubeconfig}",
            f"--scheduler-conf={Path(self.args.conf).resolve()}",
            f"--schedule-period={self.args.schedule_period}s",
            "--leader-elect=false",
            "--scheduler-name=volcano",
            f"--listen-address=127.0.0.1:{self.port}",
            "--enable-healthz=true",
            f"--healthz-address=127.0.0.1:{self.healthz_port}",
            "--cache-dumper=false",
            *self.args.vc_arg,
        ]
        return cmd, env

    def start(self) -> None:
        cmd, env = self.command()
        self.started = time.time()
        self.proc = subprocess.Popen(cmd, stdout=subprocess.DEVNULL, stderr=subprocess.PIPE, env=env)
        log = open(self.tmp / f"{self.which}.log", "w")  # noqa: SIM115

        def read() -> None:
            assert self.proc is not None and self.proc.stderr is not None
            for raw in self.proc.stderr:
                line = raw.decode(errors="replace").rstrip("\n")
                self.lines.append((time.time(), line))
                log.write(f"{self.lines[-1][0] - self.started:8.3f} {line}\n")
            log.close()

        threading.Thread(target=read, name=f"{self.which}-stderr", daemon=True).start()

    def dead(self) -> str | None:
        if self.proc is not None and self.proc.poll() is not None:
            tail = "\n".join(line for _, line in self.lines[-15:])
            return f"{self.which} exited with {self.proc.returncode}: {tail}"
        return None

    async def wait_ready(self, timeout: float = 120) -> float:
        """Seconds from start until ready (fumarole: /readyz; vc-scheduler: /healthz)."""
        url = (
            f"http://127.0.0.1:{self.port}/readyz"
            if self.which == "fumarole"
            else f"http://127.0.0.1:{self.healthz_port}/healthz"
        )
        deadline = time.monotonic() + timeout
        async with aiohttp.ClientSession() as s:
            while time.monotonic() < deadline:
                why = self.dead()
                if why:
                    raise RuntimeError(why)
                with contextlib.suppress(aiohttp.ClientError, OSError):
                    async with s.get(url, timeout=aiohttp.ClientTimeout(total=2)) as r:
                        if r.status == 200:
                            return time.time() - self.started
                await asyncio.sleep(0.1)
        raise RuntimeError(f"{self.which} not ready within {timeout}s")

    async def wait_scheduling(self, api: Api, watch: PodWatch, timeout: float) -> None:
        """Until the scheduler has run a cycle: Fumarole's /v1/cycles shows one closed; for vc-scheduler
        (whose /healthz answers before its caches are synced) a probe pod in its own PodGroup is bound.

        Not a probe pod for Fumarole: a pod that arrives while an idle cycle runs waits for the next
        change or a minute (see docs/kubernetes.md, the benchmark's notes), which would make every
        run's start-up a lottery."""
        if self.which == "volcano":
            probe = Gang("probe", "bench-a", 1, 1)
            await create_gang(api, probe, [])
            if not await watch.wait_bound(pod_names([probe]), timeout, self.dead):
                raise RuntimeError(f"vc-scheduler did not bind a probe pod within {timeout}s")
            return
        deadline = time.monotonic() + timeout
        async with aiohttp.ClientSession() as s:
            while time.monotonic() < deadline:
                why = self.dead()
                if why:
                    raise RuntimeError(why)
                async with s.get(f"http://127.0.0.1:{self.port}/v1/cycles?limit=1") as r:
                    items = (await r.json()).get("items") or []
                if items and items[0].get("closed"):
                    return
                await asyncio.sleep(0.05)
        raise RuntimeError(f"fumarole ran no cycle within {timeout}s")

    def cpu_s(self) -> float:
        return proc_cpu_s(self.proc.pid) if self.proc else 0.0

    def rss_mb(self) -> tuple[float, float]:
        return proc_rss_mb(self.proc.pid) if self.proc else (0.0, 0.0)

    def stop(self) -> int | None:
        if self.proc is None or self.proc.poll() is not None:
            return self.proc.returncode if self.proc else None
        self.proc.send_signal(signal.SIGTERM)
        try:
            return self.proc.wait(30)
        except subprocess.TimeoutExpired:
            self.proc.kill()
            return self.proc.wait()


# ---------------------------------------------------------- cluster set-up
async def gather_limited(n: int, jobs: Iterable[Awaitable[Any]]) -> list[Any]:
    """Await `jobs`, at most `n` at a time."""
    sem = asyncio.Semaphore(n)

    async def one(job: Awaitable[Any]) -> Any:
        async with sem:
            return await job

    return list(await asyncio.gather(*(one(j) for j in jobs)))


async def create_nodes(api: Api, names: list[str], cpu: int, conc: int) -> None:
    async def one(name: str) -> None:
        await api.create(node_obj(name))
        await api.patch("Node", name, node_status(cpu), "status")
        # The node lifecycle controller's part: a Ready node loses the not-ready taint that the
        # API server's admission put on it at creation (../shared/k8s/README.md).
        await api.patch("Node", name, {"spec": {"taints": None}})

    await gather_limited(conc, [one(n) for n in names])


async def create_cluster(api: Api, args: argparse.Namespace, nodes: int) -> None:
    for ns in (NS, MINIMAL_NS):
        await api.create({"apiVersion": "v1", "kind": "Namespace", "metadata": {"name": ns}})
    # root and default as Volcano's controller creates them, and the bench's two queues; all Open.
    for name, weight in (("root", 1), ("default", 1), ("bench-a", 1), ("bench-b", 3)):
        await api.create(queue_obj(name, weight))
        await api.patch("Queue", name, {"status": {"state": "Open"}}, "status")
    await create_nodes(api, [f"n{i:05d}" for i in range(nodes)], args.node_cpu, args.create_concurrency)


async def create_gang(api: Api, g: Gang, sent: list[float]) -> None:
    await api.create(podgroup_obj(g))
    sent.append(time.time())
    await gather_limited(
        g.size, [api.create(pod_obj(NS, f"{g.name}-{j}", g.name, g.cpu)) for j in range(g.size)]
    )


async def create_gangs(api: Api, gangs: list[Gang], conc: int) -> tuple[float, float]:
    """Create the gangs (PodGroup, then its pods), `conc` gangs at a time (the connection pool bounds the
    requests in flight to `conc` as well); (first sent, last done)."""
    sent: list[float] = []
    first = time.time()
    await gather_limited(conc, [create_gang(api, g, sent) for g in gangs])
    return first, time.time()


def pod_names(gangs: list[Gang]) -> set[str]:
    return {f"{g.name}-{j}" for g in gangs for j in range(g.size)}


# ---------------------------------------------------------- checks
def quantity(text: str) -> float:
    units = {"m": 1e-3, "Ki": 2**10, "Mi": 2**20, "Gi": 2**30, "Ti": 2**40, "k": 1e3, "M": 1e6, "G": 1e9}
    for u in sorted(units, key=len, reverse=True):
        if text.endswith(u):
            return float(text[: -len(u)]) * units[u]
    return float(text)


async def check(api: Api, watch: PodWatch) -> dict[str, Any]:
    """Gangs whole, nodes within allocatable, no pod bound twice — from what the API holds now."""
    pods = (await api.list("Pod", NS))["items"]
    groups = (await api.list("PodGroup", NS))["items"]
    nodes = {n["metadata"]["name"]: n for n in (await api.list("Node"))["items"]}
    bound_by_group: Counter[str] = Counter()
    used: dict[str, Counter[str]] = {}
    for p in pods:
        node = p["spec"].get("nodeName")
        if not node:
            continue
        group = (p["metadata"].get("annotations") or {}).get("scheduling.k8s.io/group-name", "")
        bound_by_group[group] += 1
        u = used.setdefault(node, Counter())
        u["pods"] += 1
        for c in p["spec"]["containers"]:
            for r, q in ((c.get("resources") or {}).get("requests") or {}).items():
                u[r] += quantity(q)  # type: ignore[assignment]
    partial = [
        g["metadata"]["name"]
        for g in groups
        if 0 < bound_by_group[g["metadata"]["name"]] < int(g["spec"].get("minMember", 1))
    ]
    over = []
    for name, u in used.items():
        alloc = ((nodes.get(name) or {}).get("status") or {}).get("allocatable") or {}
        if any(r in alloc and u[r] > quantity(alloc[r]) + 1e-9 for r in u):
            over.append(name)
    twice = [n for n, p in watch.pods.items() if p.rebinds]
    return {
        "partial_gangs": len(partial),
        "over_capacity_nodes": len(over),
        "bound_twice": len(twice),
        "examples": (partial[:3] + over[:3] + twice[:3]),
    }


# ---------------------------------------------------------- minimal client
async def minimal_client(server: Server, count: int, args: argparse.Namespace) -> dict[str, Any]:
    """`count` bindings by a plain aiohttp client (N connections), first-fit onto fresh nodes."""
    api = Api(server, args.create_concurrency)
    try:
        nodes_needed = max(1, -(-count // args.node_cpu))  # 1-cpu pods
        names = [f"m{i:05d}" for i in range(nodes_needed)]
        await create_nodes(api, names, args.node_cpu, args.create_concurrency)
        pods = [f"m-{i:05d}" for i in range(count)]
        await gather_limited(
            args.create_concurrency,
            [api.create(pod_obj(MINIMAL_NS, p, "", 1, MINIMAL_SCHEDULER)) for p in pods],
        )
    finally:
        await api.close()
    free = {n: args.node_cpu for n in names}
    order = list(names)
    targets = []
    for p in pods:  # first fit
        node = next(n for n in order if free[n] >= 1)
        free[node] -= 1
        targets.append((p, node))
    headers = {"Authorization": f"Bearer {server.token}", "Content-Type": "application/json"}
    base = server.url.rstrip("/") + f"/api/v1/namespaces/{MINIMAL_NS}/pods"
    done: list[float] = []
    failed = 0
    queue: asyncio.Queue[tuple[str, str]] = asyncio.Queue()
    for t in targets:
        queue.put_nowait(t)
    async with aiohttp.ClientSession(
        connector=aiohttp.TCPConnector(limit=args.minimal_connections, ssl=False)
    ) as s:

        async def worker() -> None:
            nonlocal failed
            while not queue.empty():
                pod, node = queue.get_nowait()
                body = msgspec.json.encode(
                    {
                        "apiVersion": "v1",
                        "kind": "Binding",
                        "metadata": {"name": pod},
                        "target": {"apiVersion": "v1", "kind": "Node", "name": node},
                    }
                )
                async with s.post(f"{base}/{pod}/binding", data=body, headers=headers) as r:
                    await r.read()
                    if r.status >= 300:
                        failed += 1
                    else:
                        done.append(time.time())

        start = time.time()
        await asyncio.gather(*(worker() for _ in range(args.minimal_connections)))
        end = time.time()
    first_to_last = (max(done) - min(done)) if len(done) > 1 else None
    return {
        "binds": len(done),
        "failed": failed,
        "connections": args.minimal_connections,
        "first_to_last_bind_s": r3(first_to_last),
        "start_to_last_bind_s": r3(end - start),
        "binds_per_s": r3(len(done) / first_to_last) if first_to_last else None,
        "binds_per_s_from_start": r3(len(done) / (end - start)),
    }


# ---------------------------------------------------------- one run
async def run_once(
    scenario: str, which: str, run_no: int, args: argparse.Namespace, tmp: Path
) -> dict[str, Any]:
    server = Server(tmp).start()
    api = Api(server, args.create_concurrency)
    sched = Scheduler(which, server, tmp, args)
    watch = PodWatch(server, NS)
    out: dict[str, Any] = {"scenario": scenario, "scheduler": which, "run": run_no, "server": server.kind}
    try:
        t_setup = time.time()
        await create_cluster(api, args, args.nodes)
        gangs = make_gangs(args.gangs, args.mix, args.seed)
        if scenario == "churn":
            gangs = churn_gangs(args)
        names = pod_names(gangs)
        out |= {
            "nodes": args.nodes,
            "gangs": len(gangs),
            "pods": len(names),
            "gang_sizes": dict(sorted(Counter(g.size for g in gangs).items())),
        }
        if scenario == "backlog":
            await create_gangs(api, gangs, args.create_concurrency)
        out["setup_s"] = r3(time.time() - t_setup)
        await watch.start()
        api_pid = server.pid()

        async def baseline() -> tuple[Counter[tuple[str, str, str, str, str]], float]:
            """The metrics and API server CPU the run's figures are differences from."""
            before = await api.metrics()
            api.own_writes.clear()
            return before, proc_cpu_s(api_pid) if api_pid else 0.0

        if scenario == "backlog":
            before, api_cpu0 = await baseline()
        say(
            f"{scenario} #{run_no} {which}: {len(names)} pods, {args.nodes} nodes on the {server.kind}; "
            "starting the scheduler"
        )
        sched.start()
        start = sched.started
        if scenario == "backlog":
            cpu0 = 0.0
            first_create = last_create = start
            out["scheduler_ready_s"] = r3(await sched.wait_ready())
        else:
            await sched.wait_ready()
            await sched.wait_scheduling(api, watch, args.timeout)
            out["scheduler_ready_s"] = r3(time.time() - start)
            await asyncio.sleep(args.settle)
            before, api_cpu0 = await baseline()
            cpu0 = sched.cpu_s()
            if scenario == "burst":
                first_create, last_create = await create_gangs(api, gangs, args.create_concurrency)
            else:
                first_create, last_create = await churn(api, gangs, args)
            out["create_s"] = r3(last_create - first_create)
        all_bound = await watch.wait_bound(names, args.timeout, sched.dead)
        cpu = sched.cpu_s() - cpu0
        rss, hwm = sched.rss_mb()
        api_cpu = (proc_cpu_s(api_pid) - api_cpu0) if api_pid else None
        await asyncio.sleep(args.drain)  # late status writes and events still count
        after = await api.metrics()
        seen = [watch.pods[n] for n in names if n in watch.pods and watch.pods[n].node]
        bound = len(seen)
        binds = sorted(p.bound for p in seen)
        exit_code = sched.stop()
        out["scheduler_exit"] = exit_code
        out |= {"bound": bound, "unbound": len(names) - bound, "all_bound": all_bound}
        if binds:
            last_bind, first_bind = binds[-1], binds[0]
            if scenario == "burst":
                out["first_create_to_last_bind_s"] = r3(last_bind - first_create)
                out["last_create_to_last_bind_s"] = r3(last_bind - last_create)
            elif scenario == "backlog":
                out["start_to_last_bind_s"] = r3(last_bind - start)
                out["start_to_first_bind_s"] = r3(first_bind - start)
            out["first_bind_to_last_bind_s"] = r3(last_bind - first_bind)
            span = last_bind - first_bind
            out["binds_per_s"] = r3(bound / span) if span > 0 else None
            out["binds_per_s_from_start"] = r3(
                bound / (last_bind - (first_create if scenario != "backlog" else start))
            )
        if scenario == "churn":
            lat = [p.bound - p.added for p in seen]
            out["latency_s"] = {
                "p50": r3(pct(lat, 0.5)),
                "p99": r3(pct(lat, 0.99)),
                "max": r3(max(lat) if lat else None),
                "count": len(lat),
            }
        writes = scheduler_writes(before, after, api.own_writes)
        total = sum(writes["by_kind"].values())
        out["writes"] = {
            "total": total,
            "per_bound_pod": r3(total / bound) if bound else None,
            "by_kind": writes["by_kind"],
            "per_bound_pod_by_kind": {
                k: r3(v / bound) if bound else None for k, v in writes["by_kind"].items()
            },
            "failed_by_kind": writes["failed_by_kind"],
            "detail": writes["detail"],
        }
        out["cpu_s"] = r3(cpu)
        out["cpu_ms_per_bound_pod"] = r3(1000 * cpu / bound) if bound else None
        out["rss_mb"] = round(rss, 1)
        out["rss_peak_mb"] = round(hwm, 1)
        out["apiserver_cpu_s"] = r3(api_cpu)
        violations = await check(api, watch)
        violations["bound_twice"] = max(violations["bound_twice"], writes["ok_bindings"] - bound)
        violations["total"] = (
            violations["partial_gangs"] + violations["over_capacity_nodes"] + violations["bound_twice"]
        )
        out["violations"] = violations
        if scenario in ("burst", "backlog") and not args.no_minimal and bound:
            say(f"  minimal client: {bound} bindings with {args.minimal_connections} connections")
            m = await minimal_client(server, bound, args)
            out["minimal"] = m
            ours_from_start = out.get("binds_per_s_from_start")
            out["ratio_to_minimal"] = {
                "first_to_last_bind": r3(out["binds_per_s"] / m["binds_per_s"])
                if out.get("binds_per_s") and m["binds_per_s"]
                else None,
                "from_start": r3(ours_from_start / m["binds_per_s_from_start"])
                if ours_from_start and m["binds_per_s_from_start"]
                else None,
            }
        say(
            f"  {scenario} #{run_no} {which}: bound {bound}/{len(names)}, "
            + ", ".join(f"{k}={out[k]}" for k in KEY_FIGURE[scenario] if k in out)
        )
    finally:
        await watch.stop()
        await api.close()
        sched.stop()
        server.stop()
    return out


KEY_FIGURE = {
    "burst": ["last_create_to_last_bind_s", "first_create_to_last_bind_s", "cpu_ms_per_bound_pod"],
    "backlog": ["start_to_last_bind_s", "cpu_ms_per_bound_pod"],
    "churn": ["latency_s", "cpu_ms_per_bound_pod"],
}


# ---------------------------------------------------------- churn
def gangs_for_pods(pods: int, mix: list[tuple[int, float]], seed: int, prefix: str) -> list[Gang]:
    """Gangs with sizes drawn from `mix` (seeded) until exactly `pods` pods (the last one cut to fit)."""
    rng = random.Random(seed)
    sizes: list[int] = []
    while sum(sizes) < pods:
        size = rng.choices([s for s, _ in mix], weights=[w for _, w in mix])[0]
        sizes.append(min(size, pods - sum(sizes)))
    return [Gang(f"{prefix}{i:05d}", "bench-a" if i % 4 else "bench-b", s, 1) for i, s in enumerate(sizes)]


def churn_gangs(args: argparse.Namespace) -> list[Gang]:
    return gangs_for_pods(int(args.churn_rate * args.churn_seconds), args.churn_mix, args.seed + 1, "c")


async def churn(api: Api, gangs: list[Gang], args: argparse.Namespace) -> tuple[float, float]:
    """Create gang k at (pods before it) / rate seconds from the start; (first sent, last done)."""
    start = time.time()
    created = 0
    tasks = []
    sent: list[float] = []
    for g in gangs:
        delay = start + created / args.churn_rate - time.time()
        if delay > 0:
            await asyncio.sleep(delay)
        tasks.append(asyncio.create_task(create_gang(api, g, sent)))
        created += g.size
    await asyncio.gather(*tasks)
    return start, time.time()


# ---------------------------------------------------------- scale
async def run_scale(args: argparse.Namespace, tmp: Path) -> dict[str, Any]:
    """Many nodes and pods (most bound already): start → listed → first cycle, cycle times, RSS."""
    server = Server(tmp).start()
    api = Api(server, args.create_concurrency)
    sched = Scheduler("fumarole", server, tmp, args)
    out: dict[str, Any] = {"scenario": "scale", "scheduler": "fumarole", "server": server.kind}
    try:
        t0 = time.time()
        await create_cluster(api, args, args.scale_nodes)
        pending = max(0, int(args.scale_pods * args.scale_pending))
        prebound = args.scale_pods - pending
        nodes = [f"n{i:05d}" for i in range(args.scale_nodes)]
        say(
            f"scale: {args.scale_nodes} nodes created in {time.time() - t0:.1f}s; "
            f"{prebound} bound and {pending} pending pods"
        )
        free = dict.fromkeys(nodes, args.node_cpu)
        placements = []
        it = iter(nodes)
        cur = next(it)
        for i in range(prebound):  # first fit, as a previous scheduler left them
            while free[cur] < 1:
                cur = next(it)
            free[cur] -= 1
            placements.append((f"b{i:06d}", cur))
        await gather_limited(
            args.create_concurrency,
            [api.create(pod_obj(NS, p, "", 1, node=n)) for p, n in placements],
        )
        gangs = gangs_for_pods(pending, args.mix, args.seed, "s")
        await create_gangs(api, gangs, args.create_concurrency)
        names = pod_names(gangs)
        out |= {
            "nodes": args.scale_nodes,
            "pods": prebound + len(names),
            "pods_prebound": prebound,
            "pods_pending": len(names),
            "setup_s": r3(time.time() - t0),
        }
        watch = PodWatch(server, NS)
        await watch.start()
        say("scale: starting fumarole")
        sched.start()
        await sched.wait_ready(timeout=args.timeout)
        listed = next((t for t, line in sched.lines if "cluster listed" in line), None)
        first_cycle_at = None
        cycles: list[dict[str, Any]] = []
        async with aiohttp.ClientSession() as s:
            deadline = time.monotonic() + args.timeout
            while first_cycle_at is None and time.monotonic() < deadline:
                async with s.get(f"http://127.0.0.1:{sched.port}/v1/cycles?limit=1") as r:
                    if (await r.json()).get("items"):
                        first_cycle_at = time.time()
                        break
                await asyncio.sleep(0.05)
            all_bound = await watch.wait_bound(names, args.timeout, sched.dead)
            bound_at = time.time()
            # Steady state: a trickle of single pods for --scale-steady seconds.
            trickle = [
                Gang(f"t{i:05d}", "bench-a", 1, 1) for i in range(int(args.scale_trickle * args.scale_steady))
            ]
            steady_from = time.time()
            if trickle:
                await churn(api, trickle, argparse.Namespace(churn_rate=args.scale_trickle))
            await watch.wait_bound(pod_names(trickle), args.timeout, sched.dead)
            steady_to = time.time()
            since = 0
            while True:
                async with s.get(f"http://127.0.0.1:{sched.port}/v1/cycles?since={since}&limit=500") as r:
                    page = await r.json()
                cycles += page.get("items") or []
                if not page.get("items") or not page.get("next_since"):
                    break
                since = page["next_since"]
        rss, hwm = sched.rss_mb()
        durations = [c["closed"]["duration_s"] for c in cycles if c.get("closed")]
        steady = durations[1:]
        out |= {
            "start_to_listed_s": r3(listed - sched.started) if listed else None,
            "listed_to_first_cycle_s": r3(first_cycle_at - listed) if listed and first_cycle_at else None,
            "start_to_first_cycle_s": r3(first_cycle_at - sched.started) if first_cycle_at else None,
            "first_cycle_duration_s": r3(durations[0]) if durations else None,
            "start_to_pending_bound_s": r3(bound_at - sched.started),
            "all_bound": all_bound,
            "cycles": len(durations),
            "steady_cycle_s": {
                "p50": r3(pct(steady, 0.5)),
                "p90": r3(pct(steady, 0.9)),
                "max": r3(max(steady) if steady else None),
            },
            "steady_seconds": r3(steady_to - steady_from),
            "rss_mb": round(rss, 1),
            "rss_peak_mb": round(hwm, 1),
            "cpu_s": r3(sched.cpu_s()),
        }
        violations = await check(api, watch)
        violations["total"] = (
            violations["partial_gangs"] + violations["over_capacity_nodes"] + violations["bound_twice"]
        )
        out["violations"] = violations
        await watch.stop()
    finally:
        await api.close()
        sched.stop()
        server.stop()
    return out


# ---------------------------------------------------------- summary
RATIO_KEYS = {
    "burst": ["last_create_to_last_bind_s", "first_create_to_last_bind_s", "cpu_ms_per_bound_pod"],
    "backlog": ["start_to_last_bind_s", "cpu_ms_per_bound_pod"],
    "churn": ["latency_s.p99", "latency_s.p50", "cpu_ms_per_bound_pod"],
}
MEDIAN_KEYS = {
    "burst": [
        *RATIO_KEYS["burst"],
        "writes.per_bound_pod",
        "ratio_to_minimal.first_to_last_bind",
        "ratio_to_minimal.from_start",
        "rss_peak_mb",
    ],
    "backlog": [
        *RATIO_KEYS["backlog"],
        "writes.per_bound_pod",
        "ratio_to_minimal.first_to_last_bind",
        "ratio_to_minimal.from_start",
        "rss_peak_mb",
    ],
    "churn": [*RATIO_KEYS["churn"], "writes.per_bound_pod", "rss_peak_mb"],
}


def dig(d: dict[str, Any], key: str) -> Any:
    value: Any = d
    for part in key.split("."):
        if not isinstance(value, dict):
            return None
        value = value.get(part)
    return value


def summarize(scenario: str, runs: list[dict[str, Any]]) -> dict[str, Any]:
    out: dict[str, Any] = {}
    for which in ("fumarole", "volcano"):
        mine = [r for r in runs if r["scheduler"] == which]
        if not mine:
            continue
        med = {}
        for key in MEDIAN_KEYS[scenario]:
            vals = [v for r in mine if isinstance(v := dig(r, key), int | float)]
            med[key] = r3(statistics.median(vals)) if vals else None
        out[which] = {"runs": len(mine), "median": med}
    if "fumarole" in out and "volcano" in out:
        ratios = {}
        for key in RATIO_KEYS[scenario]:
            f, v = out["fumarole"]["median"].get(key), out["volcano"]["median"].get(key)
            ratios[key] = r3(f / v) if f is not None and v else None
        out["fumarole_over_volcano"] = ratios
    return out


# ---------------------------------------------------------- main
def parse_args(argv: list[str] | None = None) -> argparse.Namespace:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument(
        "--scenarios", default="burst,backlog,churn", help="comma-separated: burst, backlog, churn"
    )
    ap.add_argument("--repeat", type=int, default=1, help="runs per scheduler and scenario (alternating)")
    ap.add_argument("--nodes", type=int, default=100)
    ap.add_argument("--node-cpu", type=int, default=32)
    ap.add_argument("--gangs", type=int, default=300)
    ap.add_argument(
        "--mix", default="1:0.25,4:0.35,8:0.25,10:0.15", help="gang sizes SIZE:WEIGHT,… (1-cpu pods)"
    )
    ap.add_argument("--seed", type=int, default=1)
    ap.add_argument("--churn-rate", type=float, default=20.0, help="pods per second")
    ap.add_argument("--churn-seconds", type=float, default=60.0)
    ap.add_argument("--churn-mix", default="", help="gang sizes for churn (default: --mix)")
    ap.add_argument("--schedule-period", type=float, default=1.0)
    ap.add_argument("--conf", default=str(CONF), help="scheduler configuration for both schedulers")
    ap.add_argument("--create-concurrency", type=int, default=16, help="the bench's own connections")
    ap.add_argument("--minimal-connections", type=int, default=16)
    ap.add_argument("--no-minimal", action="store_true", help="skip the minimal client")
    ap.add_argument(
        "--settle", type=float, default=1.0, help="seconds after the scheduler is ready before creating"
    )
    ap.add_argument(
        "--drain", type=float, default=2.0, help="seconds after the last bind before reading /metrics"
    )
    ap.add_argument("--timeout", type=float, default=600.0, help="seconds to wait for every pod to be bound")
    ap.add_argument(
        "--fumarole-env", action="append", default=[], metavar="FUMAROLE_X=V", help="extra daemon settings"
    )
    ap.add_argument("--vc-arg", action="append", default=[], help="extra vc-scheduler flag")
    ap.add_argument("--no-volcano", action="store_true", help="ignore VC_SCHEDULER")
    ap.add_argument("--scale", action="store_true", help="run the scale scenario (instead of --scenarios)")
    ap.add_argument("--scale-nodes", type=int, default=2000)
    ap.add_argument("--scale-pods", type=int, default=20000)
    ap.add_argument(
        "--scale-pending", type=float, default=0.05, help="fraction of the scale pods pending at start"
    )
    ap.add_argument(
        "--scale-steady", type=float, default=30.0, help="seconds of trickle after the first binds"
    )
    ap.add_argument(
        "--scale-trickle", type=float, default=5.0, help="pods per second during the steady phase"
    )
    ap.add_argument("--keep", action="store_true", help="keep the temporary directory (logs)")
    ap.add_argument(
        "--wrap",
        default="",
        metavar="CMD",
        help="run fumarole under CMD (a profiler: 'py-spy record -o prof.txt -f raw --'; it must pass "
        "SIGTERM on to fumarole)",
    )
    args = ap.parse_args(argv)
    args.mix = parse_mix(args.mix)
    args.churn_mix = parse_mix(args.churn_mix) if args.churn_mix else args.mix
    args.scenario_list = [s for s in args.scenarios.split(",") if s]
    for s in args.scenario_list:
        if s not in KEY_FIGURE:
            raise SystemExit(f"bench: --scenarios: unknown scenario {s!r} (burst, backlog, churn)")
    if any(not kv.startswith("FUMAROLE_") or "=" not in kv for kv in args.fumarole_env):
        raise SystemExit("bench: --fumarole-env takes FUMAROLE_NAME=VALUE")
    return args


def git_commit() -> str:
    r = subprocess.run(
        ["git", "-C", str(ROOT), "rev-parse", "--short", "HEAD"], capture_output=True, text=True
    )
    return r.stdout.strip()


async def amain(args: argparse.Namespace) -> dict[str, Any]:
    vc = os.environ.get("VC_SCHEDULER") if not args.no_volcano else None
    if vc and not os.environ.get("KUBE_APISERVER"):
        raise SystemExit(
            "bench: VC_SCHEDULER needs a real API server (KUBE_APISERVER): "
            "vc-scheduler's informers need more than the fake serves"
        )
    if vc and not os.access(vc, os.X_OK):
        raise SystemExit(f"bench: VC_SCHEDULER={vc}: not an executable file")
    schedulers = ["fumarole", "volcano"] if vc else ["fumarole"]
    base = Path(tempfile.mkdtemp(prefix="fumarole-bench-k8s-"))
    result: dict[str, Any] = {
        "server": "kube-apiserver " + os.environ["KUBE_APISERVER"]
        if os.environ.get("KUBE_APISERVER")
        else "fake (tests/k8s/fake_apiserver.py, own process)",
        "fumarole_commit": git_commit(),
        "vc_scheduler": vc,
        "conf": str(args.conf),
        "settings": {k: v for k, v in vars(args).items() if k not in ("scenario_list",) and not callable(v)},
        "notes": [
            "no kubelet: bound pods stay in phase Pending (nothing marks them Running)",
            "times are wall-clock seconds seen by the bench's own pod watch; "
            "CPU is the scheduler process's user+sys",
            "ratios to Volcano use medians of this invocation's alternating runs only",
        ],
        "scenarios": {},
    }
    violations = 0
    try:
        if args.scale:
            r = await run_scale(args, base / "scale")
            result["scenarios"]["scale"] = {"runs": [r]}
            violations += r["violations"]["total"]
        else:
            for scenario in args.scenario_list:
                runs = []
                for i in range(args.repeat):
                    for which in schedulers:
                        r = await run_once(scenario, which, i + 1, args, base / f"{scenario}-{which}-{i + 1}")
                        runs.append(r)
                        violations += r["violations"]["total"]
                result["scenarios"][scenario] = {"runs": runs, "summary": summarize(scenario, runs)}
    finally:
        if args.keep:
            say(f"logs kept in {base}")
        else:
            subprocess.run(["rm", "-rf", str(base)], check=False)
    result["violations"] = violations
    return result


def main(argv: list[str] | None = None) -> None:
    args = parse_args(argv)
    result = asyncio.run(amain(args))
    print(json.dumps(result, indent=1, default=str))


if __name__ == "__main__":
    main()
