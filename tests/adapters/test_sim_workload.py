"""Simulator workload format: durations, submit times, Job expansion, errors naming file/document/field."""

from __future__ import annotations

from pathlib import Path

import pytest

from fumarole.daemon.adapters.simulator import Simulator, format_duration, parse_duration
from fumarole.daemon.manifests import ManifestError, build_snapshot, expand_job, load_objects

CLUSTER = """\
apiVersion: v1
kind: Node
metadata: {name: n0}
status: {allocatable: {cpu: "8", memory: 16Gi, pods: "110"}}
---
apiVersion: scheduling.k8s.io/v1
kind: PriorityClass
metadata: {name: high}
value: 100
"""

JOB = """\
apiVersion: batch.volcano.sh/v1alpha1
kind: Job
metadata:
  name: j
  namespace: ns
  annotations: {{fumarole.io/submit-at: "{at}"}}
spec:
  tasks:
  - name: w
    replicas: 2
    template:
      metadata: {{annotations: {{fumarole.io/duration: "{dur}"}}}}
      spec:
        containers: [{{name: c, resources: {{requests: {{cpu: "1"}}}}}}]
"""


def write(tmp_path: Path, cluster: str, workload: str) -> tuple[Path, Path]:
    c, w = tmp_path / "cluster.yaml", tmp_path / "workload.yaml"
    c.write_text(cluster)
    w.write_text(workload)
    return c, w


@pytest.mark.parametrize(
    ("text", "ms"),
    [("90s", 90_000), ("1m30s", 90_000), ("1500ms", 1500), ("2h", 7_200_000), ("1.5s", 1500), ("12", 12_000)],
)
def test_parse_duration(text: str, ms: int) -> None:
    assert parse_duration(text) == ms


@pytest.mark.parametrize("bad", ["", "ten", "5d", "-3s", "3 s", True])
def test_parse_duration_rejects(bad: object) -> None:
    with pytest.raises(ValueError):
        parse_duration(bad)


def test_format_duration_round_trips() -> None:
    for ms in (0, 1000, 90_000, 1500, 7):
        assert parse_duration(format_duration(ms)) == ms


def test_from_files_reads_submit_time_and_duration(tmp_path: Path) -> None:
    c, w = write(tmp_path, CLUSTER, JOB.format(at="2m", dur="45s"))
    sim = Simulator.from_files(c, w)
    (sub,) = sim.submissions
    assert sub.at_ms == 120_000 and sub.label == "Job ns/j" and sub.source == (str(w), 0)
    kinds = [o["kind"] for o in sub.objects]
    assert kinds == ["PodGroup", "Pod", "Pod"]
    assert all(o["metadata"]["annotations"]["fumarole.io/duration"] == "45s" for o in sub.objects[1:])


def test_bad_submit_at_names_file_document_object_and_field(tmp_path: Path) -> None:
    c, w = write(tmp_path, CLUSTER, "---\n" + JOB.format(at="soon", dur="45s"))
    with pytest.raises(ManifestError) as e:
        Simulator.from_files(c, w)
    msg = str(e.value)
    assert msg.startswith(
        f"{w}: document 1 (Job ns/j): metadata.annotations.fumarole.io/submit-at: bad duration"
    )


def test_bad_duration_on_a_task_template_names_the_template(tmp_path: Path) -> None:
    c, w = write(tmp_path, CLUSTER, JOB.format(at="0s", dur="forever"))
    with pytest.raises(ManifestError) as e:
        Simulator.from_files(c, w)
    assert e.value.field == "spec.tasks[0].template.metadata.annotations.fumarole.io/duration"
    assert e.value.file == str(w) and e.value.document == 0


def test_missing_duration_is_an_error_naming_where_to_put_it(tmp_path: Path) -> None:
    job = JOB.format(at="0s", dur="1s").replace(
        '      metadata: {annotations: {fumarole.io/duration: "1s"}}\n', ""
    )
    c, w = write(tmp_path, CLUSTER, job)
    with pytest.raises(
        ManifestError, match=r"no pod duration: set fumarole\.io/duration on the task template"
    ):
        Simulator.from_files(c, w)


def test_job_level_duration_is_the_default_for_its_pods(tmp_path: Path) -> None:
    job = JOB.format(at="0s", dur="1s").replace(
        '      metadata: {annotations: {fumarole.io/duration: "1s"}}\n', ""
    )
    job = job.replace('annotations: {fumarole.io/submit-at: "0s"}', "annotations: {fumarole.io/duration: 3m}")
    c, w = write(tmp_path, CLUSTER, job)
    sim = Simulator.from_files(c, w)
    # the PodGroup carries the Job's annotations as written (the job controller copies them)
    assert [o["metadata"]["annotations"].get("fumarole.io/duration") for o in sim.submissions[0].objects] == [
        "3m",
        "180s",
        "180s",
    ]


def test_malformed_manifest_field_errors_come_from_the_manifest_loader(tmp_path: Path) -> None:
    c, w = write(tmp_path, CLUSTER, JOB.format(at="0s", dur="1s").replace('cpu: "1"', 'cpu: "1x"'))
    with pytest.raises(ManifestError) as e:
        Simulator.from_files(c, w)
    assert e.value.file == str(w)
    assert "spec.tasks[0].template.spec.containers[0].resources.requests.cpu" in str(e.value)


