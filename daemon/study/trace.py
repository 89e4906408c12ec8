"""The Alibaba GPU trace v2023 ("openb") as typed rows: pods and nodes read from its CSV files.

Any pod list with the columns of `openb_pod_list_default.csv` is accepted (the upstream folder has
CPU-heavy, GPU-sharing-heavy, multi-GPU and GPU-type-constrained samples of it). Only `name`,
`cpu_milli` and `num_gpu` are required (`REQUIRED_POD_COLUMNS`); a missing column takes the
default the paper's loader (its simulator's data/pod_csv_to_yaml.py) gives it, `POD_DEFAULTS`:
`memory_mib` 0 (no memory request), `gpu_milli` 1000 per GPU, `gpu_spec` empty (any model), `qos`
Guaranteed (the loader writes requests equal to limits, Kubernetes' Guaranteed class), `pod_phase`
Pending, `creation_time` 0 (every pod at once, as the simulator submits them), `deletion_time` 0
and `scheduled_time` none. The multi-GPU lists upstream have only the first five columns. A list
without `creation_time` and `deletion_time` cannot drive a timeline (`need_times`). Errors are
`TraceError`s naming the file, the line and the column (or that the file is not UTF-8, or that a
row has another number of fields than the header).
"""

from __future__ import annotations

import csv
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path

__all__ = [
    "MILLI",
    "NODE_COLUMNS",
    "POD_COLUMNS",
    "POD_DEFAULTS",
    "REQUIRED_POD_COLUMNS",
    "TraceError",
    "TraceNode",
    "TracePod",
    "pod_file",
    "read_nodes",
    "read_pods",
]

MILLI = 1000
POD_COLUMNS = (
    "name",
    "cpu_milli",
    "memory_mib",
    "num_gpu",
    "gpu_milli",
    "gpu_spec",
    "qos",
    "pod_phase",
    "creation_time",
    "deletion_time",
    "scheduled_time",
)
REQUIRED_POD_COLUMNS = ("name", "cpu_milli", "num_gpu")
# What a missing column reads as (the paper's loader's defaults; see the module's docstring).
POD_DEFAULTS = {
    "memory_mib": "0",
    "gpu_milli": str(1000),
    "gpu_spec": "",
    "qos": "Guaranteed",
    "pod_phase": "Pending",
    "creation_time": "0",
    "deletion_time": "0",
    "scheduled_time": "",
}
TIME_COLUMNS = ("creation_time", "deletion_time")
NODE_COLUMNS = ("sn", "cpu_milli", "memory_mib", "gpu", "model")
QOS_NAMES = ("LS", "Guaranteed", "Burstable", "BE")


class TraceError(ValueError):
    """Bad trace input; the message names the file, the line and the column."""


@dataclass(frozen=True, slots=True)
class TracePod:
    """One pod of a pod list. `gpu_milli` is per GPU (1000 for whole GPUs, 0 for CPU-only pods)."""

    name: str
    cpu_milli: int
    memory_mib: int
    num_gpu: int
    gpu_milli: int
    gpu_spec: tuple[str, ...]
    qos: str
    phase: str
    creation: int
    deletion: int
    scheduled: int | None

    @property
    def shared(self) -> bool:
        """A GPU-sharing pod: one GPU, less than all of it."""
        return self.num_gpu == 1 and 0 < self.gpu_milli < MILLI

    @property
    def total_gpu_milli(self) -> int:
        return self.num_gpu * self.gpu_milli

    def lifetime_s(self) -> int:
        """Seconds it ran in production: deletion - scheduled (- creation if never scheduled), >= 1."""
        began = self.scheduled if self.scheduled is not None else self.creation
        return max(1, self.deletion - began)


@dataclass(frozen=True, slots=True)
class TraceNode:
    name: str
    cpu_milli: int
    memory_mib: int
    gpus: int
    model: str


def _not_utf8(path: Path, e: UnicodeDecodeError) -> TraceError:
    """The line of the first byte that is not UTF-8."""
    try:
        raw = path.read_bytes()
    except OSError:
        return TraceError(f"{path}: not UTF-8 text ({e.reason})")
    for i, line in enumerate(raw.split(b"\n")):
        try:
            line.decode("utf-8")
        except UnicodeDecodeError as bad:
            return TraceError(f"{path}: line {i + 1}: not UTF-8 text ({bad.reason} at byte {bad.start + 1})")
    return TraceError(f"{path}: not UTF-8 text ({e.reason})")


