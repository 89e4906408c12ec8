"""`fumarole schedule` with the extender plugin: it calls the configured extender live,
`--callouts-out` writes the calls, `--callouts-from` answers them from that file with the
extender stopped (the same output), and a call the file lacks is one line, exit 2."""

from __future__ import annotations

import json
import shutil
import subprocess
import sys
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))
from fumarole_extender_server import ExtenderServer

CLUSTER = """\
apiVersion: v1
kind: Node
metadata: {name: n1}
status: {allocatable: {cpu: "4", memory: 8Gi, pods: "10"}}
---
apiVersion: v1
kind: Node
metadata: {name: n2}
status: {allocatable: {cpu: "4", memory: 8Gi, pods: "10"}}
---
apiVersion: scheduling.volcano.sh/v1beta1
kind: Queue
metadata: {name: default}
spec: {weight: 1}
---
apiVersion: scheduling.volcano.sh/v1beta1
kind: PodGroup
metadata: {name: pg1, namespace: c1}
spec: {queue: default, minMember: 1}
status: {phase: Inqueue}
---
apiVersion: v1
kind: Pod
metadata: {name: p1, namespace: c1, annotations: {scheduling.k8s.io/group-name: pg1}}
spec: {schedulerName: volcano, containers: [{name: c, resources: {requests: {cpu: "1"}}}]}
status: {phase: Pending}
"""

CONF = """\
actions: "allocate"
tiers:
- plugins:
  - name: predicates
  - name: extender
    arguments:
      extender.urlPrefix: {url}
      extender.predicateVerb: filter
      extender.prioritizeVerb: {score}
"""


def fumarole(*args: str) -> subprocess.CompletedProcess[str]:
    exe = shutil.which("fumarole") or str(Path(sys.executable).parent / "fumarole")
    return subprocess.run([exe, *args], capture_output=True, text=True, timeout=120)


def answer(verb: str, body: Any) -> Any:
    if verb == "score":
        return {"nodeScore": {"n2": 10}}
    return {}


def test_schedule_calls_out_records_and_answers_from_the_file(tmp_path: Path) -> None:
    cluster = tmp_path / "cluster.yaml"
    cluster.write_text(CLUSTER)
    conf = tmp_path / "conf.yaml"
    calls = tmp_path / "calls.jsonl"

    def schedule(calls_flag: str) -> subprocess.CompletedProcess[str]:
        return fumarole(
            "schedule", "--conf", str(conf), "--cluster", str(cluster), "--now", "0", calls_flag, str(calls)
        )

    with ExtenderServer(answer) as server:
        conf.write_text(CONF.format(url=server.url, score="score"))
        live = schedule("--callouts-out")
        url = server.url
    assert live.returncode == 0, live.stderr
    assert json.loads(live.stdout)["binds"] == {"c1/p1": "n2"}
    [line] = calls.read_text().splitlines()
    record = json.loads(line)
    assert record["cycle"] == 1 and [c["verb"] for c in record["calls"]] == ["filter", "filter", "score"]
    # The extender is gone: the same answers, from the file.
    offline = schedule("--callouts-from")
    assert offline.returncode == 0, offline.stderr
    assert offline.stdout == live.stdout
    # A question the file does not hold: one line, exit 2, nothing on stdout.
    conf.write_text(CONF.format(url=url, score="score2"))
    missing = schedule("--callouts-from")
    assert missing.returncode == 2 and missing.stdout == ""
    [err] = missing.stderr.strip().splitlines()
    assert f"--callouts-from {calls}: extender verb 'score2'" in err
    # A bad file names its line and field.
    calls.write_text('{"cycle": 1, "calls": [{"verb": "filter", "url": 3}]}\n')
    bad = fumarole("schedule", "--conf", str(conf), "--cluster", str(cluster), "--callouts-from", str(calls))
    assert bad.returncode == 2
    assert bad.stderr.strip().splitlines() == [
        f"fumarole: error: --callouts-from {calls}:1: calls[0].url: must be a string"
    ]


def test_bad_extender_argument_is_one_line(tmp_path: Path) -> None:
    cluster = tmp_path / "cluster.yaml"
    cluster.write_text(CLUSTER)
    conf = tmp_path / "conf.yaml"
    conf.write_text(
        CONF.format(url="http://127.0.0.1:9", score="score") + "      extender.httpTimeout: soon\n"
    )
    p = fumarole("schedule", "--conf", str(conf), "--cluster", str(cluster))
    assert p.returncode == 2 and p.stdout == ""
    [err] = p.stderr.strip().splitlines()
    assert f"{conf}: tiers[0].plugins[1].arguments.extender.httpTimeout: not a Go duration" in err
