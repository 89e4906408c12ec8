"""daemon.manifests.snapshot.build_loading: a split YAML file's first part decoded while the child
parses the second gives the serial build's snapshot, and for bad input its error (file, document
index, object, field; YAML line and column), at every split point."""

from __future__ import annotations

import io
import itertools
import json
import os
import pickle
import shutil
import signal
import subprocess
import sys
from pathlib import Path

import pytest

from fumarole.daemon.manifests import ManifestError, build_snapshot, load_objects
from fumarole.daemon.manifests.reading import PendingLoad, start_loading
from fumarole.daemon.manifests.snapshot import _Builder, build_loading
from fumarole.daemon.manifests.yaml_split import PARALLEL_MIN_BYTES, SplitLoad, spare_core, split_offset
from fumarole.daemon.scheduler.model.snapshot import ClusterSnapshot

needs_two_cpus = pytest.mark.skipif(not spare_core(), reason="the split path needs a spare CPU")

NODE = (
    "kind: Node\napiVersion: v1\nmetadata: {{name: n{i}}}\n"
    "status: {{allocatable: {{cpu: '8', pods: '110'}}}}\n"
)
GROUP = (
    "apiVersion: scheduling.volcano.sh/v1beta1\nkind: PodGroup\n"
    "metadata: {{name: g{i}, namespace: ns}}\nspec: {{minMember: 1, queue: q, priorityClassName: {pc}}}\n"
)
POD = (
    "apiVersion: v1\nkind: Pod\nmetadata:\n  name: p{i}\n  namespace: ns\n  uid: {uid}\n"
    "  annotations: {{scheduling.k8s.io/group-name: g{g}}}\n"
    "spec:\n  schedulerName: {sched}\n  priorityClassName: {pc}\n  nodeName: '{node}'\n"
    "  containers: [{{name: c, resources: {{requests: {{cpu: '{cpu}'}}}}}}]\n"
)
LOOSE_POD = (  # no group: the PodGroup controller's group is made for it
    "apiVersion: v1\nkind: Pod\nmetadata: {{name: loose{i}, namespace: ns}}\n"
    "spec: {{schedulerName: volcano, containers: [{{name: c}}]}}\n"
)
JOB = (
    "apiVersion: batch.volcano.sh/v1alpha1\nkind: Job\nmetadata: {{name: j{i}, namespace: ns}}\n"
    "spec:\n  minAvailable: 1\n  queue: q\n  tasks:\n  - name: t\n    replicas: 2\n"
    "    template: {{spec: {{containers: [{{name: c, resources: {{requests: {{cpu: '1'}}}}}}]}}}}\n"
)
PCLASS = "apiVersion: scheduling.k8s.io/v1\nkind: PriorityClass\nmetadata: {{name: {name}}}\nvalue: {value}\n"
QUEUE = "apiVersion: scheduling.volcano.sh/v1beta1\nkind: Queue\nmetadata: {name: q}\nspec: {weight: 2}\n"
POD_LIST = "apiVersion: v1\nkind: PodList\nitems:\n" + "".join(
    f"- metadata: {{name: listed{i}, namespace: ns}}\n"
    "  spec: {schedulerName: volcano, containers: [{name: c}]}\n"
    for i in range(3)
)


def pod(
    i: int, *, uid: str = "", group: int = 0, sched: str = "volcano", pc: str = "", node: str = ""
) -> str:
    return POD.format(i=i, uid=uid or f"u{i}", g=group, sched=sched, pc=pc, node=node, cpu="1")


def cluster() -> list[str]:
    """Documents of every kind the build reads, in an order that matters: priority classes in
    both parts (the pods' priorities read them), bound pods, other schedulers' pods, loose pods,
    Jobs among pods (their pods' uids are claimed in object order), a List, empty documents."""
    docs = [QUEUE, PCLASS.format(name="high", value=100), ""]
    docs += [NODE.format(i=i) for i in range(4)]
    docs += [GROUP.format(i=g, pc="high" if g % 2 else "late") for g in range(3)]
    for i in range(12):
        docs.append(
            pod(i, group=i % 3, pc=("high", "late", "")[i % 3], node=f"n{i % 4}" if i % 4 == 0 else "")
        )
        if i == 5:
            docs += [JOB.format(i=1), LOOSE_POD.format(i=1), POD_LIST, "# only a comment\n"]
    docs += [pod(20, sched="default-scheduler", node="n1"), pod(21, sched="default-scheduler")]
    docs += [JOB.format(i=2), LOOSE_POD.format(i=2), PCLASS.format(name="late", value=7)]
    docs += [NODE.format(i=i) for i in range(4, 6)]
    return docs


def text_of(docs: list[str]) -> str:
    return "".join("---\n" + d for d in docs)


def every_split(text: str) -> list[int]:
    return sorted({o for share in range(1, 100) if (o := split_offset(text, share / 100)) is not None})


