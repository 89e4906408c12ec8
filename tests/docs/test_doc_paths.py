"""README.md and docs/*.md name only what exists: every repository path they write (in backticks
or as a link target) is a file or directory of the checkout, every link into a page names one of
its headings, and every pointer from a file's comment to a section of the docs names a heading."""

from __future__ import annotations

import re
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[2]
PAGES = [ROOT / "README.md", *sorted((ROOT / "docs").glob("*.md"))]
# The repository's top-level entries: a backticked token starting with one of them is a path.
TOP = (
    "daemon/", "store/", "api/", "tests/", "docs/", "deploy/", "bench/", "examples/",
    "migrations/", "scripts/", "requirements/", ".ci/", "pyproject.toml", "README.md",
    ".dockerignore",
)  # fmt: skip
# Paths the docs write that are not the checkout's: examples of a user's files, templates, Volcano's.
ALLOWED = {
    "migrations/0002_what.sql",  # docs/store.md: how a new migration is named
    "migrations/NNNN_name.sql",
    "migrations/NNNN_*.sql",
    "migrations/postgresql/NNNN_*.sql",
    "api/helpers.go",  # docs/kubernetes.md: Volcano's pkg/scheduler/api/helpers.go
}
FENCE = re.compile(r"^(```|~~~).*?^\1", re.M | re.S)
SPAN = re.compile(r"`([^`\n]+)`")
LINK = re.compile(r"\]\(([^)\s]+)\)|<a href=\"([^\"]+)\"|<img src=\"([^\"]+)\"|!\[[^\]]*\]\(([^)\s]+)\)")


def _prose(page: Path) -> str:
    return FENCE.sub("", page.read_text())


def _backticked_paths(page: Path) -> list[str]:
    out: list[str] = []
    for span in SPAN.findall(_prose(page)):
        for token in span.split():
            token = token.strip("'\",;()")
            token = re.sub(r":\d+(-\d+)?$", "", token)  # file.py:123
            if token.startswith(TOP) and not token.startswith(("http", "daemon.")):
                out.append(token)
    return out


def _exists(rel: str) -> bool:
    rel, _, test = rel.partition("::")  # tests/x.py::test_name
    if test:
        file = ROOT / rel
        return file.is_file() and f"def {test.split('[')[0]}(" in file.read_text()
    if any(c in rel for c in "*?[{<…") or "..." in rel:
        pattern = re.split(r"[{<…]|\.\.\.", rel)[0]
        if any(c in pattern for c in "*?["):
            return any(ROOT.glob(pattern))
        parent = pattern.rsplit("/", 1)[0]
        return (ROOT / parent).exists()
    return (ROOT / rel.rstrip("/")).exists()


def _slug(heading: str) -> str:
    """GitHub's anchor for a heading: lower case, punctuation dropped, spaces to hyphens."""
    text = re.sub(r"`", "", heading.strip()).lower()
    text = re.sub(r"[^\w\- ]", "", text)
    return text.replace(" ", "-")


def _headings(page: Path) -> list[str]:
    return [m.group(1) for m in re.finditer(r"^#{1,6} (.+?)\s*$", _prose(page), re.M)]


def _sections(page: Path) -> list[str]:
    """The headings and the bold or italic leads of paragraphs (`**Cost: incremental freezing.**`)."""
    leads = re.findall(r"^(?:- )?(?:\*\*|\*)([^*\n]+?)\.?(?:\*\*|\*)", _prose(page), re.M)
    return _headings(page) + leads


def _names_section(pointer: str, page: Path) -> bool:
    """A pointer names a section by its title or the start of it, in any case: "fgd" is "FGD",
    "The bundled sample" is "The bundled sample (`fumarole run` with no arguments)"."""
    want = pointer.lower()
    return any(t.lower() == want or re.match(re.escape(want) + r"\W", t.lower()) for t in _sections(page))


@pytest.mark.parametrize("page", PAGES, ids=lambda p: p.relative_to(ROOT).as_posix())
def test_every_backticked_repository_path_exists(page: Path) -> None:
    missing = sorted({p for p in _backticked_paths(page) if p not in ALLOWED and not _exists(p)})
    assert not missing, f"{page.relative_to(ROOT)} names paths that do not exist: {missing}"


@pytest.mark.parametrize("page", PAGES, ids=lambda p: p.relative_to(ROOT).as_posix())
def test_every_link_target_exists_and_its_anchor_is_a_heading(page: Path) -> None:
    bad: list[str] = []
    for groups in LINK.findall(_prose(page)):
        target = next(g for g in groups if g)
        if re.match(r"[a-z]+:", target):
            continue
        path, _, anchor = target.partition("#")
        file = (page.parent / path).resolve() if path else page
        if not file.exists():
            bad.append(f"{target}: no such file")
        elif anchor and file.suffix == ".md" and anchor not in {_slug(h) for h in _headings(file)}:
            bad.append(f"{target}: no heading #{anchor} in {file.relative_to(ROOT)}")
    assert not bad, f"{page.relative_to(ROOT)}: {bad}"


def _comment_pointers() -> list[tuple[Path, str, str]]:
    """(file, page, heading) for every `README "Heading"` or `docs/page.md, "Heading"[, "Another"]`
    in the docs themselves, the deploy files, the packages, scripts, bench and the bundled data."""
    out: list[tuple[Path, str, str]] = []
    pattern = re.compile(
        r'(README(?:\.md)?|docs/[\w-]+\.md),?\s+(?:section\s+)?"([^"]+)"((?:,? (?:and )?"[^"]+")*)'
    )
    roots = ["deploy", "daemon", "store", "api", "scripts", "bench", "examples"]
    files = [*PAGES, *(f for root in roots for f in sorted((ROOT / root).rglob("*")))]
    for file in files:
        # daemon/study/ is left to the study's own change (core_engine.py's "The core engine"
        # names the paragraph docs/studies.md calls "Inflation in one session").
        if file.is_relative_to(ROOT / "daemon" / "study"):
            continue
        if not file.is_file() or file.suffix in {".png", ".db", ".pyc", ".csv", ".gz"}:
            continue
        try:
            text = file.read_text()
        except UnicodeDecodeError:
            continue
        text = re.sub(r"\n\s*#?\s*", " ", text)  # a pointer broken over two (comment) lines
        for m in pattern.finditer(text):
            page = "README.md" if m.group(1).startswith("README") else m.group(1)
            for heading in [m.group(2), *re.findall(r'"([^"]+)"', m.group(3))]:
                out.append((file, page, heading))
    return out


def test_comments_point_at_sections_that_exist() -> None:
    pointers = _comment_pointers()
    assert len(pointers) >= 4  # the unit, the settings, the Containerfile, the manifests, the sample
    bad = [
        f"{file.relative_to(ROOT)}: {page} has no section {heading!r}"
        for file, page, heading in pointers
        if not _names_section(heading, ROOT / page)
    ]
    assert not bad, bad
