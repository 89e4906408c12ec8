"""daemon/cli/tables.py: rich-rendered tables, plain text for pipes and files, styled in a terminal."""

from __future__ import annotations

import re

from fumarole.daemon.cli.tables import text_table

ANSI = re.compile(r"\x1b\[[0-9;]*m")
LONG = "preempt: preempted by team/high-1 of job team/high (priority 1000); victims chosen by priority"


def test_plain_table_is_aligned_unwrapped_text_without_trailing_spaces() -> None:
    out = text_table(["POD", "WHY"], [["team/low-0", LONG], ["t/[bold]x", "n1"]])
    assert out == (
        "POD         WHY\n"  # columns two spaces apart, no rule, no colour
        f"team/low-0  {LONG}\n"  # longer than 80 columns: not wrapped
        "t/[bold]x   n1\n"  # cells are literal text, never rich markup
    )


def test_plain_table_without_rows_is_its_header() -> None:
    assert text_table(["POD", "NODE"], []) == "POD  NODE\n"


def test_terminal_table_has_bold_headers_and_wraps_to_the_width() -> None:
    out = text_table(["POD", "WHY"], [["team/low-0", LONG]], terminal_width=40)
    assert "\x1b[1m" in out
    lines = ANSI.sub("", out).splitlines()
    assert all(len(line.rstrip()) <= 40 for line in lines)
    assert len(lines) > 2
    assert " ".join(" ".join(line.split()) for line in lines[1:]) == f"team/low-0 {LONG}"
