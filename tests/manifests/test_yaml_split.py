"""daemon.manifests.yaml_split: a YAML text parsed in two processes gives the one parser's documents
and, for bad input, its errors (file, document index, line, column)."""

from __future__ import annotations

import os
import pickle
from pathlib import Path

import pytest

from fumarole.daemon.manifests import ManifestError, load_objects
from fumarole.daemon.manifests.reading import start_loading
from fumarole.daemon.manifests.yaml_loader import load_all
from fumarole.daemon.manifests.yaml_split import PARALLEL_MIN_BYTES, SplitLoad, spare_core, split_offset

NODE = "apiVersion: v1\nkind: Node\nmetadata:\n  name: n{i}\n  labels: {{zone: z{i}}}\n"

TRICKY = [
    # block scalars holding `---` (indented: content; at column 0: ends the scalar and the document)
    "a: |\n  one\n  ---\n  two\nb: 1\n---\nc: >\n  x\n  --- y\n---\nd: |\n  kept\n---\ne: [1, 2]\n",
    "--- |\n  top-level literal\n  ---\n---\n- |-\n    item\n---\n'---': quoted key\n",
    # comments, `...` end markers, empty documents, a `---` followed by content on its line
    "# head\na: 1 # trailing\n# between\n---\n# only a comment\n---\nb: 2\n...\n---\n...\n--- c\n---\n",
    "x: 1\n...\n---\ny: 2\n...\n# after the end\n---\n---\n- z\n--- {a: 1}\n---\t[2]\n",
    # directives: per document (a split before them would change nothing, but is refused anyway)
    "a: 1\n---\n%YAML 1.1\n---\nb: yes\n...\n%TAG !e! tag:example.com,2000:\n---\nc: !!str 0755\n"
    "---\nd: 0755\n",
    # anchors per document, aliases in the second part, scalars that resolve by type
    "base: &b {cpu: '1'}\nuse: *b\n---\nbase: &b [1, 2]\nuse: *b\nt: 2024-03-05T12:00:00Z\n"
    "---\non: yes\nn: ~\nf: .5\n",
    # Windows line breaks
    "a: 1\r\n---\r\nb: 2\r\n---\r\nc: |\r\n  x\r\n",
    # many small documents
    "".join("---\n" + NODE.format(i=i) for i in range(40)),
]

BAD_SECOND_HALF = [
    "".join("---\n" + NODE.format(i=i) for i in range(20)) + "---\nkind: Node\nmetadata: [\n",
    "".join("---\n" + NODE.format(i=i) for i in range(20)) + "---\na: !!timestamp 2024-13-45\n",
    "".join("---\n" + NODE.format(i=i) for i in range(20)) + "---\nkey: value\n  bad indent: x\n---\nok: 1\n",
    # a quoted scalar running into a `---` line: an error of both parsers at the same place
    "".join("---\n" + NODE.format(i=i) for i in range(20)) + "---\na: 'open\n---\nb: 1'\n",
    # a flow collection left open at a `---` line
    "".join("---\n" + NODE.format(i=i) for i in range(20)) + "---\na: [1,\n---\n]\n",
]

BAD_FIRST_HALF = [
    "kind: Node\nmetadata: {name: [\n" + "".join("---\n" + NODE.format(i=i) for i in range(20)),
    "a: *undefined\n" + "".join("---\n" + NODE.format(i=i) for i in range(20)),
]


needs_two_cpus = pytest.mark.skipif(not spare_core(), reason="start_loading splits only with a spare CPU")


def every_split(text: str) -> list[int]:
    """Every offset split_offset picks for some share of the text."""
    return sorted({o for share in range(1, 100) if (o := split_offset(text, share / 100)) is not None})


def dump(docs: list[object] | None) -> list[bytes]:
    """Each document's exact shape: types, values, and which of its objects are shared (aliases;
    equal strings are one object within a document, interned, but may be two across the halves)."""
    assert docs is not None
    return [pickle.dumps(d, protocol=pickle.HIGHEST_PROTOCOL) for d in docs]


@pytest.mark.parametrize("text", TRICKY)
def test_documents_equal_the_one_parser_at_every_split(text: str) -> None:
    offsets = every_split(text)
    assert offsets, "no split point found"
    whole = list(load_all(text))
    for offset in offsets:
        assert text[offset : offset + 3] == "---"
        assert dump(SplitLoad(text, offset).documents()) == dump(whole), offset


def test_no_split_after_a_directive_comment_or_blank_line() -> None:
    for text in [
        "a: 1\n%YAML 1.1\n---\nb: 2\n",
        "a: 1\n# c\n---\nb: 2\n",
        "a: 1\n\n---\nb: 2\n",
        "a: 1\n   \n---\nb: 2\n",
        "---\nb: 2\n",
    ]:
        assert every_split(text) == [], text


def test_no_split_where_the_line_is_not_a_marker_or_breaks_are_unusual() -> None:
    assert every_split("a: 1\n----\nb: 2\n---x\nc: 3\n") == []
    assert every_split("a: 1\n---\nb: 2\rc\n") == []  # a lone CR is a line break too
    assert every_split("a: 1\n---\nb: 2\x85c: 3\n") == []
    assert every_split("a: 1\n--- \nb: 2\n") == [5]
    assert every_split("a: 1\n---") == [5]


def error_of(path: Path, parallel_min_bytes: int) -> str:
    with pytest.raises(ManifestError) as e:
        start_loading(path, parallel_min_bytes=parallel_min_bytes).result()
    return str(e.value)


@needs_two_cpus
@pytest.mark.parametrize("text", BAD_SECOND_HALF + BAD_FIRST_HALF)
def test_bad_input_gives_the_one_parsers_error(tmp_path: Path, text: str) -> None:
    p = tmp_path / "cluster.yaml"
    p.write_text(text)
    assert start_loading(p, parallel_min_bytes=0)._split is not None  # the split path is taken
    with pytest.raises(ManifestError) as serial:
        load_objects(p)
    assert error_of(p, 0) == str(serial.value)
    assert "document " in str(serial.value)


@needs_two_cpus
def test_a_large_file_is_split_and_loads_as_one(tmp_path: Path) -> None:
    p = tmp_path / "cluster.yaml"
    text = "".join("---\n" + NODE.format(i=i) for i in range(PARALLEL_MIN_BYTES // len(NODE) + 10))
    p.write_text(text)
    loading = start_loading(p)
    assert loading._split is not None
    assert loading.result() == load_objects(p)


@needs_two_cpus
def test_small_json_and_directory_inputs_are_not_split(tmp_path: Path) -> None:
    small = tmp_path / "small.yaml"
    small.write_text("---\n" + NODE.format(i=1) + "---\n" + NODE.format(i=2))
    (tmp_path / "c.json").write_text('{"kind": "Node", "metadata": {"name": "j"}}')
    for path in (small, tmp_path / "c.json", tmp_path, tmp_path / "missing.yaml"):
        assert start_loading(path)._split is None
    assert start_loading(small, parallel_min_bytes=0)._split is not None
    with pytest.raises(ManifestError, match="no such file"):
        start_loading(tmp_path / "missing.yaml").result()


@needs_two_cpus
def test_cancel_reaps_the_child(tmp_path: Path) -> None:
    p = tmp_path / "cluster.yaml"
    p.write_text("".join("---\n" + NODE.format(i=i) for i in range(50)))
    loading = start_loading(p, parallel_min_bytes=0)
    split = loading._split
    assert split is not None
    pid = split._pid
    assert pid is not None
    loading.cancel()
    with pytest.raises(ChildProcessError):
        os.waitpid(pid, os.WNOHANG)
