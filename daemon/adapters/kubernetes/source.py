"""The Kubernetes source: list, then watch from the list's resourceVersion, and turn changes into events.

For each kind of `objects.KINDS` the source lists the collection (across namespaces; every kind
at once, in pages, listing.py) and then watches it from the list's resourceVersion with bookmarks
(`allowWatchBookmarks`, which move the resume point without a change).  A watch that ends (server
timeout, a restarted server, a broken connection) reconnects from the last resourceVersion seen,
with backoff on errors; a `410 Gone` (the resourceVersion was compacted: an ERROR event or a 410
answer) relists that kind.

Every listing is reconciled with what the log already holds (`known`: each logged object's uid and
resourceVersion, rebuilt from the log on a restart through `resume`): objects that are new or
changed are upserted, objects that vanished meanwhile are deleted, and unchanged objects are not
logged again.  The very first listing into an empty log is framed by `ResyncStarted` /
`ResyncCompleted` naming every kind.  Each event carries an idempotency key (uid and
resourceVersion, see `objects`), so a change the log already has is never folded twice.

Optional kinds (HyperNodes, topology.volcano.sh/v1alpha1: Volcano's network-topology CRD, which a
cluster may not have installed): a list or watch answered `404` means the CRD is not installed,
and the adapter goes on without that kind -- one info line, the kind reconciled as empty (any
HyperNode the log holds is deleted, as when the CRD is removed), no watch -- and lists it again
every `absent_recheck` seconds (default 600), so a CRD installed later is picked up within ten
minutes without a restart and without a retry storm; one info line again when it appears.  A `403`
on an optional kind (RBAC without hypernodes) is handled the same way, with a warning naming the
missing grant.
"""

from __future__ import annotations

import asyncio
import json
import logging
import time
from collections import Counter
from collections.abc import Callable, Iterable
from typing import Any

import aiohttp
import anyio
import msgspec

from fumarole.daemon.adapters.base import RESYNC_KINDS, Submit
from fumarole.daemon.adapters.kubernetes.client import (
    TRANSIENT_CODES,
    KubeApi,
    KubeTransientError,
    message_of,
)
from fumarole.daemon.adapters.kubernetes.listing import (
    PAGE_SIZE,
    ListFailed,
    decode_watch_frame,
    list_collection,
)
from fumarole.daemon.adapters.kubernetes.objects import (
    _DELETED,
    KINDS,
    Kind,
    ObjectKey,
    Version,
    delete_event,
    keeps,
    object_key,
    upsert_event,
    version_of,
)
from fumarole.store.events import ObservedEvent, ResyncCompleted, ResyncStarted
from fumarole.store.events.base import EventBase

log = logging.getLogger("fumarole.kubernetes.source")

SOURCE = "kubernetes"


def wall_ms() -> int:
    return time.time_ns() // 1_000_000


def _newer(a: str, b: str) -> bool:
    """Whether resourceVersion `a` is newer than `b` (compared as integers, as etcd's revisions are)."""
    return a.isdigit() and b.isdigit() and int(a) > int(b)


class _Expired(Exception):
    """The watch's resourceVersion is too old (410 Gone): relist."""


