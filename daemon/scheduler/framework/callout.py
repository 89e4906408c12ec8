"""The callout port: how the pure core asks an outside service (the extender plugin) a question.

A session never performs I/O itself.  Whoever runs it injects a port (`run_session(...,
callouts=port)`, kept as `Session.callouts`); a plugin that needs an answer from outside calls
`port.call(verb, url, body, timeout_s, want_body)`.  Three ports exist:

* the live port (daemon/callouts_http.py: an HTTP POST with the configured timeout), used by the
  daemon's live cycles and by `fumarole schedule`;
* `RecordingPort`, wrapping any port: it keeps every call (verb, url, request digest, answer) in
  call order, and hands the plugin the answer exactly as recorded (`CalloutAnswer` is already the
  recorded form: status, body text, error text), so the live session and a later replay read the
  very same answer;
* `ReplayPort`, answering from such a record: the n-th call with a given (verb, request digest)
  gets the n-th recorded answer of that key; a question the record does not hold raises
  `CalloutUnavailable` naming the cycle, verb and digest.  It never calls out.

A session whose decisions are a pure function of (snapshot, configuration) stays one of
(snapshot, configuration, recorded answers): the request bodies are built deterministically
from the session's state (sorted maps, stable orders), so an exact replay asks exactly the
recorded questions in the recorded order.  With no port installed a call raises
`CalloutUnavailable`: nothing calls out by accident.  `CalloutUnavailable` is not an answer: the
plugin lets it through (it is not Volcano's "extender error", ignorable or not), so a replay
that asks something new fails instead of deciding on an invented answer.
"""

from __future__ import annotations

import hashlib
from collections.abc import Iterable
from dataclasses import dataclass
from typing import Protocol


@dataclass(frozen=True, slots=True)
class CalloutAnswer:
    """One answer: the HTTP status and body text, or `error` (refused, timed out, too large)."""

    status: int = 0
    body: str = ""
    error: str = ""


@dataclass(frozen=True, slots=True)
class CalloutRecord:
    """One call as recorded: its verb, URL, the SHA-256 of URL and request body, the answer."""

    verb: str
    url: str
    digest: str
    answer: CalloutAnswer


class CalloutPort(Protocol):
    def call(self, verb: str, url: str, body: bytes, timeout_s: float, want_body: bool) -> CalloutAnswer: ...


class CalloutUnavailable(RuntimeError):
    """A callout with no port installed, or one the replay record does not hold."""


def request_digest(url: str, body: bytes) -> str:
    """SHA-256 hex of the URL, a NUL byte and the request body: the question's identity."""
    h = hashlib.sha256(url.encode())
    h.update(b"\0")
    h.update(body)
    return h.hexdigest()


class RecordingPort:
    """Forwards to `inner` and keeps every call's record, in call order."""

    def __init__(self, inner: CalloutPort) -> None:
        self.inner = inner
        self.records: list[CalloutRecord] = []

    def call(self, verb: str, url: str, body: bytes, timeout_s: float, want_body: bool) -> CalloutAnswer:
        answer = self.inner.call(verb, url, body, timeout_s, want_body)
        self.records.append(CalloutRecord(verb, url, request_digest(url, body), answer))
        return answer


class ReplayPort:
    """Answers from a record (see the module notes); `records` are those actually consumed."""

    def __init__(self, recorded: Iterable[CalloutRecord], *, cycle: int = 0, source: str = "") -> None:
        self.cycle = cycle
        # How a failure names where the answers came from ("cycle N" by default).
        self.source = source or f"cycle {cycle}"
        self._answers: dict[tuple[str, str], list[CalloutRecord]] = {}
        for r in recorded:
            self._answers.setdefault((r.verb, r.digest), []).append(r)
        self._used: dict[tuple[str, str], int] = {}
        self.records: list[CalloutRecord] = []

    def call(self, verb: str, url: str, body: bytes, timeout_s: float, want_body: bool) -> CalloutAnswer:
        digest = request_digest(url, body)
        key = (verb, digest)
        answers = self._answers.get(key, [])
        n = self._used.get(key, 0)
        if n >= len(answers):
            what = "asked again" if answers else "asked something the log does not record"
            raise CalloutUnavailable(
                f"{self.source}: extender verb {verb!r} {what} (request {digest[:12]}, "
                f"call {n + 1} of that request); replay does not call out"
            )
        self._used[key] = n + 1
        rec = answers[n]
        self.records.append(rec)
        return rec.answer


class NoPort:
    """The port of a session run without one: every call raises CalloutUnavailable."""

    def call(self, verb: str, url: str, body: bytes, timeout_s: float, want_body: bool) -> CalloutAnswer:
        raise CalloutUnavailable(
            f"extender verb {verb!r}: this session has no callout port (it runs without calling out)"
        )
