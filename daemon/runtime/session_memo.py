"""Reusing the last session's result when the snapshot it read has not changed (an idle cycle).

A session is a pure function of (snapshot, configuration), and the snapshot of cycle N+1 differs
from cycle N's only by its virtual `now` and its session id when no event outside
`fumarole.daemon.cache.projection.SNAPSHOT_NEUTRAL` was folded in between (the projection's
`generation` is unchanged: the very same task, node and job objects are handed out).  So the
session of cycle N+1 decides exactly what cycle N's did, and its result can be reused, when:

* the projection's generation and the configuration (the same parsed object, same hash) are the
  ones the remembered session ran with;
* that session never read `now` (`SessionResult.read_now`: the sla, tdm, cdp and deviceshare
  plugins read it, and enqueue does for every job it considers, so such cycles always run);
* that session asked no outside service (the extender plugin's callouts: their answers may
  change with no event in the log, and Volcano asks again every session);
* neither the remembered session id nor the new one is a transition id of a PodGroup condition in
  the snapshot.  The session id enters decisions only by equality with those ids (close.py's
  Unschedulable check); conditions a session writes with its own id are decisions, which change
  the generation when folded, so in practice the snapshot holds only older ids.

A cycle that decided something (binds, evictions, PodGroup statuses) folds those decisions and so
bumps the generation: the next cycle runs a fresh session.  Pipelines, explanations and queue
figures are neutral: a reused result re-emits the same pipelines and `decide` compares
explanations and figures with those in force, as for a fresh session.  `fumarole replay` never
reuses (it runs every session), so it checks this equivalence on every recorded history; the
tests compare reused and fresh cycles over random event sequences.

What a reused result does not carry over: its measured seconds and callback statistics (zeroed),
and the outcomes of PodGroups whose status did not change (they keep the remembered session's
transition ids; no event carries them).
"""

from __future__ import annotations

from dataclasses import dataclass, replace

from fumarole.daemon.scheduler.framework.conf import SchedulerConf
from fumarole.daemon.scheduler.framework.run import SessionResult
from fumarole.daemon.scheduler.model.snapshot import ClusterSnapshot

__all__ = ["SessionMemo", "transition_ids"]


def transition_ids(snapshot: ClusterSnapshot) -> frozenset[str]:
    """Every transition id of a PodGroup condition in the snapshot."""
    return frozenset(c.transition_id for j in snapshot.jobs.values() for c in j.status.conditions)


@dataclass(slots=True)
class _Remembered:
    generation: int
    conf: SchedulerConf
    conf_hash: str
    result: SessionResult
    snapshot: ClusterSnapshot
    counts: tuple[int, int]
    ids: frozenset[str] | None = None
    """`transition_ids(snapshot)`, computed at the first recall (most sessions are never recalled:
    a cycle after any change runs a fresh session, so the walk over every job is not paid then)."""


class SessionMemo:
    """The last session's result and what it was computed from (see the module notes)."""

    def __init__(self) -> None:
        self._last: _Remembered | None = None
        self.reused = 0

    def recall(
        self, generation: int, conf: SchedulerConf, conf_hash: str, session_id: str
    ) -> tuple[SessionResult, tuple[int, int]] | None:
        """The remembered result, as the session `session_id` would give it, or None (run one)."""
        last = self._last
        if last is None or last.generation != generation:
            return None
        if last.conf is not conf or last.conf_hash != conf_hash:
            return None
        if last.ids is None:
            last.ids = transition_ids(last.snapshot)
        if session_id in last.ids or last.result.session_id in last.ids:
            return None
        self.reused += 1
        result = replace(
            last.result,
            session_id=session_id,
            stats={},
            action_seconds={},
            phase_seconds={"open": 0.0, "actions": 0.0, "close": 0.0, "result": 0.0},
        )
        return result, last.counts

    def remember(
        self,
        generation: int,
        conf: SchedulerConf,
        conf_hash: str,
        snapshot: ClusterSnapshot,
        result: SessionResult,
        counts: tuple[int, int],
        *,
        called_out: bool = False,
    ) -> None:
        """Keep a fresh session's result for the next cycles, when it may be reused at all."""
        self._last = None
        if result.read_now or called_out:
            return
        self._last = _Remembered(generation, conf, conf_hash, result, snapshot, counts)
