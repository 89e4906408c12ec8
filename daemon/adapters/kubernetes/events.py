"""Kubernetes core/v1 Events as client-go's legacy recorder writes them: correlated, queued, off binds' path.

Owns the Events the Kubernetes sink records (`Scheduled`, `FailedScheduling`, `Evict`): their body,
their name, and when each one becomes a create, a patch or nothing.  Follows client-go v0.36.1, the
version Volcano ed72c7c uses (its go.mod), in k8s.io/client-go/tools/record:

- `EventCorrelator` is events_cache.go's `EventCorrelator`, pure (an injected clock in Unix
  nanoseconds, no I/O), in its three steps and their order: the `EventAggregator` (events alike but
  for their message — `EventAggregatorByReasonFunc`'s key: source, involved object, type, reason,
  reporting controller and instance — more than `defaultAggregateMaxEvents` (10) distinct messages
  within `defaultAggregateIntervalInSeconds` (600 s, counted from the last of them) become one event
  "(combined from similar events): MESSAGE"); the `eventLogger` (an event seen before under the
  same `getEventKey` becomes a strategic merge patch of the existing Event's count, lastTimestamp and
  message, exactly the diff `eventObserve` computes); the `EventSourceObjectSpamFilter` (a token
  bucket per `getSpamKey` — source, involved object, type — of burst 25 refilled at 1/300 per
  second, the float32 rate golang.org/x/time/rate is given; an event without a token is skipped).
  Each of the three keeps an LRU of `maxLruCacheEntries` (4096) entries, as k8s.io/utils/lru.
- `EventRecorder` is event.go's recorder and broadcaster: `record` never blocks (a queue of
  `maxQueuedEvents` (1000) that drops what does not fit and counts it, as `watch.DropIfChannelFull`
  does), `run` writes what the correlator decides as `recordToSink`/`recordEvent` do: a create
  answered AlreadyExists is done, a patch whose Event is gone (404) becomes a create, the state the
  server answers with updates the correlator (`UpdateState`).  Retrying transient failures is the
  caller's `send` (the sink's shared in-flight limiter), not ours.

The body is what Volcano's scheduler writes: its recorder comes from `record.NewBroadcaster()` and
`NewRecorder(scheme, EventSource{Component: GenerateComponentName(schedulerNames)})`
(pkg/scheduler/cache/cache.go), so `source.component` is the scheduler name ("volcano"), there is no
`source.host`, `reportingComponent` is the component and `reportingInstance` is the (empty) host, as
`generateEvent` sets them; `involvedObject` is what `reference.GetReference` gives (kind, namespace,
name, uid, apiVersion, resourceVersion; empty fields left out); keys in the order Go's encoder writes
them, timestamps to the second, `eventTime: null`.  An aggregate event, as in client-go, carries no
reporting fields.

Departures, each deliberate:
- Names.  client-go names an Event `NAME.%x` of the Unix nanoseconds at `record` (a UUID when that
  is not a valid DNS subdomain).  Given a `dedup_token` (the sink passes the decision's log seq and
  the pod's uid), the name is instead `NAME.` and 16 hex digits of a SHA-256 of (involved uid,
  reason, token): a decision forwarded again after a crash writes the same name, the server answers
  409 AlreadyExists, and that counts as done — no second `Scheduled` Event.  An aggregate event
  made from a tokened event keeps that name too.  Without a token, the nanoseconds never repeat for
  one recorder (a coarse clock is nudged forward by 1 ns), where client-go would lose the second
  event to AlreadyExists.
- `EventAggregator` trims its set of messages with Go's `PopAny` (a random map element); here the
  oldest message goes, so a run is reproducible.
- Writes run concurrently (`concurrency` at a time; client-go writes one at a time), so two writes
  of one Event are chained: a patch never overtakes its create, and a server answer older than what
  the correlator has counted since does not rewind its count.
"""

from __future__ import annotations

import calendar
import collections
import datetime
import functools
import hashlib
import logging
import re
import struct
import time
import uuid
from collections.abc import Awaitable, Callable, Mapping
from dataclasses import dataclass, replace
from typing import Any, Generic, Literal, TypeVar

import aiohttp
import anyio

from fumarole.daemon.adapters.kubernetes.client import KubeTransientError, message_of

log = logging.getLogger("fumarole.kubernetes.events")

