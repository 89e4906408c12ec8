"""Human-readable tables: `fumarole schedule --format table` and `fumarole replay`'s table.

`text_table` lays rows out with rich's Table: plain text (no colour, no wrapping, no trailing
spaces, columns two spaces apart under one header line) unless a terminal width is given, when
headers are bold and long cells wrap to fit.
"""

from __future__ import annotations

import io
import math
import shutil
import sys

from rich.console import Console
from rich.table import Table
from rich.text import Text

from fumarole.daemon.cli.dry_run import DryRunResult, rfc3339
from fumarole.daemon.scheduler.model.resources import finite_quantities

# Plain output is never wrapped: a line is as long as its longest cell needs.
_UNBOUNDED_WIDTH = 1 << 20


_BINARY_UNITS = ("Ki", "Mi", "Gi", "Ti", "Pi", "Ei")


def human_bytes(amount: float) -> str:
    """Memory for people, in the largest binary unit it reaches, as kubectl's tables show it:
    `12Gi`, `1.5Gi`, `953.7Mi`, `512` (bytes below 1Ki); one decimal at most (the JSON output keeps
    the exact quantity)."""
    if not math.isfinite(amount):
        return str(amount)
    sign, b = ("-" if amount < 0 else ""), abs(amount)
    if b < 1024:
        return f"{sign}{math.ceil(b)}"
    exp = min(int(math.log(b, 1024)), len(_BINARY_UNITS))
    value = b / 1024**exp
    if value >= 1024 and exp < len(_BINARY_UNITS):  # log's rounding just under a power
        exp, value = exp + 1, value / 1024
    shown = f"{value:.1f}".removesuffix(".0")
    if shown == "1024" and exp < len(_BINARY_UNITS):
        exp, shown = exp + 1, "1"
    return f"{sign}{shown}{_BINARY_UNITS[exp - 1]}"


def _human(quantities: dict[str, str], r: object) -> dict[str, str]:
    from fumarole.daemon.scheduler.model.resources import MEMORY, Resource

    if isinstance(r, Resource) and MEMORY in quantities:
        quantities = {**quantities, MEMORY: human_bytes(r.memory)}
    return quantities


def _fmt_res(r: object) -> str:
    from fumarole.daemon.scheduler.model.resources import Resource

    if not isinstance(r, Resource):
        return "-"
    q = _human(finite_quantities(r), r)
    return ", ".join(f"{k}={v}" for k, v in q.items() if k != "pods") or "-"


def stdout_terminal_width() -> int | None:
    """stdout's width when it is a terminal (styled, wrapped tables), else None (plain text)."""
    return shutil.get_terminal_size().columns if sys.stdout.isatty() else None


def text_table(headers: list[str], rows: list[list[str]], *, terminal_width: int | None = None) -> str:
    """The rows under their headers; cells are literal text (no rich markup is interpreted)."""
    table = Table(box=None, pad_edge=False, padding=(0, 1), header_style="bold", highlight=False)
    for header in headers:
        table.add_column(header, overflow="fold", no_wrap=terminal_width is None)
    for row in rows:
        table.add_row(*(Text(cell) for cell in row))
    out = io.StringIO()
    console = Console(
        file=out,
        width=terminal_width or _UNBOUNDED_WIDTH,
        force_terminal=terminal_width is not None,
        color_system="standard" if terminal_width is not None else None,
        markup=False,
        highlight=False,
        emoji=False,
    )
    console.print(table)
    return "".join(line.rstrip() + "\n" for line in out.getvalue().splitlines())


def _fmt_written(r: object) -> str:
    """A queue's written status.allocated as Volcano writes it (cpu and memory also when zero),
    memory in human units (the JSON's `statusAllocated` is the exact quantity)."""
    from fumarole.daemon.scheduler.model.resources import Resource, resource_list

    if not isinstance(r, Resource):
        return "-"
    return ", ".join(f"{k}={v}" for k, v in _human(resource_list(r), r).items() if k != "pods")


def render_table(res: DryRunResult, *, terminal_width: int | None = None) -> str:
    """The dry run's queues, jobs, binds, pipelined pods, evictions and pending pods as tables."""

    def _table(headers: list[str], rows: list[list[str]]) -> str:
        return text_table(headers, rows, terminal_width=terminal_width)

    last = res.last
    assert last is not None
    out: list[str] = [f"Fumarole dry run: {res.cycles} cycle(s), now {rfc3339(res.now)}\n"]
    if last.queues or last.queue_allocated:
        # ALLOCATED is the queue-share plugin's figure (pipelined tasks count); STATUS.ALLOCATED is
        # what the session close writes to the Queue's status.allocated (they do not), every queue.
        out.append("\nQUEUES\n")
        rows = []
        for name in sorted({*last.queues, *last.queue_allocated}):
            q = last.queues.get(name)
            written = last.queue_allocated.get(name)
            rows.append(
                [
                    name,
                    str(q.get("weight", "")) if q else "-",
                    _fmt_res(q.get("deserved")) if q else "-",
                    _fmt_res(q.get("allocated")) if q else "-",
                    f"{float(q.get('share', 0.0)):.3f}" if q else "-",
                    _fmt_written(written),
                ]
            )
        out.append(_table(["QUEUE", "WEIGHT", "DESERVED", "ALLOCATED", "SHARE", "STATUS.ALLOCATED"], rows))
    out.append("\nJOBS\n")
    rows = []
    for uid, pg in last.podgroups.items():
        cond = pg.conditions[-1].type if pg.conditions else "-"
        rows.append([uid, pg.phase or "-", cond])
    for uid, skipped in res.out_of_session.items():
        rows.append([uid, skipped.phase or "-", skipped.reason])
    rows.sort(key=lambda row: row[0])
    out.append(_table(["JOB", "PHASE", "CONDITION"], rows))
    out.append("\nBINDS\n")
    out.append(_table(["POD", "NODE"], [[k, v] for k, v in sorted(res.binds.items())]))
    if last.pipelined:
        out.append("\nPIPELINED\n")
        out.append(_table(["POD", "NODE"], [[k, v] for k, v in sorted(last.pipelined.items())]))
    if res.evictions:
        out.append("\nEVICTIONS\n")
        out.append(
            _table(["POD", "WHY"], [[k, res.eviction_reasons.get(k, "")] for k in sorted(set(res.evictions))])
        )
    pending = {**last.pending, **res.out_of_session_pending}
    if pending:
        out.append("\nPENDING\n")
        out.append(_table(["POD", "WHY"], [[k, v] for k, v in sorted(pending.items())]))
    # Warnings go to stderr only (the CLI prints them once), not into the table.
    return "".join(out)
