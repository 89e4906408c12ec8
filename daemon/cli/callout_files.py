"""Extender answers in files, for `fumarole schedule`: `--callouts-from FILE` answers every
callout from a file instead of calling out, `--callouts-out FILE` writes the calls a run made.

The format is JSON Lines; each line is one cycle's record, `{"cycle": N, "calls": [CALL, …]}`
where a CALL has `verb`, `url`, `digest` (SHA-256 hex of url, NUL, request body), `status`,
`body`, `error` — the fields of the log's `cycle.callouts` event — or a line of
`fumarole events --type cycle.callouts` (the event under `"event"`), so a daemon's recorded
answers can be replayed over manifests.  Every line's calls are merged in order into one
ReplayPort (framework/callout.py): the n-th identical request gets the n-th recorded answer,
and a request the file does not hold is refused (exit 2), never sent.

This module reads no store module (the offline dry run imports no runtime, store or api).
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any, TextIO

from fumarole.daemon.cli.exits import InputError
from fumarole.daemon.scheduler.framework.callout import CalloutAnswer, CalloutRecord

__all__ = ["read_records", "write_cycle"]

_TEXT = ("verb", "url", "digest", "body", "error")


def read_records(path: str) -> list[CalloutRecord]:
    """Every call of the file, in order; a bad line is an InputError naming file, line and field."""
    try:
        lines = Path(path).read_text(encoding="utf-8").splitlines()
    except (OSError, UnicodeDecodeError) as e:
        raise InputError(f"--callouts-from {path}: cannot read: {e}") from e
    out: list[CalloutRecord] = []
    for n, line in enumerate(lines, 1):
        if not line.strip():
            continue
        where = f"--callouts-from {path}:{n}"
        try:
            obj = json.loads(line)
        except ValueError as e:
            raise InputError(f"{where}: not JSON: {e}") from None
        if isinstance(obj, dict) and isinstance(obj.get("event"), dict):
            obj = obj["event"]
        calls = obj.get("calls") if isinstance(obj, dict) else None
        if not isinstance(calls, list):
            raise InputError(f"{where}: calls: missing or not a list")
        for i, c in enumerate(calls):
            out.append(_record(c, f"{where}: calls[{i}]"))
    return out


def _record(c: Any, where: str) -> CalloutRecord:
    if not isinstance(c, dict):
        raise InputError(f"{where}: must be an object")
    for key in _TEXT:
        if not isinstance(c.get(key, ""), str):
            raise InputError(f"{where}.{key}: must be a string")
    for key in ("verb", "url", "digest"):
        if not c.get(key):
            raise InputError(f"{where}.{key}: missing")
    status = c.get("status", 0)
    if not isinstance(status, int) or isinstance(status, bool):
        raise InputError(f"{where}.status: must be an integer")
    answer = CalloutAnswer(status=status, body=c.get("body", ""), error=c.get("error", ""))
    return CalloutRecord(c["verb"], c["url"], c["digest"], answer)


def write_cycle(out: TextIO, cycle: int, records: list[CalloutRecord]) -> None:
    """One line: the cycle's calls (none: nothing is written)."""
    if not records:
        return
    calls = [
        {
            "verb": r.verb,
            "url": r.url,
            "digest": r.digest,
            "status": r.answer.status,
            "body": r.answer.body,
            "error": r.answer.error,
        }
        for r in records
    ]
    out.write(json.dumps({"cycle": cycle, "calls": calls}, separators=(",", ":")) + "\n")
