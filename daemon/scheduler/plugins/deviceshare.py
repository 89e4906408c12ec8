"""The deviceshare plugin: GPU cards per node (gpushare, vGPU) filtered, scored and allocated.

Volcano keeps device pools in each NodeInfo (`Others`), updates them when a task is added to
or removed from a node, and allocates cards in the *predicates* plugin's allocate handler.
Fumarole keeps the pools in this plugin for the session and drives them from one event
handler in the same order: the node-level accounting (a task added with any status but
Pipelined/Releasing occupies the cards its own annotations name; removing it frees them), then,
when the predicates plugin is configured, the card allocation whose annotations are recorded on
the task (`TaskInfo.bind_annotations`), so later tasks of the session see the card as used.
As in Volcano, the card allocation runs only when the predicates handler's Reserve step passes
(a victim put back by a discarded Statement is counted once, from its annotations), and a card
that cannot be allocated answers an EventError, which rolls a Statement's Pipeline or Allocate
back (Volcano's `Event.Err`).

With `deviceshare.NodeLockEnable` a locked node passes the filter and fails the allocation (an
EventError), as Volcano's LockNode inside the devices' Allocate does.

Deviations, all documented in docs/plugins.md (plugin `deviceshare`): the Ascend NPU devices and
`deviceshare.GPUExclusiveRules` are not implemented (warning), and ties among cards are broken
by card index.
"""

from __future__ import annotations

import math
import re
from collections.abc import Hashable
from dataclasses import dataclass, field
from datetime import datetime
from typing import Any

import numpy as np

from fumarole.daemon.scheduler.framework import combinators as cb
from fumarole.daemon.scheduler.framework.conf import ConfError, arg_bool, arg_int, arg_str
from fumarole.daemon.scheduler.framework.nodetable import BoolArray, FloatArray, IntArray
from fumarole.daemon.scheduler.framework.session import EventError, EventHandler, Session
from fumarole.daemon.scheduler.model.fit import Code, FitError, fit_error
from fumarole.daemon.scheduler.model.node import NodeInfo
from fumarole.daemon.scheduler.model.task import TaskInfo, TaskStatus
from fumarole.daemon.scheduler.plugins.deviceshare_gpushare import GpuSharePool
from fumarole.daemon.scheduler.plugins.deviceshare_kept import KeptPools, kept_pools
from fumarole.daemon.scheduler.plugins.deviceshare_vgpu import (
    FILTER_ERROR,
    VGpuPool,
    filter_key,
)

NAME = "deviceshare"
GPU_SHARING_ENABLE = "deviceshare.GPUSharingEnable"
GPU_NUMBER_ENABLE = "deviceshare.GPUNumberEnable"
VGPU_ENABLE = "deviceshare.VGPUEnable"
NODE_LOCK_ENABLE = "deviceshare.NodeLockEnable"
ASCEND_MINDCLUSTER_VNPU_ENABLE = "deviceshare.AscendMindClusterVNPUEnable"
ASCEND_HAMI_VNPU_ENABLE = "deviceshare.AscendHAMiVNPUEnable"
SCHEDULE_POLICY = "deviceshare.SchedulePolicy"
SCHEDULE_WEIGHT = "deviceshare.ScheduleWeight"
KNOWN_GEOMETRIES_CM_NAME = "deviceshare.KnownGeometriesCMName"
KNOWN_GEOMETRIES_CM_NAMESPACE = "deviceshare.KnownGeometriesCMNamespace"
GPU_EXCLUSIVE_RULES = "deviceshare.GPUExclusiveRules"
PREDICATES_PLUGIN = "predicates"
FGD_PLUGIN = "fgd"
# Beyond Volcano: opt-in plugins that choose a vGPU pod's cards (their `card_order`), first wins.
CARD_CHOOSERS = (FGD_PLUGIN, "paper-random")
NODE_LOCK_SECONDS = 300.0
_RFC3339 = re.compile(r"^\d{4}-\d{2}-\d{2}T\d{2}:\d{2}:\d{2}(\.\d+)?(Z|[+-]\d{2}:\d{2})$")

Pool = GpuSharePool | VGpuPool


