"""YAML documents as PyYAML's SafeLoader gives them, built faster (C parser, lean construction).

PyYAML's C parser composes each document's node graph quickly; most of the time of a
`yaml.load_all(..., CSafeLoader)` goes to the pure-Python constructor (one generator and
half a dozen calls per node) and to the implicit resolver (a list of regular expressions
tried on every plain scalar).  `ManifestLoader` keeps PyYAML's parser, its resolver rules and
its constructors, and changes only how they are driven:

* the resolver's answer for a plain scalar is remembered per value for the document stream
  (it is a pure function of the value when no path resolvers are registered, as in SafeLoader);
* a document made only of str/map/seq nodes with plain string keys (what manifests are) is
  built by one recursive walk; every other scalar (int, bool, null, float, timestamp, binary, a
  custom tag) is handed to SafeConstructor as before.  A shared node (alias) yields the same
  object each time, as with the constructor.  Anything else in a document (merge keys, `!!set`,
  `!!omap`, `!!pairs`, other tags on collections, non-string keys that are collections,
  recursive aliases) or any error sends the whole document through SafeConstructor's own
  `construct_document`, so results and error messages are PyYAML's.
* the strings the walk takes (keys and plain string values) are interned: a manifest repeats the
  same few (`metadata`, `name`, `Pod`, `500m`), and one object per text keeps its hash computed
  once, turns the snapshot build's look-ups into identity checks (~20% of the build) and lets a
  pickle of the documents (daemon/manifests/yaml_split.py) hold each text once (a third the size).

tests/manifests/test_yaml_loader.py checks `load_all` against `yaml.load_all(..., SafeLoader)`.
"""

from __future__ import annotations

import operator
import sys
from collections.abc import Callable, Iterator
from typing import Any

import yaml
from yaml.nodes import MappingNode, Node, ScalarNode, SequenceNode

STR_TAG = "tag:yaml.org,2002:str"
MAP_TAG = "tag:yaml.org,2002:map"
SEQ_TAG = "tag:yaml.org,2002:seq"
_intern = sys.intern

_Base: Any = getattr(yaml, "CSafeLoader", yaml.SafeLoader)


class _NotPlain(Exception):
    """The document needs SafeConstructor's full rules (merge keys, tagged collections, cycles)."""


class ManifestLoader(_Base):  # type: ignore[misc]
    """SafeLoader's results, with a per-value resolver cache and a lean constructor."""

    def __init__(self, stream: Any) -> None:
        super().__init__(stream)
        self._plain_tags: dict[str, str] = {}
        if not self.yaml_path_resolvers:
            # The C parser calls these three for every node; without path resolvers (as in
            # SafeLoader) the path hooks do nothing and `resolve` needs no attribute look-ups.
            self.resolve = self._resolver_without_paths()  # type: ignore[method-assign,assignment]
            self.descend_resolver = operator.is_  # any two arguments, nothing done (C call)
            self.ascend_resolver = tuple  # no argument, nothing done (C call)

    def _resolver_without_paths(self) -> Callable[[Any, Any, Any], Any]:
        """`resolve` as below, for a loader without path resolvers, as one closure."""
        plain_tags = self._plain_tags
        known = plain_tags.get
        base = super().resolve
        scalar_tag, seq_tag, map_tag = (
            self.DEFAULT_SCALAR_TAG,
            self.DEFAULT_SEQUENCE_TAG,
            self.DEFAULT_MAPPING_TAG,
        )

        def resolve(kind: Any, value: Any, implicit: Any) -> Any:
            if kind is ScalarNode:
                if not implicit[0]:
                    return scalar_tag
                tag = known(value)
                if tag is None:
                    tag = plain_tags[value] = base(kind, value, implicit)
                return tag
            if kind is MappingNode:
                return map_tag
            if kind is SequenceNode:
                return seq_tag
            return base(kind, value, implicit)

        return resolve

    def resolve(self, kind: Any, value: Any, implicit: Any) -> Any:
        if kind is ScalarNode and not self.yaml_path_resolvers:
            if not implicit[0]:
                return self.DEFAULT_SCALAR_TAG
            tag = self._plain_tags.get(value)
            if tag is None:
                tag = self._plain_tags[value] = super().resolve(kind, value, implicit)
            return tag
        return super().resolve(kind, value, implicit)

    def construct_document(self, node: Node) -> Any:
        try:
            data = self._build(node, {}, set())
        except Exception:  # any surprise: PyYAML's own path decides (and words the error)
            self._reset()
            return super().construct_document(node)
        self._reset()
        return data

    def _reset(self) -> None:
        self.constructed_objects: dict[Node, Any] = {}
        self.recursive_objects: dict[Node, None] = {}
        self.state_generators: list[Iterator[Any]] = []
        self.deep_construct = False

    def _build(self, node: Node, made: dict[int, Any], open_nodes: set[int]) -> Any:
        cls = type(node)
        tag = node.tag
        if cls is ScalarNode:
            if tag == STR_TAG:
                return _intern(node.value)
            return self.construct_object(node)
        key = id(node)
        if key in made:
            return made[key]
        if key in open_nodes:
            raise _NotPlain("recursive alias")
        if cls is MappingNode and tag == MAP_TAG:
            mapping: dict[Any, Any] = {}
            made[key] = mapping
            open_nodes.add(key)
            build = self._build
            for key_node, value_node in node.value:
                if type(key_node) is not ScalarNode:
                    raise _NotPlain("collection key")
                key_tag = key_node.tag
                if key_tag == STR_TAG:
                    k = _intern(key_node.value)
                elif key_tag.endswith((":merge", ":value")):
                    raise _NotPlain("merge key")
                else:
                    k = self.construct_object(key_node)
                # A plain string value (most of a manifest) is taken here, without a call.
                if type(value_node) is ScalarNode and value_node.tag == STR_TAG:
                    mapping[k] = _intern(value_node.value)
                else:
                    mapping[k] = build(value_node, made, open_nodes)
            open_nodes.discard(key)
            return mapping
        if cls is SequenceNode and tag == SEQ_TAG:
            seq: list[Any] = []
            made[key] = seq
            open_nodes.add(key)
            build = self._build
            for child in node.value:
                seq.append(
                    _intern(child.value)
                    if type(child) is ScalarNode and child.tag == STR_TAG
                    else build(child, made, open_nodes)
                )
            open_nodes.discard(key)
            return seq
        raise _NotPlain(f"collection tagged {tag}")


def load_all(text: str) -> Iterator[Any]:
    """`yaml.load_all(text, SafeLoader)`'s documents, one at a time (errors are PyYAML's)."""
    loader = ManifestLoader(text)
    try:
        while loader.check_data():
            yield loader.get_data()
    finally:
        loader.dispose()