class KubeSource:
    def __init__(
        self,
        api: KubeApi,
        scheduler_names: Iterable[str],
        *,
        clock: Callable[[], int] = wall_ms,
        watch_timeout: int = 300,
        backoff_max: float = 5.0,
        page_size: int = PAGE_SIZE,
        absent_recheck: float = 600.0,
    ) -> None:
        self.api = api
        self.scheduler_names = tuple(scheduler_names)
        self.clock = clock
        self.watch_timeout = watch_timeout
        self.backoff_max = backoff_max
        self.page_size = page_size
        self.known: dict[ObjectKey, Version] = {}
        self.listed_before = False
        self.resource_versions: dict[str, str] = {}
        self.relists: Counter[str] = Counter()
        self.reconnects: Counter[str] = Counter()
        # Optional kinds the server does not serve (404) or refuses (403): kind name -> status.
        self.absent: dict[str, int] = {}
        self.absent_recheck = absent_recheck

    # ------------------------------------------------------------------ restart
    def resume(self, facts: Iterable[EventBase]) -> None:
        """Rebuild `known` from the observed events of the log, in log order."""
        kind_of_deleted = {cls: name for name, cls in _DELETED.items()}
        for ev in facts:
            manifest = getattr(ev, "manifest", None)
            if isinstance(manifest, dict):
                kind = next((k for k in KINDS if k.name == manifest.get("kind")), None)
                if kind is not None:
                    self.known[object_key(kind, manifest)] = version_of(manifest)
            elif type(ev) in kind_of_deleted:
                name = kind_of_deleted[type(ev)]
                self.known.pop((name, getattr(ev, "namespace", ""), ev.name), None)  # type: ignore[attr-defined]
            elif isinstance(ev, ResyncCompleted) and ev.source == SOURCE:
                self.listed_before = True

    # ------------------------------------------------------------------ listing
    async def fetch_kind(self, kind: Kind) -> tuple[list[dict[str, Any]], str]:
        """Every object of one kind and the list's resourceVersion (paged, listing.py)."""

        async def fetch(query: dict[str, Any]) -> tuple[int, bytes]:
            return await self.api.request_bytes("GET", kind.path, query=query, timeout=300)

        try:
            listed = await list_collection(kind.name, fetch, self.page_size)
        except ListFailed as e:
            if kind.optional and e.status in (403, 404):
                self._absent(kind, e.status, message_of(e.body))
                return [], ""
            raise KubeTransientError(f"list {kind.plural}: {e.status} {message_of(e.body)}") from None
        if self.absent.pop(kind.name, None) is not None:
            log.info("%s (%s) are served now; watching them", kind.plural, kind.api_version)
        return listed

    def _absent(self, kind: Kind, status: int, message: str) -> None:
        """Note an optional kind as not served (one log line per change of answer)."""
        if self.absent.get(kind.name) == status:
            return
        self.absent[kind.name] = status
        again = f"listing them again every {self.absent_recheck:g}s"
        if status == 404:
            log.info(
                "%s (%s) are not served (404: the %s CRD is not installed); going on without them, %s",
                kind.plural,
                kind.api_version,
                kind.name,
                again,
            )
        else:
            log.warning(
                "%s (%s): listing refused (403 %s); grant get/list/watch on %s.%s (deploy/kubernetes' "
                "ClusterRole); going on without them, %s",
                kind.plural,
                kind.api_version,
                message,
                kind.plural,
                kind.api_version.split("/")[0],
                again,
            )

    async def list_kind(self, kind: Kind) -> tuple[list[ObservedEvent], list[str | None]]:
        """List one kind, reconcile with `known`, remember the list's resourceVersion."""
        return self._reconcile(kind, *await self.fetch_kind(kind))

    def _reconcile(
        self, kind: Kind, items: list[dict[str, Any]], resource_version: str
    ) -> tuple[list[ObservedEvent], list[str | None]]:
        at = self.clock()
        events: list[ObservedEvent] = []
        keys: list[str | None] = []
        seen: set[ObjectKey] = set()
        for obj in items:
            if not keeps(kind, obj, self.scheduler_names):
                continue
            key = object_key(kind, obj)
            seen.add(key)
            ver = version_of(obj)
            old = self.known.get(key)
            if old == ver or (old is not None and old[0] == ver[0] and _newer(old[1], ver[1])):
                continue  # unchanged, or a watch running meanwhile already logged a newer version
            self.known[key] = ver
            ev, idem = upsert_event(kind, obj, at)
            events.append(ev)
            keys.append(idem)
        for key in sorted(k for k in self.known if k[0] == kind.name and k not in seen):
            uid, _ = self.known.pop(key)
            ev, idem = delete_event(key, uid, at)
            events.append(ev)
            keys.append(idem)
        self.resource_versions[kind.name] = str(resource_version or "")
        return events, keys

    async def list_all(self) -> tuple[list[ObservedEvent], list[str | None]]:
        """Every kind listed and reconciled; framed by Resync markers when the log has no listing yet.

        The kinds are fetched at once (the server serves the pods while the nodes are decoded)
        and reconciled in `KINDS` order, so the events come out as when listed one by one."""
        fetched = await asyncio.gather(*(self.fetch_kind(kind) for kind in KINDS))
        events: list[ObservedEvent] = []
        keys: list[str | None] = []
        for kind, (items, resource_version) in zip(KINDS, fetched, strict=True):
            evs, ks = self._reconcile(kind, items, resource_version)
            events += evs
            keys += ks
        if not self.listed_before:
            at = self.clock()
            events = [
                ResyncStarted(source=SOURCE, kinds=RESYNC_KINDS, at_ms=at),
                *events,
                ResyncCompleted(source=SOURCE, kinds=RESYNC_KINDS, at_ms=at),
            ]
            keys = [None, *keys, None]
            self.listed_before = True
        return events, keys

    # ------------------------------------------------------------------ watching
    async def run(self, submit: Submit) -> None:
        """Watch every kind until cancelled (call after `list_all` was submitted)."""
        async with anyio.create_task_group() as tg:
            for kind in KINDS:
                if kind.name not in self.absent:
                    tg.start_soon(self.watch_kind, kind, submit)

    async def watch_kind(self, kind: Kind, submit: Submit) -> None:
        delay = 0.2
        while True:
            if kind.name in self.absent:  # an optional kind not served: list it again, rarely
                await anyio.sleep(self.absent_recheck)
                try:
                    events, keys = await self.list_kind(kind)
                except KubeTransientError as e:
                    log.warning("relist %s failed: %s", kind.plural, e)
                    continue
                if events:
                    await submit(events, keys)
                continue
            try:
                await self._watch_once(kind, submit)
                delay = 0.2
                self.reconnects[kind.name] += 1
            except _Expired as e:
                self.relists[kind.name] += 1
                if e.args:
                    log.info("watch %s: answered %s; relisting", kind.plural, e.args[0])
                else:
                    log.info(
                        "watch %s: resourceVersion %s expired (410 Gone); relisting",
                        kind.plural,
                        self.resource_versions.get(kind.name),
                    )
                try:
                    events, keys = await self.list_kind(kind)
                except KubeTransientError as e:
                    log.warning("relist %s failed: %s; retrying in %.1fs", kind.plural, e, delay)
                    await anyio.sleep(delay)
                    delay = min(delay * 2, self.backoff_max)
                    self.resource_versions[kind.name] = "0"  # force 410 handling again
                    continue
                if events:
                    await submit(events, keys)
            except KubeTransientError as e:
                log.warning("watch %s: %s; reconnecting in %.1fs", kind.plural, e, delay)
                await anyio.sleep(delay)
                delay = min(delay * 2, self.backoff_max)
                self.reconnects[kind.name] += 1

    async def _watch_once(self, kind: Kind, submit: Submit) -> None:
        rv = self.resource_versions.get(kind.name, "")
        if rv in ("", "0"):
            raise _Expired
        query = {
            "watch": True,
            "resourceVersion": rv,
            "allowWatchBookmarks": True,
            "timeoutSeconds": self.watch_timeout,
        }
        resp = await self.api.open_watch(kind.path, query)
        try:
            if resp.status == 410:
                raise _Expired
            if kind.optional and resp.status in (403, 404):
                raise _Expired(resp.status)  # e.g. the CRD was removed: the relisting finds it absent
            if resp.status != 200:
                raw = await resp.read()
                try:
                    body = json.loads(raw)
                except ValueError:
                    body = None
                why = f"{resp.status} {message_of(body)}"
                if resp.status not in TRANSIENT_CODES:
                    log.error("watch %s refused: %s", kind.plural, why)
                raise KubeTransientError(why)
            buf = b""
            try:
                async for chunk in resp.content.iter_any():
                    buf += chunk
                    lines = buf.split(b"\n")
                    buf = lines.pop()
                    events: list[ObservedEvent] = []
                    keys: list[str | None] = []
                    last_rv = ""
                    for line in lines:
                        if not line.strip():
                            continue
                        try:
                            type_, obj = decode_watch_frame(kind.name, line)
                        except msgspec.DecodeError as e:
                            raise KubeTransientError(f"watch {kind.plural}: not a watch event: {e}") from None
                        last_rv = self._change(kind, type_, obj, events, keys) or last_rv
                    if events:
                        await submit(events, keys)
                    if last_rv:
                        self.resource_versions[kind.name] = last_rv
            except (OSError, TimeoutError, aiohttp.ClientError) as e:
                raise KubeTransientError(f"stream broken: {type(e).__name__}: {e}") from None
        finally:
            resp.release()

    def _change(
        self, kind: Kind, type_: str, obj: Any, events: list[ObservedEvent], keys: list[str | None]
    ) -> str:
        """Fold one watch event into `events`; returns the resourceVersion it carries."""
        if not isinstance(obj, dict):
            obj = {}
        if type_ == "ERROR":
            if obj.get("code") == 410:
                raise _Expired
            raise KubeTransientError(f"watch error {obj.get('code')}: {message_of(obj)}")
        rv = str((obj.get("metadata") or {}).get("resourceVersion") or "")
        if type_ == "BOOKMARK":
            return rv
        key = object_key(kind, obj)
        ver = version_of(obj)
        at = self.clock()
        if type_ in ("ADDED", "MODIFIED"):
            if not keeps(kind, obj, self.scheduler_names) or self.known.get(key) == ver:
                return rv
            self.known[key] = ver
            ev, idem = upsert_event(kind, obj, at)
        elif type_ == "DELETED":
            old = self.known.get(key)
            if old is None or (old[0] and ver[0] and old[0] != ver[0]):
                return rv
            del self.known[key]
            ev, idem = delete_event(key, ver[0] or old[0], at)
        else:
            return rv
        events.append(ev)
        keys.append(idem)
        return rv
