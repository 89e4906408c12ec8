"""daemon.manifests.yaml_loader reads as PyYAML's (C)SafeLoader (documents, errors); JSON as json.loads."""

from __future__ import annotations

import json
import math
import sys
from pathlib import Path
from typing import Any

import pytest
import yaml
from hypothesis import given, settings
from hypothesis import strategies as st

from fumarole.daemon.manifests import ManifestError, load_objects
from fumarole.daemon.manifests.reading import _decode_json
from fumarole.daemon.manifests.yaml_loader import load_all

TRICKY = [
    # plain manifests: strings, ints, bools, nulls, floats, quoted numbers, timestamps, octal
    """
apiVersion: v1
kind: Pod
metadata: {name: p-1, namespace: default, creationTimestamp: 2024-03-05T12:00:00Z}
spec:
  priority: 0o17
  port: 0755
  ratio: 1.5e3
  on: yes
  off: No
  nothing: ~
  empty:
  quoted: "12"
  single: '0x1F'
  sexagesimal: 1:30
  date: 2024-03-05
  inf: .inf
  nan: .NaN
  hex: 0x1F
  under: 1_000
  containers:
  - name: main
    resources: {requests: {cpu: 500m, memory: 1Gi}}
""",
    # anchors and aliases: the same object each time
    """
base: &b {cpu: "1", memory: 2Gi}
a: *b
list: &l [1, 2, *b]
again: *l
""",
    # merge keys and the value key
    """
base: &b {cpu: "1", memory: 2Gi}
merged:
  <<: *b
  memory: 4Gi
many:
  <<: [*b, {gpu: 1}]
""",
    # tagged collections and scalars
    """
s: !!set {a, b}
o: !!omap [{a: 1}, {b: 2}]
p: !!pairs [{a: 1}, {a: 2}]
b: !!binary aGVsbG8=
t: !!str 123
i: !!int "42"
f: !!float "1"
m: !!map {x: 1}
q: !!seq [1]
""",
    # non-string keys, duplicate keys, empty documents, explicit document markers
    """
1: one
true: yes
null: nothing
2024-01-01: date
1.5: float
k: first
k: second
---
---
- a
- b
...
""",
    # recursive alias
    """
&a [*a, 1]
""",
    """
top: &t {self: *t}
""",
]

BAD = [
    "a: [1, 2\nb: 3\n",
    "key: value\n  bad indent: x\n",
    "? [1, 2]\n: unhashable\n",
    "a: !!int notanumber\n",
    "a: !custom 1\n",
    "- !!timestamp 2024-13-45\n",
    "ok: 1\n---\nfine: 2\n---\n: [\n",
    "a: *undefined\n",
]


# What the manifests were read with before: PyYAML's C-accelerated SafeLoader (same results as
# the pure SafeLoader; its error messages carry no source snippet).
REFERENCE: Any = getattr(yaml, "CSafeLoader", yaml.SafeLoader)


def safe_load_all(text: str) -> list[Any]:
    return list(yaml.load_all(text, Loader=REFERENCE))


def same(a: Any, b: Any) -> bool:
    """Equality that also holds for NaN floats at the same places."""
    if isinstance(a, float) and isinstance(b, float) and math.isnan(a):
        return math.isnan(b)
    if isinstance(a, dict) and isinstance(b, dict):
        return list(a) == list(b) and all(same(a[k], b[k]) for k in a)
    if isinstance(a, list) and isinstance(b, list):
        if a is a[0] if a else False:  # a recursive list: compare the shape
            return b is b[0] and len(a) == len(b)
        return len(a) == len(b) and all(same(x, y) for x, y in zip(a, b, strict=True))
    return type(a) is type(b) and a == b


@pytest.mark.parametrize("text", TRICKY)
def test_documents_equal_safe_loader(text: str) -> None:
    ours = list(load_all(text))
    theirs = safe_load_all(text)
    assert len(ours) == len(theirs) == len(list(yaml.load_all(text, Loader=yaml.SafeLoader)))
    for a, b in zip(ours, theirs, strict=True):
        if isinstance(b, dict) and "top" in b:
            assert a["top"]["self"] is a["top"]
        else:
            assert same(a, b)


def test_equal_strings_are_one_object() -> None:
    # Interned: the snapshot build's look-ups and the YAML split's pickle rely on it for speed.
    a, b = load_all("kind: Pod\nmetadata: {name: p, labels: {app: x}}\n---\nkind: Pod\nlist: [x, kind]\n")
    assert a["kind"] is b["kind"] is sys.intern("Pod")
    assert next(iter(a)) is next(iter(b)) is sys.intern("kind")
    assert a["metadata"]["labels"]["app"] is b["list"][0]
    assert b["list"][1] is next(iter(b))


