"""drf makes a job's attr at its first lookup (plugins/drf.py `JobAttrs`), not for every job at
open: whatever the order of lookups and of the session's allocations and discards, each attr
equals the eager one (the job's allocated-status sum, kept by the allocate/deallocate events)
over random jobs whose tasks were added, moved and removed before the session (hypothesis)."""

from __future__ import annotations

import sys
from pathlib import Path
from typing import Any

from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))
from fumarole_sched_kit import mk_conf, open_session
from test_open_aggregates import job_spec, snapshot_of

from fumarole.daemon.scheduler.framework.statement import Statement
from fumarole.daemon.scheduler.model.resources import Resource
from fumarole.daemon.scheduler.model.task import ALLOCATED_STATUSES, TaskStatus
from fumarole.daemon.scheduler.plugins.drf import dominant_share

# One step: (job pick, kind) with kind 0 = look the job's attr up, 1 = allocate one of its pending
# tasks in a statement kept, 2 = the same in a statement discarded.
step = st.tuples(st.integers(0, 50), st.integers(0, 2))


@settings(max_examples=150, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(st.lists(job_spec, min_size=1, max_size=6), st.lists(step, max_size=12))
def test_lazy_drf_attrs_equal_the_eager_ones(jobs_spec: list[Any], steps: list[Any]) -> None:
    snap = snapshot_of(jobs_spec)
    ssn = open_session(snap, mk_conf("allocate", ["drf"]))
    drf: Any = ssn.plugins["drf"]
    assert dict.__len__(drf.attrs) == 0  # nothing made at open
    uids = sorted(ssn.jobs)
    node = ssn.nodes["n0"]
    for pick, kind in steps:
        uid = uids[pick % len(uids)]
        if kind == 0:
            drf.attrs.get(uid)
            continue
        pending = sorted(ssn.jobs[uid].peek_in(TaskStatus.PENDING))
        if not pending:
            continue
        stmt = Statement(ssn)
        stmt.allocate(ssn.jobs[uid].tasks[pending[pick % len(pending)]], node)
        if kind == 2:
            stmt.discard()
        else:
            stmt.commit()
    assert drf.attrs.get("no-such-job") is None
    for uid in uids:
        expected = Resource()
        for status, bucket in ssn.jobs[uid].peek_index().items():
            if status in ALLOCATED_STATUSES:
                for t in bucket.values():
                    expected.add(t.resreq)
        attr = drf.attrs[uid]
        assert (attr.allocated.cpu, attr.allocated.memory) == (expected.cpu, expected.memory)
        assert {k: v for k, v in attr.allocated.scalars.items() if v} == {
            k: v for k, v in expected.scalars.items() if v
        }
        assert attr.share == dominant_share(expected, ssn.total_resource)
