"""The resourcequota plugin: namespace ResourceQuota status checked against minResources at enqueue."""

from __future__ import annotations

import sys
from pathlib import Path
from typing import Any

import pytest

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))
from fumarole_sched_kit import (
    add_tasks,
    mk_conf,
    mk_job,
    mk_node,
    mk_snapshot,
    open_session,
    rl,
    run,
    run_actions,
)

from fumarole.daemon.manifests import build_snapshot
from fumarole.daemon.scheduler.framework import combinators as cb
from fumarole.daemon.scheduler.framework import registry
from fumarole.daemon.scheduler.framework.session import Session
from fumarole.daemon.scheduler.model.queue import NamespaceInfo, ResourceQuotaInfo
from fumarole.daemon.scheduler.model.resources import Resource

HUGE = rl(cpu="20000m", memory="20G")
NORMAL = rl(cpu="2000m", memory="2G")


def quota(name: str, ns: str, hard: dict[str, str], used: dict[str, str] | None = None) -> ResourceQuotaInfo:
    return ResourceQuotaInfo(name, ns, dict(hard), dict(used or {}))


def session_with(jobs: list[Any], quotas: list[ResourceQuotaInfo], conf: Any = None) -> Session:
    snap = mk_snapshot([mk_node("n1", "4", "4G")], jobs)
    for q in quotas:
        snap.namespaces.setdefault(q.namespace, NamespaceInfo(q.namespace)).quotas.append(q)
    return open_session(snap, conf or mk_conf("enqueue", ["resourcequota"]))


# ---------------------------------------- resourcequota_test.go TestResourceQuotaPlugin
@pytest.mark.parametrize(
    ("case", "min_resources", "with_quota", "expected"),
    [
        ("ResourceQuota capacity can match the needs of this pg", NORMAL, True, True),
        ("ResourceQuota capacity can't match the needs of this pg", HUGE, True, False),
        ("No ResourceQuota resource object", HUGE, False, True),
        ("MinResources field of pg is not set", None, True, True),
    ],
)
def test_volcano_resource_quota_table(
    case: str, min_resources: Resource | None, with_quota: bool, expected: bool
) -> None:
    j = mk_job("pg1", "c1", min_available=2, min_resources=min_resources, phase="Inqueue")
    quotas = [quota("test", "default", {"cpu": "2000m", "memory": "2G"})] if with_quota else []
    ssn = session_with([j], quotas)
    assert ssn.job_enqueueable(ssn.jobs[j.uid]) is expected, case


# ---------------------------------------- TestJobEnqueuedOnOtherPluginsReject
class _Rejecter:
    """Volcano's uthelper.RejecterPlugin: rejects one job at JobEnqueueable, permits the rest."""

    name = "test-rejecter"

    def __init__(self, arguments: dict[str, Any]) -> None:
        self.reject = "ns1/pgA"

    def on_session_open(self, ssn: Session) -> None:
        ssn.register(
            cb.JOB_ENQUEUEABLE, self.name, lambda job: cb.REJECT if job.uid == self.reject else cb.PERMIT
        )

    def on_session_close(self, ssn: Session) -> None:
        return None