@dataclass(frozen=True, slots=True)
class DeviceShareArgs:
    """Every argument Volcano's deviceshare reads, with its default."""

    gpu_sharing: bool = False
    gpu_number: bool = False
    vgpu: bool = False
    node_lock: bool = False
    ascend_mindcluster_vnpu: bool = False
    ascend_hami_vnpu: bool = False
    schedule_policy: str = ""
    schedule_weight: int = 0
    known_geometries_cm_name: str = "volcano-vgpu-device-config"
    known_geometries_cm_namespace: str = "kube-system"
    exclusive_rules: bool = False


def parse_arguments(arguments: dict[str, Any]) -> DeviceShareArgs:
    """Read the arguments; Volcano's fatal combinations are configuration errors here."""
    a = DeviceShareArgs(
        gpu_sharing=arg_bool(arguments, GPU_SHARING_ENABLE, False),
        gpu_number=arg_bool(arguments, GPU_NUMBER_ENABLE, False),
        vgpu=arg_bool(arguments, VGPU_ENABLE, False),
        node_lock=arg_bool(arguments, NODE_LOCK_ENABLE, False),
        ascend_mindcluster_vnpu=arg_bool(arguments, ASCEND_MINDCLUSTER_VNPU_ENABLE, False),
        ascend_hami_vnpu=arg_bool(arguments, ASCEND_HAMI_VNPU_ENABLE, False),
        schedule_policy=arg_str(arguments, SCHEDULE_POLICY, ""),
        schedule_weight=arg_int(arguments, SCHEDULE_WEIGHT, 0),
        known_geometries_cm_name=arg_str(arguments, KNOWN_GEOMETRIES_CM_NAME, "volcano-vgpu-device-config"),
        known_geometries_cm_namespace=arg_str(arguments, KNOWN_GEOMETRIES_CM_NAMESPACE, "kube-system"),
        exclusive_rules=GPU_EXCLUSIVE_RULES in arguments,
    )
    if a.gpu_sharing and a.gpu_number:
        raise ConfError(
            f"plugin {NAME}: {GPU_SHARING_ENABLE} and {GPU_NUMBER_ENABLE}: "
            "can not define true in both gpu sharing and gpu number"
        )
    if (a.gpu_sharing or a.gpu_number) and a.vgpu:
        raise ConfError(f"plugin {NAME}: {VGPU_ENABLE}: gpu-share and vgpu can't be used together")
    return a


def warnings_for(a: DeviceShareArgs) -> list[str]:
    out = []
    if a.ascend_mindcluster_vnpu:
        out.append(
            f"{NAME}: {ASCEND_MINDCLUSTER_VNPU_ENABLE}: Ascend NPU devices are not implemented; ignored"
        )
    if a.ascend_hami_vnpu:
        out.append(f"{NAME}: {ASCEND_HAMI_VNPU_ENABLE}: Ascend NPU devices are not implemented; ignored")
    if a.exclusive_rules:
        out.append(f"{NAME}: {GPU_EXCLUSIVE_RULES}: exclusive GPU rules are not implemented; ignored")
    return out


def _lock_time(text: str) -> float | None:
    if not _RFC3339.match(text):
        return None
    try:
        return datetime.fromisoformat(text.replace("Z", "+00:00")).timestamp()
    except ValueError:
        return None


@dataclass(slots=True)
class NodeDevices:
    """The registered device pools of one node, in Volcano's registration order."""

    pools: list[Pool] = field(default_factory=list)