def split_loading(path: Path, offset: int, chunk_documents: int = 256) -> PendingLoad:
    text = path.read_text()
    return PendingLoad(path, SplitLoad(text, offset, chunk_documents), text)


class _StringsByValue(pickle._Pickler):  # type: ignore[name-defined,misc]
    """A pickler that writes every string out (the child's strings come back as other objects
    than the parent's equal ones; that sharing is no part of the snapshot's meaning)."""

    dispatch = pickle._Pickler.dispatch.copy()  # type: ignore[attr-defined]

    def save_str(self, obj: str) -> None:
        pickle._Pickler.save_str(self, obj)  # type: ignore[attr-defined]
        del self.memo[id(obj)]

    dispatch[str] = save_str


def shape(s: ClusterSnapshot) -> bytes:
    """The whole snapshot: every field, in order, and which of its objects (other than strings)
    are shared."""
    out = io.BytesIO()
    _StringsByValue(out, protocol=2).dump(s)
    return out.getvalue()


def serial_error(path: Path) -> str:
    with pytest.raises(ManifestError) as e:
        build_snapshot(load_objects(path))
    return str(e.value)


@needs_two_cpus
def test_the_snapshot_is_the_serial_builds_at_every_split(tmp_path: Path) -> None:
    p = tmp_path / "cluster.yaml"
    p.write_text(text_of(cluster()))
    serial = shape(build_snapshot(load_objects(p)))
    offsets = every_split(p.read_text())
    assert len(offsets) > 20
    loaded: list[int] = []
    for offset, chunk in itertools.product(offsets, (1, 3, 256)):
        loaded.clear()
        loading = split_loading(p, offset, chunk)
        assert shape(build_loading(loading, loaded=lambda: loaded.append(1))) == serial
        assert loaded == [1], offset
        assert loading.complete, offset  # the early work was used


def test_the_first_part_is_decoded_ahead_and_used(tmp_path: Path) -> None:
    p = tmp_path / "cluster.yaml"
    p.write_text(text_of(cluster()))
    objects = load_objects(p)
    b = _Builder(("volcano",), "default")
    assert b.classify_ahead(objects[:20])
    ahead = {e.kind: e.record for e in b.entries if e.record is not None}
    assert set(ahead) == {"Node", "PodGroup", "Pod"}
    for file, index, obj in objects[20:]:
        b.classify(file, index, obj)
    snap = b.build()
    assert shape(snap) == shape(build_snapshot(objects))
    assert ahead["Node"] in snap.nodes  # the record decoded ahead is the one built on


def bad(docs: list[str], at: int, doc: str) -> list[str]:
    return [*docs[:at], doc, *docs[at:]]


GOOD = cluster()
BAD_INPUTS = {
    "a pod's bad field, early": bad(GOOD, 6, pod(30).replace("cpu: '1'", "cpu: lots")),
    "a pod's bad field, late": bad(GOOD, len(GOOD) - 2, pod(30).replace("cpu: '1'", "cpu: lots")),
    # the serial build decodes priority classes before any pod: a late bad class is the error
    "a bad pod early, a bad class late": bad(
        bad(GOOD, 6, pod(30).replace("cpu: '1'", "cpu: lots")), len(GOOD), PCLASS.format(name="x", value="y")
    ),
    # classification of every object comes first: a late unsupported kind is the error
    "a bad pod early, an unknown kind late": bad(
        bad(GOOD, 6, pod(30).replace("cpu: '1'", "cpu: lots")), len(GOOD), "apiVersion: v1\nkind: Secret\n"
    ),
    "a duplicate pod uid across the parts": bad(GOOD, len(GOOD), pod(31, uid="u0")),
    "a Job's pod after a duplicate uid": bad(GOOD, 5, pod(32, uid="u1")),
    "a duplicate node name across the parts": bad(GOOD, len(GOOD) - 1, NODE.format(i=0)),
    "a bad node early": bad(GOOD, 4, NODE.format(i=9).replace("'8'", "[8]")),
    "a bad group early": bad(GOOD, 8, GROUP.format(i=9, pc="x").replace("minMember: 1", "minMember: one")),
    "a bad Job early": bad(GOOD, 9, JOB.format(i=9).replace("replicas: 2", "replicas: two")),
    # parsing every document comes before any build step: a late syntax error is the error
    "a bad pod early, a syntax error late": bad(
        bad(GOOD, 6, pod(30).replace("cpu: '1'", "cpu: lots")), len(GOOD), "a: [1,\nb: 2\n"
    ),
    # ... but a List's items are checked as each document is read
    "a bad List early, a syntax error late": bad(
        bad(GOOD, 6, "kind: PodList\napiVersion: v1\nitems: 5\n"), len(GOOD), "a: 'open\n"
    ),
    "a bad List late": bad(GOOD, len(GOOD) - 1, "kind: List\napiVersion: v1\nitems: [1]\n"),
    "a scalar document early": bad(GOOD, 3, "just text\n"),
    "a bad value late": bad(GOOD, len(GOOD), "a: !!timestamp 2024-13-45\n"),
}