def test_cluster_kinds_and_workload_kinds_do_not_mix(tmp_path: Path) -> None:
    c, w = write(tmp_path, CLUSTER + "---\n" + JOB.format(at="0s", dur="1s"), "")
    with pytest.raises(ManifestError, match=r"document 3 .*kind: Job does not belong in the cluster file"):
        Simulator.from_files(c, w)
    c, w = write(tmp_path, CLUSTER, JOB.format(at="0s", dur="1s") + "---\n" + CLUSTER)
    with pytest.raises(ManifestError, match=r"document 2 .*kind: Node does not belong in the workload"):
        Simulator.from_files(c, w)


def test_workload_pods_must_not_be_bound(tmp_path: Path) -> None:
    pod = """\
apiVersion: v1
kind: Pod
metadata: {name: p, annotations: {fumarole.io/duration: 5s}}
spec: {nodeName: n0, containers: [{name: c}]}
"""
    c, w = write(tmp_path, CLUSTER, pod)
    with pytest.raises(
        ManifestError, match=r"\(Pod default/p\): spec.nodeName: workload pods must not be bound"
    ):
        Simulator.from_files(c, w)


def test_duplicate_jobs_are_reported_by_the_loader(tmp_path: Path) -> None:
    job = JOB.format(at="0s", dur="1s")
    c, w = write(tmp_path, CLUSTER, job + "---\n" + job)
    with pytest.raises(ManifestError, match="duplicate Job ns/j"):
        Simulator.from_files(c, w)


def test_submissions_are_ordered_by_time_then_workload_position(tmp_path: Path) -> None:
    docs = [
        JOB.format(at="30s", dur="1s").replace("name: j\n", "name: late\n"),
        JOB.format(at="10s", dur="1s").replace("name: j\n", "name: b\n"),
        JOB.format(at="10s", dur="1s").replace("name: j\n", "name: a\n"),
    ]
    c, w = write(tmp_path, CLUSTER, "---\n".join(docs))
    sim = Simulator.from_files(c, w)
    assert [(s.label, s.at_ms) for s in sim.submissions] == [
        ("Job ns/b", 10_000),
        ("Job ns/a", 10_000),
        ("Job ns/late", 30_000),
    ]


def test_expand_job_gives_the_same_snapshot_as_build_snapshot() -> None:
    objs = load_objects("daemon/examples/cluster.yaml")
    pcs = [o for o in objs if o[2].get("kind") == "PriorityClass"]
    expanded = []
    for f, i, o in objs:
        if o.get("kind") == "Job":
            manifests = expand_job(f, i, o, priority_classes=pcs)
            assert manifests[0]["kind"] == "PodGroup"
            expanded.extend((f, i, m) for m in manifests)
        else:
            expanded.append((f, i, o))
    a, b = build_snapshot(objs), build_snapshot(expanded)
    assert sorted(a.jobs) == sorted(b.jobs)
    for key, ja in a.jobs.items():
        jb = b.jobs[key]
        for attr in (
            "queue",
            "min_available",
            "task_min_available",
            "priority",
            "min_resources",
            "preemptable",
        ):
            assert getattr(ja, attr) == getattr(jb, attr), (key, attr)
        assert sorted(ja.tasks) == sorted(jb.tasks)
        for uid, ta in ja.tasks.items():
            tb = jb.tasks[uid]
            assert (ta.name, ta.resreq, ta.priority, ta.role, ta.pod) == (
                tb.name,
                tb.resreq,
                tb.priority,
                tb.role,
                tb.pod,
            )


def test_expand_job_rejects_other_kinds() -> None:
    with pytest.raises(ManifestError, match=r"expected a batch\.volcano\.sh Job"):
        expand_job("f.yaml", 0, {"apiVersion": "v1", "kind": "Pod", "metadata": {"name": "p"}})


def test_created_objects_share_nothing_with_the_submissions_or_each_other(tmp_path: Path) -> None:
    # Submissions share their unchanged parts with the expanded Job (only the top level and the
    # metadata are copied when stamped): the objects the simulator creates must still be whole
    # copies, so that changing one changes neither another pod nor what a later run creates.
    c, w = write(tmp_path, CLUSTER, JOB.format(at="0s", dur="45s"))
    sim = Simulator.from_files(c, w)
    (sub,) = sim.submissions
    templates = [repr(o) for o in sub.objects]
    events = [*sim.initial_events_sync(), *sim.advance(False), *sim.advance(True)]
    created = [e.manifest for e in events if getattr(e, "manifest", {}).get("kind") == "Pod"]
    assert len(created) == 2
    assert created[0]["spec"] is not created[1]["spec"]
    for m in created:
        m["spec"]["containers"][0]["resources"]["requests"]["cpu"] = "99"
        m["metadata"]["annotations"]["changed"] = "yes"
    assert [repr(o) for o in sub.objects] == templates
