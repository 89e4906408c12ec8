"""Human-readable tables for `fumarole schedule --format table`."""

from __future__ import annotations

from daemon.offline import DryRunResult, quantities, rfc3339


def _fmt_res(r: object) -> str:
    from daemon.scheduler.model.resources import Resource

    if not isinstance(r, Resource):
        return "-"
    q = quantities(r)
    return ", ".join(f"{k}={v}" for k, v in q.items() if k != "pods") or "-"


def _table(headers: list[str], rows: list[list[str]]) -> str:
    widths = [len(h) for h in headers]
    for row in rows:
        for i, cell in enumerate(row):
            widths[i] = max(widths[i], len(cell))
    lines = ["  ".join(h.ljust(widths[i]) for i, h in enumerate(headers)).rstrip()]
    lines.append("  ".join("-" * w for w in widths))
    for row in rows:
        lines.append("  ".join(cell.ljust(widths[i]) for i, cell in enumerate(row)).rstrip())
    return "\n".join(lines) + "\n"


def render_table(res: DryRunResult) -> str:
    last = res.last
    assert last is not None
    out: list[str] = [f"Fumarole dry run: {res.cycles} cycle(s), now {rfc3339(res.now)}\n"]
    if last.queues:
        out.append("\nQUEUES\n")
        rows = [
            [
                name,
                str(q.get("weight", "")),
                _fmt_res(q.get("deserved")),
                _fmt_res(q.get("allocated")),
                f"{float(q.get('share', 0.0)):.3f}",
            ]
            for name, q in last.queues.items()
        ]
        out.append(_table(["QUEUE", "WEIGHT", "DESERVED", "ALLOCATED", "SHARE"], rows))
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