class DeviceSharePlugin:
    name = NAME

    def __init__(self, arguments: dict[str, Any]) -> None:
        self.args = parse_arguments(arguments)
        self.nodes: dict[str, NodeDevices] = {}
        # Task uid -> node whose pools hold the task through node-level accounting.
        self.on_node: dict[str, str] = {}
        # (node, lock name) locked during this session by an allocation (deviceshare.NodeLockEnable).
        self.session_locks: set[tuple[str, str]] = set()
        self.allocates_cards = False
        self.now = 0.0
        # Task uid -> (task, its vGPU FilterNode key), so the key is computed once per task.
        self.filter_keys: dict[str, tuple[TaskInfo, Hashable]] = {}
        # The session's nodes by row, and one pool of each kind present (batch callbacks).
        self.node_rows: list[NodeInfo] = []
        self.kinds: list[Pool] = []
        # vGPU only: the pools and FilterNode answers kept between sessions (deviceshare_kept.py),
        # and per row the score of this session's last FilterNode that fit (ScoreNode reads it).
        self.kept: KeptPools | None = None
        self.vgpu_score: FloatArray = np.zeros(0)

    # ----------------------------------------------------------------- pools
    def _pools_of(self, node: NodeInfo) -> NodeDevices:
        a = self.args
        nd = NodeDevices()
        if a.gpu_sharing or a.gpu_number:
            gs = GpuSharePool.from_node(node, sharing=a.gpu_sharing, number=a.gpu_number)
            if gs is not None:
                nd.pools.append(gs)
        if a.vgpu:
            vg = VGpuPool.from_node(node)
            if vg is not None:
                nd.pools.append(vg)
        return nd

    def pools(self, node_name: str) -> list[Pool]:
        nd = self.nodes.get(node_name)
        return nd.pools if nd is not None else []

    def _node_add(self, task: TaskInfo, node_name: str, annotations: dict[str, str]) -> None:
        pools = self.pools(node_name)
        if not pools:
            return
        self._touch(node_name)
        for p in pools:
            p.add_resource(task, annotations)
        self.on_node[task.uid] = node_name

    def _touch(self, node_name: str) -> None:
        if self.kept is not None:
            self.kept.touch(node_name)

    def _node_sub(self, task: TaskInfo) -> None:
        node_name = self.on_node.pop(task.uid, None)
        if node_name is None:
            return
        self._touch(node_name)
        for p in self.pools(node_name):
            p.sub_resource(task, task.pod.annotations)

    # ----------------------------------------------------------------- node lock
    def locked(self, node: NodeInfo, lock_name: str) -> bool:
        """LockNode would fail: locked earlier in this session, or an unexpired lock annotation."""
        if (node.name, lock_name) in self.session_locks:
            return True
        text = node.facts.annotations.get(lock_name)
        if text is None:
            return False
        t = _lock_time(text)
        if t is None:
            return True
        return self.now - t <= NODE_LOCK_SECONDS

    # ----------------------------------------------------------------- callbacks
    def predicate(self, task: TaskInfo, node: NodeInfo) -> FitError | None:
        for p in self.pools(node.name):
            if not p.has_request(task):
                continue
            if isinstance(p, VGpuPool):
                key = self.filter_keys.get(task.uid)
                if key is None or key[0] is not task:
                    key = self.filter_keys[task.uid] = (task, filter_key(task))
                msg = p.filter(task, self.args.schedule_policy, key[1])
                if msg is None and self.kept is not None:
                    row = self.kept.row_of.get(node.name)
                    if row is not None:
                        self.vgpu_score[row] = p.cached_score
            else:
                msg = p.filter(task, self.args.schedule_policy)
            if msg is not None:
                return fit_error(task.namespace, task.name, node.name, Code.UNSCHEDULABLE, msg)
        return None

    def predicate_batch(
        self, task: TaskInfo, rows: IntArray
    ) -> tuple[BoolArray, list[tuple[str, BoolArray]], BoolArray | None]:
        """`predicate` over node rows (the same verdicts, reasons and cached scores), without the
        per-node call when no pool type of the session is asked for by the task."""
        n = len(rows)
        ok = np.ones(n, dtype=np.bool_)
        reasons: list[tuple[str, BoolArray]] = []
        if not any(kind.has_request(task) for kind in self.kinds):
            return ok, reasons, None
        if self.kept is not None:
            return self._kept_predicate_batch(task, rows, self.kept)
        by_text: dict[str, list[int]] = {}
        nodes = self.node_rows
        for k in range(n):
            node = nodes[int(rows[k])]
            if node.name not in self.nodes:
                continue
            err = self.predicate(task, node)
            if err is not None:
                ok[k] = False
                for text in err.reasons():
                    by_text.setdefault(text, []).append(k)
        for text, ks in by_text.items():
            mask = np.zeros(n, dtype=np.bool_)
            mask[ks] = True
            reasons.append((text, mask))
        return ok, reasons, None

    def _filter_key(self, task: TaskInfo) -> Hashable:
        key = self.filter_keys.get(task.uid)
        if key is None or key[0] is not task:
            key = self.filter_keys[task.uid] = (task, filter_key(task))
        return key[1]

    def _kept_predicate_batch(
        self, task: TaskInfo, rows: IntArray, kept: KeptPools
    ) -> tuple[BoolArray, list[tuple[str, BoolArray]], BoolArray | None]:
        """`predicate_batch` with vGPU only (one pool per node): the answers kept
        per request key and row where the row's pool is unchanged since, FilterNode elsewhere.
        The same verdicts, reason and scores as asking every node."""
        key = self._filter_key(task)
        memo = kept.answers_for(key)
        pooled = kept.has_pool[rows]
        stale = rows[pooled & (memo.stamp[rows] != kept.stamp[rows])]
        policy = self.args.schedule_policy
        for row in stale.tolist():
            pool = kept.pools[row].pools[0]
            msg = pool.filter(task, policy, key)
            memo.fits[row] = msg is None
            memo.score[row] = pool.cached_score
            memo.stamp[row] = kept.stamp[row]
        fits = memo.fits[rows]
        ok: BoolArray = fits | ~pooled
        fit_rows = rows[pooled & fits]
        # FilterNode leaves its score for ScoreNode only when the node fits.
        self.vgpu_score[fit_rows] = memo.score[fit_rows]
        reasons: list[tuple[str, BoolArray]] = []
        if not ok.all():
            reasons.append((FILTER_ERROR, ~ok))
        return ok, reasons, None

    def score_batch(self, task: TaskInfo, rows: IntArray) -> FloatArray:
        """`device_score` over node rows."""
        out = np.zeros(len(rows))
        if not any(kind.has_request(task) for kind in self.kinds):
            return out
        if self.kept is not None:
            if self.args.schedule_weight <= 0:
                return out
            pooled = self.kept.has_pool[rows]
            out[pooled] = np.floor(self.vgpu_score[rows[pooled]] + 0.5) * self.args.schedule_weight
            return out
        nodes = self.node_rows
        for k in range(len(rows)):
            node = nodes[int(rows[k])]
            if node.name in self.nodes:
                out[k] = self.device_score(task, node)
        return out

    def device_score(self, task: TaskInfo, node: NodeInfo) -> float:
        """getDeviceScore: the pools' scores summed and rounded half up, times the weight."""
        if self.args.schedule_weight <= 0:
            return 0.0
        s = sum(self._pool_score(p, task, node) for p in self.pools(node.name) if p.has_request(task))
        return float(math.floor(s + 0.5) * self.args.schedule_weight)

    def _pool_score(self, p: Pool, task: TaskInfo, node: NodeInfo) -> float:
        if self.kept is not None and isinstance(p, VGpuPool):
            row = self.kept.row_of.get(node.name)
            return float(self.vgpu_score[row]) if row is not None else 0.0
        return p.score(task)

    def on_allocate(self, ssn: Session, task: TaskInfo) -> EventError | None:
        """NodeInfo.AddTask's device accounting, then the predicates handler's card allocation.

        The allocation runs only when Volcano's Reserve step passes (`volcano_reserve_succeeds`):
        a Running victim put back by `Statement.unevict` went through no PrePredicate this
        session, so its Reserve fails and it is counted once, from its own annotations.  A card
        that cannot be allocated answers an EventError, which makes a Statement's Pipeline or
        Allocate roll back (Volcano's `Event.Err`)."""
        node_name = task.node_name
        if not self.pools(node_name):
            return None
        if task.status not in (TaskStatus.PIPELINED, TaskStatus.RELEASING):
            self._node_add(task, node_name, dict(task.pod.annotations))
        if not self.allocates_cards:
            return None
        predicates = ssn.plugins.get(PREDICATES_PLUGIN)
        reserve = getattr(predicates, "volcano_reserve_succeeds", None)
        if reserve is not None and not reserve(task):
            return None
        node = ssn.nodes[node_name]
        self._touch(node_name)
        # Beyond Volcano: a configured fgd (or paper-random) plugin chooses the vGPU cards.
        card_order = next(
            (
                getattr(ssn.plugins[n], "card_order", None)
                for n in CARD_CHOOSERS
                if n in ssn.plugins and hasattr(ssn.plugins[n], "card_order")
            ),
            None,
        )
        for p in self.pools(node_name):
            if not p.has_request(task):
                continue
            res: dict[str, str] | str
            lock = self.args.node_lock and p.needs_lock(task)
            if lock and self.locked(node, p.lock_name):
                # LockNode fails: the allocation fails (the filter passed the node).
                res = f"node {node_name} is locked ({NODE_LOCK_ENABLE})"
            else:
                if lock and isinstance(p, GpuSharePool):
                    # gpushare locks before choosing its card: the lock stays if that fails.
                    self.session_locks.add((node_name, p.lock_name))
                if card_order is not None and isinstance(p, VGpuPool):
                    res = p.allocate(task, self.args.schedule_policy, self.now, card_order)
                else:
                    res = p.allocate(task, self.args.schedule_policy, self.now)
                if lock and isinstance(p, VGpuPool) and not isinstance(res, str):
                    self.session_locks.add((node_name, p.lock_name))  # vGPU: after its card fit
            if isinstance(res, str):
                msg = f"{NAME}: allocating {p.device_name} to {task.key} on {node_name}: {res}"
                ssn.warnings.append(msg)
                # Volcano's handler returns at the first device that fails.
                return EventError(msg)
            if res:
                task.bind_annotations = {**task.bind_annotations, **res}
        return None

    def on_deallocate(self, task: TaskInfo) -> None:
        node_name = task.node_name
        self._node_sub(task)
        if not self.allocates_cards:
            return
        self._touch(node_name)
        for p in self.pools(node_name):
            if not p.has_request(task):
                continue
            keys = p.release(task)
            if keys and any(k in task.bind_annotations for k in keys):
                task.bind_annotations = {k: v for k, v in task.bind_annotations.items() if k not in keys}

    # ----------------------------------------------------------------- session
    def on_session_open(self, ssn: Session) -> None:
        for w in warnings_for(self.args):
            if w not in ssn.warnings:
                ssn.warnings.append(w)
        self.now = ssn.now
        self.nodes = {}
        self.on_node = {}
        self.filter_keys = {}
        self.node_rows = []
        self.kinds = []
        self.session_locks = set()
        self.kept = None
        if not (self.args.gpu_sharing or self.args.gpu_number):
            # vGPU only: pools and FilterNode answers kept between sessions (deviceshare_kept.py).
            self.kept = kept_pools(ssn.derived, ssn.node_list, self.args, self._pools_of)
            self.nodes = dict(self.kept.nodes)
            self.on_node = dict(self.kept.on_node)
            self.vgpu_score = np.zeros(len(ssn.node_list))
        else:
            for node in ssn.node_list:
                nd = self._pools_of(node)
                if not nd.pools:
                    continue
                self.nodes[node.name] = nd
                for t in node.tasks.values():
                    if t.status in (TaskStatus.PIPELINED, TaskStatus.RELEASING):
                        continue
                    # The cache's pod carries what earlier bindings wrote.
                    self._node_add(t, node.name, {**t.pod.annotations, **t.bind_annotations})
        self.allocates_cards = ssn.plugin_option(PREDICATES_PLUGIN) is not None
        if self.nodes and not self.allocates_cards:
            ssn.warnings.append(
                f"{NAME}: the predicates plugin is not configured, so no card is allocated to a placed "
                "pod (Volcano allocates cards in the predicates plugin's allocate handler)"
            )
        self.node_rows = ssn.node_list
        # One pool of each kind present, to ask whether a task requests that kind at all.
        seen: dict[type, Pool] = {}
        for nd in self.nodes.values():
            for pool in nd.pools:
                seen.setdefault(type(pool), pool)
            if self.kept is not None:
                break  # vGPU only: one kind
        self.kinds = list(seen.values())
        ssn.register(cb.PREDICATE, NAME, self.predicate, self.predicate_batch)
        if self.args.schedule_weight > 0:
            # Volcano registers it always; with weight 0 it scores every node 0, which changes nothing.
            ssn.register(cb.NODE_ORDER, NAME, self.device_score, self.score_batch)
        ssn.add_event_handler(
            EventHandler(allocate=lambda t: self.on_allocate(ssn, t), deallocate=self.on_deallocate)
        )

    def on_session_close(self, ssn: Session) -> None:
        self.kept = None
        self.vgpu_score = np.zeros(0)
        self.nodes = {}
        self.on_node = {}
        self.filter_keys = {}
        self.node_rows = []
        self.kinds = []


def new(arguments: dict[str, Any]) -> DeviceSharePlugin:
    return DeviceSharePlugin(arguments)