def _read_csv(
    path: Path, columns: Sequence[str], defaults: dict[str, str] | None = None
) -> list[tuple[int, dict[str, str]]]:
    """The rows as (line, row); every one of `columns` in the header unless it has a default
    (then rows read it as the default); a row must have as many fields as the header."""
    defaults = defaults or {}
    try:
        with path.open(newline="", encoding="utf-8") as f:
            reader = csv.reader(f)
            header = [h.strip() for h in next(reader, [])]
            missing = [c for c in columns if c not in header and c not in defaults]
            if missing:
                raise TraceError(f"{path}: missing column(s) {', '.join(missing)}")
            absent = {c: v for c, v in defaults.items() if c not in header}
            rows: list[tuple[int, dict[str, str]]] = []
            for fields in reader:
                line = reader.line_num
                if not fields:
                    continue  # a blank line
                if len(fields) != len(header):
                    raise TraceError(
                        f"{path}: line {line}: {len(fields)} field(s), the header has {len(header)}"
                    )
                row = dict(zip(header, fields, strict=True))
                row.update(absent)
                rows.append((line, row))
            return rows
    except UnicodeDecodeError as e:
        raise _not_utf8(path, e) from None
    except csv.Error as e:
        raise TraceError(f"{path}: not a CSV file: {e}") from None
    except OSError as e:
        raise TraceError(f"{path}: cannot read: {e}") from e


def _int(path: Path, line: int, row: dict[str, str], col: str, default: int | None = None) -> int:
    text = (row.get(col) or "").strip()
    if not text and default is not None:
        return default
    try:
        value = int(float(text))
    except ValueError:
        raise TraceError(f"{path}: line {line}: column {col}: expected a number, got {text!r}") from None
    if value < 0:
        raise TraceError(f"{path}: line {line}: column {col}: must not be negative, got {text!r}")
    return value


def _pod(path: Path, line: int, row: dict[str, str]) -> TracePod:
    qos = row["qos"].strip()
    if qos not in QOS_NAMES:
        raise TraceError(
            f"{path}: line {line}: column qos: unknown class {qos!r} (expected {', '.join(QOS_NAMES)})"
        )
    num_gpu = _int(path, line, row, "num_gpu", 0)
    gpu_milli = _int(path, line, row, "gpu_milli", 0)
    if num_gpu == 0:
        gpu_milli = 0
    elif gpu_milli == 0:
        gpu_milli = MILLI  # a GPU pod with no share given asks for whole cards
    if gpu_milli > MILLI:
        raise TraceError(f"{path}: line {line}: column gpu_milli: at most {MILLI} (a share of one GPU)")
    if num_gpu > 1 and gpu_milli != MILLI:
        raise TraceError(
            f"{path}: line {line}: column gpu_milli: a pod of {num_gpu} GPUs must take whole GPUs"
        )
    sched_text = (row.get("scheduled_time") or "").strip()
    return TracePod(
        name=row["name"].strip(),
        cpu_milli=_int(path, line, row, "cpu_milli"),
        memory_mib=_int(path, line, row, "memory_mib"),
        num_gpu=num_gpu,
        gpu_milli=gpu_milli,
        gpu_spec=tuple(sorted(m.strip() for m in row["gpu_spec"].split("|") if m.strip())),
        qos=qos,
        phase=row["pod_phase"].strip(),
        creation=_int(path, line, row, "creation_time"),
        deletion=_int(path, line, row, "deletion_time", 0),
        scheduled=_int(path, line, row, "scheduled_time") if sched_text else None,
    )


def pod_file(trace: Path) -> Path:
    """A pod-list CSV itself, or the default one of a trace folder (else its first pod list)."""
    if trace.is_file():
        return trace
    files = sorted(trace.glob("openb_pod_list*.csv"))
    if not files:
        raise TraceError(f"{trace}: no openb_pod_list*.csv file")
    default = trace / "openb_pod_list_default.csv"
    return default if default in files else files[0]


def read_pods(path: Path, need_times: bool = False) -> list[TracePod]:
    """Every pod of the file, in file order; `need_times`: the list must have its own
    creation and deletion times (a timeline replays them)."""
    rows = _read_csv(path, POD_COLUMNS, POD_DEFAULTS)
    if need_times:
        with path.open(newline="", encoding="utf-8") as f:
            header = [h.strip() for h in next(csv.reader(f), [])]
        lacking = [c for c in TIME_COLUMNS if c not in header]
        if lacking:
            raise TraceError(
                f"{path}: no {' or '.join(lacking)} column: a timeline replays the trace's times "
                "(run inflation on this list)"
            )
    pods = [_pod(path, line, r) for line, r in rows]
    if not pods:
        raise TraceError(f"{path}: no pods")
    return pods


def read_nodes(path: Path) -> list[TraceNode]:
    """Every node of a node list, in file order."""
    rows = _read_csv(path, NODE_COLUMNS)
    out = [
        TraceNode(
            name=r["sn"].strip(),
            cpu_milli=_int(path, line, r, "cpu_milli"),
            memory_mib=_int(path, line, r, "memory_mib"),
            gpus=_int(path, line, r, "gpu", 0),
            model=r["model"].strip(),
        )
        for line, r in rows
    ]
    if not out:
        raise TraceError(f"{path}: no nodes")
    return out