def test_aliases_give_the_same_object() -> None:
    (doc,) = load_all(TRICKY[1])
    assert doc["a"] is doc["base"]
    assert doc["again"] is doc["list"]
    assert doc["list"][2] is doc["base"]


@pytest.mark.parametrize("text", BAD)
def test_errors_equal_safe_loader(text: str) -> None:
    with pytest.raises(Exception) as theirs:
        safe_load_all(text)
    with pytest.raises(Exception) as ours:
        list(load_all(text))
    assert type(ours.value) is type(theirs.value)
    assert str(ours.value) == str(theirs.value)


_scalars = st.one_of(
    st.text(max_size=8),
    st.sampled_from(
        ["yes", "No", "on", "~", "null", "0755", "0x1F", "1:30", "1e3", ".inf", "2024-03-05", "12"]
    ),
    st.integers(),
    st.booleans(),
    st.none(),
)
_values = st.recursive(
    _scalars,
    lambda inner: st.one_of(
        st.lists(inner, max_size=4), st.dictionaries(st.text(max_size=6), inner, max_size=4)
    ),
    max_leaves=12,
)


@settings(max_examples=150, deadline=None)
@given(st.lists(_values, min_size=1, max_size=3), st.booleans())
def test_random_documents_equal_safe_loader(docs: list[Any], flow: bool) -> None:
    text = yaml.safe_dump_all(docs, default_flow_style=flow)
    assert same(list(load_all(text)), safe_load_all(text))


def test_a_bad_value_is_bad_input_naming_file_and_document(tmp_path: Path) -> None:
    # PyYAML raises ValueError (not YAMLError) for an impossible date: still exit-2 bad input.
    p = tmp_path / "c.yaml"
    p.write_text("kind: Node\n---\nkind: Node\nmetadata: {created: !!timestamp 2024-13-45}\n")
    with pytest.raises(ManifestError) as e:
        load_objects(p)
    msg = str(e.value)
    assert str(p) in msg and "document 2" in msg and "month must be in 1..12" in msg


def test_bad_yaml_still_names_file_and_document(tmp_path: Path) -> None:
    p = tmp_path / "c.yaml"
    p.write_text("kind: Node\nmetadata: {name: n1}\n---\nkind: Node\nmetadata: [\n")
    with pytest.raises(ManifestError) as e:
        load_objects(p)
    msg = str(e.value)
    assert str(p) in msg and "document 2" in msg and "YAML syntax error" in msg


@pytest.mark.parametrize(
    "text",
    [
        '{"a": 1, "a": 2}',
        "[NaN, Infinity, -Infinity]",
        "1e400",
        "123456789012345678901234567890",
        '"\\ud800"',
    ],
)
def test_json_as_json_loads(text: str) -> None:
    assert same(_decode_json(text, "x.json"), json.loads(text)) or text.startswith("[NaN")
    if text.startswith("[NaN"):
        got = _decode_json(text, "x.json")
        assert math.isnan(got[0]) and got[1:] == [math.inf, -math.inf]


def test_json_syntax_error_names_line_and_column() -> None:
    with pytest.raises(ManifestError, match=r"x\.json: line 2, column 14: JSON syntax error"):
        _decode_json('{"kind": "Node",\n "metadata": }', "x.json")


@pytest.mark.parametrize(
    "value",
    ["abc", "", "~", "null", "yes", "No", "1", "0x1f", "0755", "1.5", ".inf", "2020-01-02", "<<", "="],
)
@pytest.mark.parametrize("implicit", [(True, False), (False, True), (False, False)])
def test_the_parsers_resolver_hooks_answer_as_safe_loaders(value: str, implicit: tuple[bool, bool]) -> None:
    """The loader's own resolve (a closure without path look-ups) gives SafeLoader's tags."""
    from yaml.nodes import MappingNode, ScalarNode, SequenceNode

    from fumarole.daemon.manifests.yaml_loader import ManifestLoader

    ours, safe = ManifestLoader(""), yaml.SafeLoader("")
    assert "resolve" in vars(ours)  # the per-instance fast hooks are in place
    for kind in (ScalarNode, SequenceNode, MappingNode):
        v = value if kind is ScalarNode else None
        assert ours.resolve(kind, v, implicit) == safe.resolve(kind, v, implicit)
        assert ours.resolve(kind, v, implicit) == safe.resolve(kind, v, implicit)  # remembered
    ours.descend_resolver(None, None)
    ours.ascend_resolver()
    ours.dispose()