@needs_two_cpus
@pytest.mark.parametrize("case", list(BAD_INPUTS))
def test_bad_input_gives_the_serial_error_at_every_split(tmp_path: Path, case: str) -> None:
    p = tmp_path / "cluster.yaml"
    p.write_text(text_of(BAD_INPUTS[case]))
    expected = serial_error(p)
    assert "document " in expected
    offsets = every_split(p.read_text())
    assert len(offsets) > 20
    for offset, chunk in itertools.product(offsets, (1, 3, 256)):
        with pytest.raises(ManifestError) as e:
            build_loading(split_loading(p, offset, chunk))
        assert str(e.value) == expected, (offset, chunk)


@needs_two_cpus
@pytest.mark.parametrize("chunks_before", [0, 1, 4])
def test_a_child_that_dies_leaves_the_build_to_the_whole_text(tmp_path: Path, chunks_before: int) -> None:
    p = tmp_path / "cluster.yaml"  # a second part the child needs a good while for
    p.write_text(text_of(cluster() + [NODE.format(i=i) for i in range(100, 3100)]))
    serial = shape(build_snapshot(load_objects(p)))
    offset = split_offset(p.read_text(), 0.99)
    assert offset is not None
    loading = split_loading(p, offset, chunk_documents=2)
    split = loading._split
    assert split is not None and split._pid is not None
    parts = loading.read_ahead()
    for _ in range(1 + chunks_before):  # the first part, then chunks of the child's
        next(parts)
    if split._pid is not None:
        os.kill(split._pid, signal.SIGKILL)
    list(parts)
    assert not loading.complete
    assert shape(build_snapshot(loading.result())) == serial
    assert split._pid is None  # reaped


@needs_two_cpus
def test_the_result_after_an_abandoned_read_ahead_is_the_whole_file(tmp_path: Path) -> None:
    p = tmp_path / "cluster.yaml"
    p.write_text(text_of(cluster()))
    serial = load_objects(p)
    loading = split_loading(p, every_split(p.read_text())[5], chunk_documents=2)
    parts = loading.read_ahead()
    seen = next(parts) + next(parts)
    parts.close()
    assert loading.result() == serial
    assert serial[: len(seen)] == seen


def test_files_that_are_not_split_build_as_before(tmp_path: Path) -> None:
    p = tmp_path / "cluster.yaml"
    p.write_text(text_of(cluster()))
    (tmp_path / "more.json").write_text('{"kind": "Node", "apiVersion": "v1", "metadata": {"name": "j"}}')
    for path in (p, tmp_path):
        assert shape(build_loading(start_loading(path))) == shape(build_snapshot(load_objects(path)))
    with pytest.raises(ManifestError, match="no such file"):
        build_loading(start_loading(tmp_path / "missing.yaml"))


def fumarole(*args: str) -> subprocess.CompletedProcess[str]:
    exe = shutil.which("fumarole") or str(Path(sys.executable).parent / "fumarole")
    return subprocess.run([exe, *args], capture_output=True, text=True, timeout=300)


def large(docs: list[str]) -> list[str]:
    """The documents with enough nodes after the first ones for the command to split the file."""
    pad = [NODE.format(i=i) for i in range(1000, 1000 + PARALLEL_MIN_BYTES // len(NODE.format(i=1000)) + 1)]
    return docs[:10] + pad[: len(pad) // 2] + docs[10:] + pad[len(pad) // 2 :]


@needs_two_cpus
def test_the_command_decides_from_a_split_yaml_file_as_from_json(tmp_path: Path) -> None:
    docs = large(cluster())
    yaml_file, json_file = tmp_path / "cluster.yaml", tmp_path / "cluster.json"
    yaml_file.write_text(text_of(docs))
    assert yaml_file.stat().st_size >= PARALLEL_MIN_BYTES and start_loading(yaml_file)._split is not None
    items = [o for _, _, o in load_objects(yaml_file)]
    json_file.write_text(json.dumps({"apiVersion": "v1", "kind": "List", "items": items}))
    outs = [fumarole("schedule", "--cluster", str(f), "--now", "manifests") for f in (yaml_file, json_file)]
    assert [p.returncode for p in outs] == [0, 0]
    assert outs[0].stdout == outs[1].stdout
    assert len(json.loads(outs[0].stdout)["binds"]) > 0


@needs_two_cpus
@pytest.mark.parametrize(
    "case", ["a bad pod early, a bad class late", "a duplicate pod uid across the parts"]
)
def test_the_command_reports_the_serial_error_from_a_split_yaml_file(tmp_path: Path, case: str) -> None:
    p = tmp_path / "cluster.yaml"
    p.write_text(text_of(large(BAD_INPUTS[case])))
    assert start_loading(p)._split is not None
    run = fumarole("schedule", "--cluster", str(p), "--now", "manifests")
    assert run.returncode == 2
    assert run.stdout == ""
    assert serial_error(p) in run.stderr