MAX_LRU_CACHE_ENTRIES = 4096  # events_cache.go maxLruCacheEntries
AGGREGATE_MAX_EVENTS = 10  # defaultAggregateMaxEvents
AGGREGATE_INTERVAL_SECONDS = 600  # defaultAggregateIntervalInSeconds
SPAM_BURST = 25  # defaultSpamBurst
SPAM_QPS: float = struct.unpack("f", struct.pack("f", 1.0 / 300.0))[0]  # defaultSpamQPS, a float32 in Go
MAX_QUEUED_EVENTS = 1000  # event.go maxQueuedEvents
AGGREGATE_PREFIX = "(combined from similar events): "  # EventAggregatorByReasonMessageFunc
EVENT_TYPES = ("Normal", "Warning")  # util.ValidateEventType
JSON = "application/json"
SMP = "application/strategic-merge-patch+json"
NANOS = 1_000_000_000

Send = Callable[[str, str, Any, str], Awaitable[tuple[int, Any]]]
"""`send(method, path, body, content_type) -> (status, decoded body)`; status 0 when it never got through."""

_DNS_SUBDOMAIN = re.compile(r"[a-z0-9]([-a-z0-9]*[a-z0-9])?(\.[a-z0-9]([-a-z0-9]*[a-z0-9])?)*")


# ---------------------------------------------------------------------------------------- the objects
@dataclass(frozen=True, slots=True)
class ObjectRef:
    """A core/v1 ObjectReference as client-go's reference.GetReference makes one."""

    kind: str
    namespace: str
    name: str
    uid: str = ""
    api_version: str = "v1"
    resource_version: str = ""
    field_path: str = ""

    @classmethod
    def pod(cls, namespace: str, name: str, uid: str = "", resource_version: str = "") -> ObjectRef:
        return cls("Pod", namespace, name, uid, "v1", resource_version)

    @classmethod
    def of(cls, obj: Mapping[str, Any], *, kind: str = "", api_version: str = "") -> ObjectRef:
        """The reference to an object as the API returns it (`kind`/`api_version` when it has none)."""
        meta = obj.get("metadata") or {}
        return cls(
            kind or str(obj.get("kind") or ""),
            str(meta.get("namespace") or ""),
            str(meta.get("name") or ""),
            str(meta.get("uid") or ""),
            api_version or str(obj.get("apiVersion") or ""),
            str(meta.get("resourceVersion") or ""),
        )

    def to_json(self) -> dict[str, Any]:
        fields = (
            ("kind", self.kind),
            ("namespace", self.namespace),
            ("name", self.name),
            ("uid", self.uid),
            ("apiVersion", self.api_version),
            ("resourceVersion", self.resource_version),
            ("fieldPath", self.field_path),
        )
        return {k: v for k, v in fields if v}  # every field is omitempty

    @classmethod
    def from_json(cls, data: Mapping[str, Any]) -> ObjectRef:
        return cls(
            str(data.get("kind") or ""),
            str(data.get("namespace") or ""),
            str(data.get("name") or ""),
            str(data.get("uid") or ""),
            str(data.get("apiVersion") or ""),
            str(data.get("resourceVersion") or ""),
            str(data.get("fieldPath") or ""),
        )


@dataclass(frozen=True, slots=True)
class CoreEvent:
    """A core/v1 Event; times in Unix nanoseconds (written to the second, as metav1.Time)."""

    name: str
    namespace: str
    involved: ObjectRef
    reason: str
    message: str
    type: str
    first_ns: int
    last_ns: int
    count: int = 1
    source_component: str = "volcano"
    source_host: str = ""
    reporting_controller: str = ""
    reporting_instance: str = ""
    resource_version: str = ""
    dedup_token: str = ""  # not written: see the module notes on names

    def to_json(self) -> dict[str, Any]:
        """The body as Go's encoder writes a v1.Event (field order, omitempty, null times)."""
        meta: dict[str, Any] = {"name": self.name, "namespace": self.namespace}
        if self.resource_version:
            meta["resourceVersion"] = self.resource_version
        source = {k: v for k, v in (("component", self.source_component), ("host", self.source_host)) if v}
        body: dict[str, Any] = {
            "kind": "Event",
            "apiVersion": "v1",
            "metadata": meta,
            "involvedObject": self.involved.to_json(),
        }
        if self.reason:
            body["reason"] = self.reason
        if self.message:
            body["message"] = self.message
        body["source"] = source
        body["firstTimestamp"] = rfc3339(self.first_ns)
        body["lastTimestamp"] = rfc3339(self.last_ns)
        if self.count:
            body["count"] = self.count
        if self.type:
            body["type"] = self.type
        body["eventTime"] = None
        body["reportingComponent"] = self.reporting_controller
        body["reportingInstance"] = self.reporting_instance
        return body

    @classmethod
    def from_json(cls, data: Mapping[str, Any]) -> CoreEvent:
        """An Event as the server answers with one (for the correlator's state)."""
        meta = data.get("metadata") or {}
        source = data.get("source") or {}
        return cls(
            name=str(meta.get("name") or ""),
            namespace=str(meta.get("namespace") or ""),
            involved=ObjectRef.from_json(data.get("involvedObject") or {}),
            reason=str(data.get("reason") or ""),
            message=str(data.get("message") or ""),
            type=str(data.get("type") or ""),
            first_ns=parse_rfc3339(data.get("firstTimestamp")),
            last_ns=parse_rfc3339(data.get("lastTimestamp")),
            count=int(data.get("count") or 0),
            source_component=str(source.get("component") or ""),
            source_host=str(source.get("host") or ""),
            reporting_controller=str(data.get("reportingComponent") or ""),
            reporting_instance=str(data.get("reportingInstance") or ""),
            resource_version=str(meta.get("resourceVersion") or ""),
        )