def test_job_rejected_by_a_co_tier_plugin_does_not_consume_quota(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setitem(registry.PLUGINS, "test-rejecter", _Rejecter)
    one = rl(cpu="1", memory="1G")
    a = mk_job("pgA", "q1", namespace="ns1", min_resources=one, phase="Pending")
    b = mk_job("pgB", "q1", namespace="ns1", min_resources=one, phase="Pending")
    add_tasks(a, 1, "1", "1G", prefix="podA")
    add_tasks(b, 1, "1", "1G", prefix="podB")
    conf = mk_conf("enqueue", ["resourcequota", "test-rejecter"])
    ssn = session_with([a, b], [quota("rq1", "ns1", {"cpu": "1", "memory": "1G"})], conf)
    run_actions(ssn, "enqueue")
    assert ssn.jobs["ns1/pgB"].status.phase == "Inqueue"
    assert ssn.jobs["ns1/pgA"].status.phase == "Pending"


# ---------------------------------------- accounting
def test_used_plus_admitted_jobs_count_against_hard() -> None:
    jobs = []
    for name in ("j1", "j2", "j3"):
        j = mk_job(name, min_resources=rl(cpu="1"), phase="Pending")
        add_tasks(j, 1, "1", None)
        jobs.append(j)
    ssn = session_with(jobs, [quota("rq", "default", {"cpu": "3"}, {"cpu": "1"})])
    run_actions(ssn, "enqueue")
    phases = {j.name: ssn.jobs[j.uid].status.phase for j in jobs}
    assert phases == {"j1": "Inqueue", "j2": "Inqueue", "j3": "Pending"}
    msg = ssn.enqueue_rejections["default/j3"]
    assert msg == (
        "resourcequota: resource quota insufficient, "
        "requested: map[cpu:1], used: map[cpu:1], limited: map[cpu:3]"
    )


def test_only_requested_names_that_the_quota_lists_are_compared() -> None:
    # cpu is already over hard, but the job asks for memory only: cpu is not checked.
    mem_only = mk_job("mem", min_resources=rl(memory="1G"))
    # requests.cpu / limits.memory are not the names minResources uses: never compared.
    prefixed = mk_job("prefixed", min_resources=rl(cpu="100", memory="100G"))
    ssn = session_with(
        [mem_only, prefixed],
        [
            quota("over", "default", {"cpu": "2", "memory": "4G"}, {"cpu": "5", "memory": "1G"}),
            quota("prefixed", "default", {"requests.cpu": "1", "limits.memory": "1G"}),
        ],
    )
    assert ssn.job_enqueueable(ssn.jobs[mem_only.uid]) is True
    cpu_job = mk_job("cpu", min_resources=rl(cpu="100m"))
    ssn = session_with([cpu_job], [quota("over", "default", {"cpu": "2"}, {"cpu": "5"})])
    assert ssn.job_enqueueable(ssn.jobs[cpu_job.uid]) is False
    ssn = session_with(
        [prefixed], [quota("prefixed", "default", {"requests.cpu": "1", "limits.memory": "1G"})]
    )
    assert ssn.job_enqueueable(ssn.jobs[prefixed.uid]) is True


def test_every_quota_of_the_namespace_must_fit_and_other_namespaces_do_not_matter() -> None:
    j = mk_job("j", namespace="team", min_resources=rl(cpu="2", memory="1G", pods="1"))
    ok = quota("a-cpu", "team", {"cpu": "4"})
    pods = quota("b-pods", "team", {"pods": "3"}, {"pods": "3"})
    elsewhere = quota("c", "other", {"cpu": "1"})
    assert session_with([j], [ok, elsewhere]).job_enqueueable(j) is True
    ssn = session_with([j], [ok, pods])
    assert ssn.job_enqueueable(ssn.jobs[j.uid]) is False
    assert "requested: map[pods:1], used: map[pods:3], limited: map[pods:3]" in ssn.enqueue_rejections[j.uid]


def test_pending_of_a_namespace_is_the_full_min_resources() -> None:
    # j1 asks cpu and memory; the memory quota only sees j1's memory once j1 is admitted.
    j1 = mk_job("j1", min_resources=rl(cpu="1", memory="3G"), phase="Pending")
    j2 = mk_job("j2", min_resources=rl(memory="2G"), phase="Pending")
    add_tasks(j1, 1, "1", "3G")
    add_tasks(j2, 1, None, "2G")
    ssn = session_with([j1, j2], [quota("mem", "default", {"memory": "4G"})])
    run_actions(ssn, "enqueue")
    assert ssn.jobs[j1.uid].status.phase == "Inqueue"
    assert ssn.jobs[j2.uid].status.phase == "Pending"


def test_manifests_feed_quota_status_and_the_cli_explains_the_refusal() -> None:
    objs: list[dict[str, Any]] = [
        {
            "apiVersion": "v1",
            "kind": "Node",
            "metadata": {"name": "n1"},
            "status": {"allocatable": {"cpu": "8", "memory": "8Gi", "pods": "10"}},
        },
        {
            "apiVersion": "v1",
            "kind": "ResourceQuota",
            "metadata": {"name": "rq", "namespace": "t"},
            "spec": {"hard": {"cpu": "100"}},
            "status": {"hard": {"cpu": "2"}, "used": {"cpu": "1"}},
        },
        {
            "apiVersion": "scheduling.volcano.sh/v1beta1",
            "kind": "PodGroup",
            "metadata": {"name": "pg", "namespace": "t"},
            "spec": {"minMember": 1, "minResources": {"cpu": "2"}},
            "status": {"phase": "Pending"},
        },
        {
            "apiVersion": "v1",
            "kind": "Pod",
            "metadata": {
                "name": "p",
                "namespace": "t",
                "annotations": {"scheduling.k8s.io/group-name": "pg"},
            },
            "spec": {
                "schedulerName": "volcano",
                "containers": [{"name": "c", "resources": {"requests": {"cpu": "2"}}}],
            },
        },
    ]
    snap = build_snapshot(("m.yaml", i, o) for i, o in enumerate(objs))
    res = run(snap, mk_conf("enqueue, allocate", ["resourcequota"]))
    assert res.podgroups["t/pg"].phase == "Pending"
    assert not res.binds
    assert "resource quota insufficient" in res.pending["t/p"]
    # spec.hard would admit it: status is what counts.
    assert snap.namespaces["t"].quotas[0].hard == {"cpu": "2"}
