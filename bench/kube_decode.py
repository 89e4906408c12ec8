"""Benchmark of the Kubernetes adapter's per-object decoding: process CPU per watch frame and per
Event answer, the adapter's way against the plain way, on payloads recorded from kube-apiserver
1.36.2 (tests/k8s/payloads/).  Prints one JSON object.

- watch frame (a MODIFIED Pod with its managedFields, what every bind brings back on the pod
  watch): `decode_watch_frame` (msgspec, the typed shape that skips managedFields) then
  `objects.trimmed`, against the standard library's `json.loads` then `trimmed` (the decoding the
  watch used before);
- Event answer (the created Event the server answers every `Scheduled` Event with):
  `CoreEvent.from_json` on the decoded answer, whose two timestamps are parsed by
  `events.parse_rfc3339`.

Usage: python bench/kube_decode.py [--n 20000] [--repeat 5]   (the best of the repeats)
"""

from __future__ import annotations

import argparse
import json
import sys
import time
from pathlib import Path
from typing import Any

import msgspec

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))  # the checkout, not bench/daemon.py

from fumarole.daemon.adapters.kubernetes.events import CoreEvent
from fumarole.daemon.adapters.kubernetes.listing import decode_watch_frame
from fumarole.daemon.adapters.kubernetes.objects import KINDS, trimmed

PAYLOADS = Path(__file__).resolve().parents[1] / "tests" / "k8s" / "payloads"
POD = next(k for k in KINDS if k.name == "Pod")


def best_us(fn: Any, n: int, repeat: int) -> float:
    """The least process CPU per call, in microseconds, over `repeat` runs of `n` calls."""
    best = float("inf")
    for _ in range(repeat):
        t0 = time.process_time()
        for _ in range(n):
            fn()
        best = min(best, time.process_time() - t0)
    return round(best / n * 1e6, 2)


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--n", type=int, default=20000)
    ap.add_argument("--repeat", type=int, default=5)
    args = ap.parse_args()

    frames = msgspec.json.decode((PAYLOADS / "watch_frames.json").read_bytes())
    modified = next(f for f in frames if f["type"] == "MODIFIED" and f["object"]["spec"].get("nodeName"))
    line = json.dumps(modified).encode()
    answer = msgspec.json.decode((PAYLOADS / "event_created.json").read_bytes())
    answer = answer.get("body", answer)

    def typed() -> None:
        _type, obj = decode_watch_frame("Pod", line)
        trimmed(POD, obj)

    def plain() -> None:
        trimmed(POD, json.loads(line)["object"])

    out = {
        "watch_frame_bytes": len(line),
        "watch_frame_us": best_us(typed, args.n, args.repeat),
        "watch_frame_plain_json_us": best_us(plain, args.n, args.repeat),
        "event_answer_us": best_us(lambda: CoreEvent.from_json(answer), args.n, args.repeat),
        "n": args.n,
        "repeat": args.repeat,
    }
    out["watch_frame_speedup"] = round(out["watch_frame_plain_json_us"] / out["watch_frame_us"], 2)
    print(json.dumps(out, indent=2))


if __name__ == "__main__":
    main()