def rfc3339(ns: int) -> str | None:
    """metav1.Time's JSON: RFC 3339 to the second in UTC; null for the zero time."""
    if ns <= 0:
        return None
    return time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime(ns // NANOS))


def parse_rfc3339(text: Any) -> int:
    """metav1.Time's JSON to Unix nanoseconds (to the second); 0 for what is not a time."""
    if not isinstance(text, str) or not text:
        return 0
    return _parse_seconds(text[:19]) * NANOS


@functools.lru_cache(maxsize=256)
def _parse_seconds(text: str) -> int:
    """Seconds of `YYYY-MM-DDTHH:MM:SS` in UTC (0 when it is not one). Memoised: the Events of a
    burst are answered with the few seconds they were written in, and strptime was a twentieth
    of the daemon's interpreter time while it wrote them."""
    try:
        when = datetime.datetime.fromisoformat(text)
    except ValueError:
        try:
            return calendar.timegm(time.strptime(text, "%Y-%m-%dT%H:%M:%S"))
        except ValueError:
            return 0
    return calendar.timegm(when.timetuple())


def event_name(ref: ObjectRef, now_ns: int, reason: str = "", dedup_token: str = "") -> str:
    """client-go's util.GenerateEventName (`NAME.%x` of the nanoseconds), or the tokened name."""
    if dedup_token:
        digest = hashlib.sha256(f"{ref.uid}\x00{reason}\x00{dedup_token}".encode()).digest()
        name = f"{ref.name}.{digest[:8].hex()}"
        return name if _valid_name(name) else str(uuid.UUID(bytes=digest[:16], version=4))
    name = f"{ref.name}.{now_ns:x}"
    if _valid_name(name):
        return name
    digest = hashlib.sha256(f"{ref.uid}\x00{ref.name}\x00{now_ns}".encode()).digest()
    return str(uuid.UUID(bytes=digest[:16], version=4))


def _valid_name(name: str) -> bool:
    return len(name) <= 253 and _DNS_SUBDOMAIN.fullmatch(name) is not None


# ---------------------------------------------------------------------------------------- the keys
def event_key(e: CoreEvent) -> str:
    """events_cache.go getEventKey: an identical event (the eventLogger's key)."""
    r = e.involved
    return "".join(
        (
            e.source_component,
            e.source_host,
            r.kind,
            r.namespace,
            r.name,
            r.field_path,
            r.uid,
            r.api_version,
            e.type,
            e.reason,
            e.message,
        )
    )


def spam_key(e: CoreEvent) -> str:
    """getSpamKey: the source and the involved object (and, since client-go 0.28, the type)."""
    r = e.involved
    return "".join(
        (e.source_component, e.source_host, r.kind, r.namespace, r.name, r.uid, r.api_version, e.type)
    )


def aggregate_key(e: CoreEvent) -> tuple[str, str]:
    """EventAggregatorByReasonFunc: (the key of similar events, the message that tells them apart)."""
    r = e.involved
    key = "".join(
        (
            e.source_component,
            e.source_host,
            r.kind,
            r.namespace,
            r.name,
            r.uid,
            r.api_version,
            e.type,
            e.reason,
            e.reporting_controller,
            e.reporting_instance,
        )
    )
    return key, e.message


# ---------------------------------------------------------------------------------------- the correlator
V = TypeVar("V")


class Lru(Generic[V]):
    """k8s.io/utils/lru: `get` marks an entry recently used, `add` too, and evicts the least recent."""

    def __init__(self, size: int) -> None:
        self.size = size
        self._entries: collections.OrderedDict[str, V] = collections.OrderedDict()

    def get(self, key: str) -> V | None:
        value = self._entries.get(key)
        if value is not None:
            self._entries.move_to_end(key)
        return value

    def add(self, key: str, value: V) -> None:
        self._entries[key] = value
        self._entries.move_to_end(key)
        if len(self._entries) > self.size:
            self._entries.popitem(last=False)

    def __len__(self) -> int:
        return len(self._entries)

    def __contains__(self, key: str) -> bool:
        return key in self._entries


@dataclass(slots=True)
class _Similar:
    messages: dict[str, None]  # an insertion-ordered set
    last_ns: int


@dataclass(frozen=True, slots=True)
class _Observed:
    count: int
    first_ns: int
    name: str
    resource_version: str


@dataclass(slots=True)
class _TokenBucket:
    """golang.org/x/time/rate's Limiter as flowcontrol's passive token bucket uses it (TryAccept)."""

    tokens: float
    last_ns: int | None = None

    def try_accept(self, now_ns: int, qps: float, burst: int) -> bool:
        last = self.last_ns if self.last_ns is not None and self.last_ns <= now_ns else now_ns
        if self.last_ns is None:
            tokens = float(burst)
        else:
            tokens = min(float(burst), self.tokens + (now_ns - last) / NANOS * qps)
        tokens -= 1.0
        # The limiter admits when the wait for the missing fraction truncates to 0 ns.
        if tokens < 0 and int(-tokens / qps * NANOS) > 0:
            return False
        self.tokens, self.last_ns = tokens, now_ns
        return True


@dataclass(frozen=True, slots=True)
class Correlation:
    """What to do with one recorded event: create `event`, patch it with `patch`, or skip it."""

    action: Literal["create", "patch", "skip"]
    event: CoreEvent | None = None  # after correlation (its name is the Event to patch)
    patch: dict[str, Any] | None = None

    @property
    def path(self) -> str:
        assert self.event is not None
        base = f"/api/v1/namespaces/{self.event.namespace}/events"
        return f"{base}/{self.event.name}" if self.action == "patch" else base


class EventCorrelator:
    """client-go's EventCorrelator (events_cache.go): aggregate, count, filter; pure, clock injected."""

    def __init__(
        self,
        clock_ns: Callable[[], int],
        *,
        lru_size: int = MAX_LRU_CACHE_ENTRIES,
        max_events: int = AGGREGATE_MAX_EVENTS,
        max_interval_seconds: int = AGGREGATE_INTERVAL_SECONDS,
        burst: int = SPAM_BURST,
        qps: float = SPAM_QPS,
    ) -> None:
        self.clock_ns = clock_ns
        self.max_events = max_events
        self.max_interval_ns = max_interval_seconds * NANOS
        self.burst = burst
        self.qps = qps
        self.similar: Lru[_Similar] = Lru(lru_size)
        self.observed: Lru[_Observed] = Lru(lru_size)
        self.spam: Lru[_TokenBucket] = Lru(lru_size)

    def correlate(self, event: CoreEvent) -> Correlation:
        """EventCorrelate: aggregate, observe (counted even if then skipped), filter by the spam bucket."""
        aggregated, key = self._aggregate(event)
        observed, patch = self._observe(aggregated, key)
        if self._filtered(observed):
            return Correlation("skip")
        if patch is not None:
            return Correlation("patch", observed, patch)
        return Correlation("create", observed)

    def update_state(self, event: CoreEvent) -> None:
        """UpdateState: the server's copy (its name, count, firstTimestamp, resourceVersion).

        An answer that counts less than the correlator has counted since (a write overtaken by a
        later observation of the same event) is ignored rather than rewinding the count."""
        key = event_key(event)
        known = self.observed.get(key)
        if known is not None and known.count > event.count:
            return
        self.observed.add(key, _Observed(event.count, event.first_ns, event.name, event.resource_version))

    def _aggregate(self, event: CoreEvent) -> tuple[CoreEvent, str]:
        now = self.clock_ns()
        key, local = aggregate_key(event)
        record = self.similar.get(key)
        if record is None or now - record.last_ns > self.max_interval_ns:
            record = _Similar({}, now)
        record.messages[local] = None
        record.last_ns = now
        self.similar.add(key, record)
        if len(record.messages) < self.max_events:
            return event, event_key(event)
        del record.messages[next(iter(record.messages))]  # Go pops any one; we pop the oldest
        name = event.name if event.dedup_token else event_name(event.involved, now)
        combined = CoreEvent(
            name=name,
            namespace=event.namespace,
            involved=event.involved,
            reason=event.reason,
            message=AGGREGATE_PREFIX + event.message,
            type=event.type,
            first_ns=now,
            last_ns=now,
            count=1,
            source_component=event.source_component,
            source_host=event.source_host,
            dedup_token=event.dedup_token,
        )
        return combined, key

    def _observe(self, event: CoreEvent, key: str) -> tuple[CoreEvent, dict[str, Any] | None]:
        last = self.observed.get(key)
        patch: dict[str, Any] | None = None
        if last is not None and last.count > 0:
            event = replace(
                event,
                name=last.name,
                resource_version=last.resource_version,
                first_ns=last.first_ns,
                count=last.count + 1,
            )
            # strategicpatch.CreateTwoWayMergePatch of the event against a copy of it with count 0,
            # lastTimestamp at the epoch and no message: exactly these three fields.
            patch = {"count": event.count, "lastTimestamp": rfc3339(event.last_ns)}
            if event.message:
                patch["message"] = event.message
        self.observed.add(key, _Observed(event.count, event.first_ns, event.name, event.resource_version))
        return event, patch

    def _filtered(self, event: CoreEvent) -> bool:
        key = spam_key(event)
        bucket = self.spam.get(key)
        if bucket is None:
            bucket = _TokenBucket(float(self.burst))
        accepted = bucket.try_accept(self.clock_ns(), self.qps, self.burst)
        self.spam.add(key, bucket)
        return not accepted


# ---------------------------------------------------------------------------------------- the recorder
@dataclass(slots=True)
class EventCounters:
    created: int = 0  # Events created (a patch's fallback create included)
    patched: int = 0  # existing Events whose count went up
    already_existed: int = 0  # creates answered 409 AlreadyExists (a tokened Event written before)
    dropped: int = 0  # `record` calls dropped because the queue was full
    skipped: int = 0  # events the spam filter skipped
    failed: int = 0  # writes the server refused, or that never got through


class EventRecorder:
    """client-go's recorder + broadcaster + recordToSink for one component (see the module notes).

    `record` is synchronous and never blocks (call it from the loop `run` runs on); `run(send)`
    writes until cancelled; `flush()` waits until everything recorded so far is written or given up.
    """

    def __init__(
        self,
        *,
        component: str = "volcano",
        host: str = "",
        clock_ns: Callable[[], int] = time.time_ns,
        queue_size: int = MAX_QUEUED_EVENTS,
        concurrency: int = 8,
        correlator: EventCorrelator | None = None,
    ) -> None:
        self.component = component
        self.host = host
        self.clock_ns = clock_ns
        self.queue_size = queue_size
        self.concurrency = concurrency
        self.correlator = correlator or EventCorrelator(clock_ns)
        self.counters = EventCounters()
        self._queue: collections.deque[tuple[CoreEvent, anyio.Event | None]] = collections.deque()
        self._wake: anyio.Event | None = None  # made by the waiting side (anyio needs a running loop)
        self._idle: anyio.Event | None = None
        self._unfinished = 0  # recorded and not yet written or given up
        self._last_ns = 0
        self._chains: dict[tuple[str, str], collections.deque[tuple[Correlation, anyio.Event | None]]] = {}

    # -------------------------------------------------------------- recording (synchronous)
    def record(
        self,
        obj_ref: ObjectRef,
        type_: str,
        reason: str,
        message: str,
        *,
        dedup_token: str = "",
        done: anyio.Event | None = None,
    ) -> bool:
        """Queue an Event about `obj_ref` (False when it is not queued: bad type, or the queue is full).
        `done`, when given, is set once this event is written, skipped or given up."""
        if type_ not in EVENT_TYPES:
            log.error(
                "event %s about %s/%s: unsupported type %r", reason, obj_ref.namespace, obj_ref.name, type_
            )
            return False
        if len(self._queue) >= self.queue_size:
            self.counters.dropped += 1
            log.warning(
                "event %s about %s/%s dropped: the queue is full", reason, obj_ref.namespace, obj_ref.name
            )
            return False
        now = max(self.clock_ns(), self._last_ns + 1)
        self._last_ns = now
        self._queue.append(
            (
                CoreEvent(
                    name=event_name(obj_ref, now, reason, dedup_token),
                    namespace=obj_ref.namespace or "default",
                    involved=obj_ref,
                    reason=reason,
                    message=message,
                    type=type_,
                    first_ns=now,
                    last_ns=now,
                    source_component=self.component,
                    source_host=self.host,
                    reporting_controller=self.component,
                    reporting_instance=self.host,
                    dedup_token=dedup_token,
                ),
                done,
            )
        )
        self._unfinished += 1
        if self._wake is not None:
            self._wake.set()
        return True

    @property
    def queued(self) -> int:
        return len(self._queue)

    async def flush(self) -> None:
        """Wait until every event recorded so far is written, skipped or given up."""
        while self._unfinished:
            if self._idle is None:
                self._idle = anyio.Event()
            await self._idle.wait()

    # -------------------------------------------------------------- writing
    async def run(self, send: Send) -> None:
        """Correlate queued events in order and write them through `send` until cancelled."""
        slots = anyio.Semaphore(self.concurrency)
        async with anyio.create_task_group() as tg:
            while True:
                while not self._queue:
                    self._wake = anyio.Event()
                    await self._wake.wait()
                self._wake = None
                event, done = self._queue.popleft()
                result = self.correlator.correlate(event)
                if result.action == "skip" or result.event is None:
                    self.counters.skipped += 1
                    self._finished(done)
                    continue
                chain_key = (result.event.namespace, result.event.name)
                waiting = self._chains.get(chain_key)
                if waiting is not None:  # a write of the same Event is in flight: after it
                    waiting.append((result, done))
                    continue
                self._chains[chain_key] = collections.deque()
                await slots.acquire()
                tg.start_soon(self._write_chain, send, chain_key, (result, done), slots)

    async def _write_chain(
        self,
        send: Send,
        chain_key: tuple[str, str],
        first: tuple[Correlation, anyio.Event | None],
        slots: anyio.Semaphore,
    ) -> None:
        try:
            item: tuple[Correlation, anyio.Event | None] | None = first
            while item is not None:
                await self._write(send, item[0])
                self._finished(item[1])
                waiting = self._chains[chain_key]
                item = waiting.popleft() if waiting else None
        finally:
            del self._chains[chain_key]
            slots.release()

    async def _write(self, send: Send, result: Correlation) -> None:
        """recordEvent: patch when the event was seen before (a create when it is gone), else create."""
        event = result.event
        assert event is not None
        what = f"event {event.reason} about {event.involved.namespace}/{event.involved.name}"
        if result.action == "patch":
            code, body = await _send(send, "PATCH", result.path, result.patch, SMP)
            if code in (200, 201):
                self.counters.patched += 1
                self._update_state(event, body)
                return
            if code != 404:
                self.counters.failed += 1
                log.info("%s: patch %s: %s %s", what, event.name, code, message_of(body))
                return
            result = Correlation("create", event)
        code, body = await _send(
            send, "POST", result.path, replace(event, resource_version="").to_json(), JSON
        )
        if code in (200, 201):
            self.counters.created += 1
            self._update_state(event, body)
        elif code == 409 and isinstance(body, dict) and body.get("reason") == "AlreadyExists":
            self.counters.already_existed += 1
        else:
            self.counters.failed += 1
            log.info("%s: create %s: %s %s", what, event.name, code, message_of(body))

    def _update_state(self, sent: CoreEvent, body: Any) -> None:
        answered = (
            CoreEvent.from_json(body) if isinstance(body, dict) and body.get("kind") == "Event" else None
        )
        self.correlator.update_state(answered if answered is not None and answered.name else sent)

    def _finished(self, done: anyio.Event | None = None) -> None:
        if done is not None:
            done.set()
        self._unfinished -= 1
        if not self._unfinished and self._idle is not None:
            self._idle.set()
            self._idle = None


async def _send(send: Send, method: str, path: str, body: Any, content_type: str) -> tuple[int, Any]:
    try:
        return await send(method, path, body, content_type)
    except (KubeTransientError, aiohttp.ClientError, OSError, TimeoutError) as e:
        return 0, {"message": f"{type(e).__name__}: {e}"}
