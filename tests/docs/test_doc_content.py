"""What the docs say is true of the code and whole as prose: each command's synopsis gives every
option the value the parser takes, no paragraph stops mid-sentence, each Kubernetes setting is listed once,
and docs/development.md's layout names every package and module of the tree it describes."""

from __future__ import annotations

import argparse
import re
from pathlib import Path

import pytest

from fumarole.daemon.cli.main import build_parser

ROOT = Path(__file__).resolve().parents[2]
PAGES = [ROOT / "README.md", *sorted((ROOT / "docs").glob("*.md"))]
FENCE = re.compile(r"^(```|~~~).*?^\1", re.M | re.S)


def _subparser(name: str) -> argparse.ArgumentParser:
    parser = build_parser()
    for action in parser._actions:
        if isinstance(action, argparse._SubParsersAction):
            return action.choices[name]  # type: ignore[no-any-return]
    raise AssertionError("no subcommands")


@pytest.mark.parametrize(
    ("page", "command"), [("daemon.md", "run"), ("schedule.md", "schedule"), ("replay.md", "replay")]
)
def test_synopsis_gives_each_option_the_value_the_parser_takes(page: str, command: str) -> None:
    text = (ROOT / "docs" / page).read_text()
    block = re.search(rf"```\n(fumarole {command} .*?)```", text, re.S)
    assert block, f"docs/{page}: no synopsis of fumarole {command}"
    options = {flag: action for action in _subparser(command)._actions for flag in action.option_strings}
    wrong = []
    for flag, value in re.findall(r"\[?(--[\w-]+)(?: ([^\]\s]+))?", block.group(1)):
        action = options.get(flag)
        assert action is not None, f"docs/{page}: {flag} is not an option of fumarole {command}"
        if action.metavar is not None and value != action.metavar:
            wrong.append(f"{flag} {value or '(no value)'}: the parser takes {flag} {action.metavar}")
    assert not wrong, f"docs/{page}: {wrong}"


def _blocks(page: Path) -> list[str]:
    return [b.strip("\n") for b in re.split(r"\n\s*\n", FENCE.sub("", page.read_text())) if b.strip()]


@pytest.mark.parametrize("page", PAGES, ids=lambda p: p.relative_to(ROOT).as_posix())
def test_no_paragraph_stops_mid_sentence(page: Path) -> None:
    """A paragraph ends with a full stop, a colon, a closing bracket or quote, or is followed by
    the list it introduces; headings, tables, HTML and indented code are not paragraphs."""
    blocks = _blocks(page)
    cut = []
    for block, following in zip(blocks, [*blocks[1:], ""], strict=True):
        first, last = block.lstrip().splitlines()[0], block.rstrip().splitlines()[-1]
        if first.startswith(("#", "|", "<", "!", "    ")) or last.startswith(("|", "    ")):
            continue
        if re.search(r"[.:!?)`\]*]$", last) or following.startswith(("- ", "* ", "1. ")):
            continue
        cut.append(last[-60:])
    assert not cut, f"{page.relative_to(ROOT)}: paragraphs that stop mid-sentence, ending {cut}"


def test_kubernetes_settings_table_lists_each_key_once_with_one_default() -> None:
    text = (ROOT / "docs" / "kubernetes.md").read_text()
    section = text[text.index("## Settings") :]
    section = section[: section.index("\n## ", 4)]
    keys = [
        k for row in re.findall(r"^\| ([^|]+) \|", section, re.M) for k in re.findall(r"`([a-z_]+)`", row)
    ]
    assert "scheduler_names" in keys
    assert len(keys) == len(set(keys)), sorted(k for k in keys if keys.count(k) > 1)
    assert "` (`" not in section


def _layout() -> str:
    text = (ROOT / "docs" / "development.md").read_text()
    return text[text.index("## Layout") : text.index("## Dependencies")]


def test_the_layout_names_every_package_and_module_it_describes() -> None:
    """Every package and top-level module of daemon/, every command module of daemon/cli/, and
    the PostgreSQL modules of store/ are named in docs/development.md's layout."""
    layout = _layout()
    wanted = [
        f"daemon/{p.name}/" for p in sorted((ROOT / "daemon").iterdir()) if (p / "__init__.py").exists()
    ]
    wanted += [f"daemon/{p.name}" for p in sorted((ROOT / "daemon").glob("*.py")) if p.name != "__init__.py"]
    wanted += [
        f"`{p.name}`" for p in sorted((ROOT / "daemon" / "cli").glob("*.py")) if not p.name.startswith("__")
    ]
    wanted += [
        f"`{p.name}`"
        for p in sorted((ROOT / "store").glob("p*.py"))
        if p.name.startswith(("postgres", "pg_"))
    ]
    missing = [w for w in wanted if w not in layout]
    assert not missing, f"docs/development.md's layout does not name {missing}"


def test_performance_page_is_the_current_figures_with_the_log_beside_it() -> None:
    """docs/performance.md: the figures, each with the bench that reproduces it, and a pointer to
    the chronological log; it names every bench (the helpers they import aside), and stays short."""
    page = (ROOT / "docs" / "performance.md").read_text()
    helpers = {
        "workload.py",
        "schedule_input.py",
        "store_postgres.py",
        "study_paper.py",
        "study_paper_table.py",
    }
    benches = [p.name for p in sorted((ROOT / "bench").glob("*.py")) if p.name not in helpers]
    missing = [b for b in benches if f"bench/{b}" not in page]
    assert not missing, f"docs/performance.md does not say how to run {missing}"
    assert "changelog-performance.md" in page and (ROOT / "docs" / "changelog-performance.md").exists()
    assert len(page.splitlines()) < 200, "docs/performance.md is the current figures; history goes in the log"


def test_tests_mirror_the_packages_as_the_layout_says() -> None:
    """docs/development.md: `tests/` mirrors the packages. At its top only the whole-tree import
    cycle check and the tests of daemon's top-level modules (test_<module>.py); the manifests'
    tests under tests/manifests/, as daemon/manifests/."""
    assert "`tests/` (mirrors the packages)" in _layout()
    modules = {p.stem for p in (ROOT / "daemon").glob("*.py") if p.name != "__init__.py"}
    allowed = {"test_import_cycles.py"} | {f"test_{m}.py" for m in modules}
    stray = sorted(p.name for p in (ROOT / "tests").glob("test_*.py") if p.name not in allowed)
    assert not stray, f"tests at the top of tests/ that belong under a package's directory: {stray}"
