"""Reading manifest files: a file or a directory tree, YAML multi-document or JSON, Lists flattened."""

from __future__ import annotations

import itertools
import json
from collections.abc import Iterable, Iterator
from pathlib import Path
from typing import Any

import msgspec
import yaml

from fumarole.daemon.manifests import yaml_loader
from fumarole.daemon.manifests.errors import ManifestError
from fumarole.daemon.manifests.fields import Obj, type_name
from fumarole.daemon.manifests.yaml_split import PARALLEL_MIN_BYTES, SplitLoad, spare_core, split_offset

_MANIFEST_SUFFIXES = (".yaml", ".yml", ".json")


# The top-level keys of a Volcano scheduler configuration (framework/conf.py reads them).
_SCHEDULER_CONF_KEYS = frozenset({"actions", "tiers", "configurations", "metrics"})


def is_scheduler_configuration(documents: list[Any]) -> bool:
    """Whether a file's documents are a Volcano scheduler configuration rather than manifests: one
    mapping (empty documents aside) with no `kind` or `apiVersion`, whose keys are the
    configuration's own (`actions` or `tiers` among them)."""
    docs = [d for d in documents if d is not None]
    if len(docs) != 1 or not isinstance(docs[0], dict):
        return False
    keys = set(docs[0])
    return bool(keys) and keys <= _SCHEDULER_CONF_KEYS and bool(keys & {"actions", "tiers"})


def _peek_scheduler_configuration(
    documents: Iterator[tuple[int, Any]],
) -> tuple[Iterable[tuple[int, Any]], bool]:
    """(the same documents, whether they are a scheduler configuration), reading ahead no further
    than needed: a manifest file is told by its first non-empty document, so its errors still
    come in document order (a bad List before a later syntax error)."""
    ahead: list[tuple[int, Any]] = []
    for index, doc in documents:
        ahead.append((index, doc))
        if doc is not None:
            break
    if not ahead or not is_scheduler_configuration([ahead[-1][1]]):
        return itertools.chain(ahead, documents), False
    ahead.extend(documents)  # a configuration-like first document: read the (small) rest
    if is_scheduler_configuration([d for _, d in ahead]):
        return [], True
    return ahead, False


def load_objects(path: str | Path, *, skipped: list[str] | None = None) -> list[tuple[str, int, Obj]]:
    """(file, document index, object) for a manifest file or every *.yaml/*.yml/*.json under a directory.

    Directories are walked recursively in sorted path order, skipping hidden entries, and skipping
    a file that is a scheduler configuration (`is_scheduler_configuration`: an example's
    `scheduler.yaml` beside its `cluster.yaml`), whose name is appended to `skipped`.  A directory
    with no manifest file is bad input.  Empty documents are skipped; `kind: List` (and typed
    lists such as PodList) are flattened, the items keeping their list's document index.
    """
    p = Path(path)
    if p.is_dir():
        files = sorted(
            (
                f
                for f in p.rglob("*")
                if f.suffix in _MANIFEST_SUFFIXES
                and f.is_file()
                and not any(part.startswith(".") for part in f.relative_to(p).parts)
            ),
            key=lambda f: f.relative_to(p).as_posix(),
        )
    elif p.is_file():
        files = [p]
    else:
        raise ManifestError(str(p), "no such file or directory")
    out: list[tuple[str, int, Obj]] = []
    confs: list[str] = []
    for f in files:
        name = str(f)
        documents: Iterable[tuple[int, Any]] = _read_documents(f, name)
        if p.is_dir():
            documents, is_conf = _peek_scheduler_configuration(iter(documents))
            if is_conf:
                confs.append(name)
                continue
        out.extend(_objects(name, documents))
    if skipped is not None:
        skipped.extend(confs)
    if p.is_dir() and len(confs) == len(files):
        also = f" (skipped {', '.join(confs)}: a scheduler configuration, for --conf)" if confs else ""
        raise ManifestError(str(p), f"no manifest files (*.yaml, *.yml, *.json) in the directory{also}")
    return out


class PendingLoad:
    """`load_objects(path)`, begun: `result()` gives its objects (or raises its errors), `cancel()`
    drops it.  A large multi-document YAML file has its second part parsed by a child process
    meanwhile (daemon/manifests/yaml_split.py); anything else is read when `result()` is called.

    A split file's objects can also be taken as they come (`read_ahead()`), so that the caller
    works on them while the child parses; that raises nothing for bad input: it stops, and
    `result()` then gives every object of the file or raises the serial reading's error."""

    def __init__(self, path: str | Path, split: SplitLoad | None = None, text: str = "") -> None:
        self._path = path
        self._split = split
        self._text = text
        self._docs: list[Any] = []  # the documents read ahead so far
        self._chunks: Iterator[list[Any]] | None = None  # the child's, once the first part parsed
        self.complete = False
        """Whether `read_ahead()` gave every object of the file."""
        self.skipped: list[str] = []
        """The scheduler configurations a directory's walk skipped (`load_objects`)."""

    def read_ahead(self) -> Iterator[list[tuple[str, int, Obj]]]:
        """A split file's objects part by part as they are read: the first part's (parsed here),
        then each chunk of the child's part as it arrives.  Nothing for a file that is not split;
        stops early when a part fails (`complete` stays False)."""
        split = self._split
        if split is None or self._chunks is not None:
            return
        first = split.first_documents()
        if first is None:
            self._split = None  # stopped: `result()` parses the whole text
            return
        self._docs = first
        self._chunks = split.second_chunks()
        name = self._name()
        try:
            objects = list(_objects(name, enumerate(first)))
        except ManifestError:  # `result()` raises it, or an earlier parse error of the whole text
            return
        yield objects
        for chunk in self._chunks:
            start = len(self._docs)
            self._docs.extend(chunk)
            try:
                objects = list(_objects(name, enumerate(chunk, start)))
            except ManifestError:
                return
            yield objects
        self.complete = split.complete

    def result(self) -> list[tuple[str, int, Obj]]:
        name = self._name()
        split, self._split = self._split, None
        if split is not None:
            if self._chunks is None:
                docs = split.documents()
            else:  # after `read_ahead()`: the documents it read and the rest of the child's
                for chunk in self._chunks:
                    self._docs.extend(chunk)
                docs = self._docs if split.complete else None
                self._chunks = None
            if docs is not None:
                return list(_objects(name, enumerate(docs)))
        if self._text:  # a part failed: one parser over the whole text decides (and words the error)
            return list(_objects(name, _yaml_documents(self._text, name)))
        return load_objects(self._path, skipped=self.skipped)

    def cancel(self) -> None:
        """Drop the load: the child stopped, the documents read ahead released."""
        if self._split is not None:
            self._split.cancel()
            self._split = None
        self._docs = []
        self._chunks = None

    def _name(self) -> str:
        return str(Path(self._path))


def start_loading(path: str | Path, *, parallel_min_bytes: int = PARALLEL_MIN_BYTES) -> PendingLoad:
    """`load_objects(path)`, begun now and finished by `result()`: a YAML file of at least
    `parallel_min_bytes` is split at a document boundary and its second part parsed in a forked
    child meanwhile (for a command that is a process of its own, without threads; only when the
    process may run on more than one CPU).  Raises nothing: a file that cannot be read or split
    is left to `result()`, which reports as `load_objects` does."""
    p = Path(path)
    try:
        if p.suffix not in (".yaml", ".yml") or not p.is_file() or p.stat().st_size < parallel_min_bytes:
            return PendingLoad(path)
        text = p.read_text(encoding="utf-8")
    except (OSError, UnicodeDecodeError):
        return PendingLoad(path)
    offset = split_offset(text) if spare_core() else None
    if offset is None:
        return PendingLoad(path)
    return PendingLoad(path, SplitLoad(text, offset), text)


def _objects(name: str, documents: Iterable[tuple[int, Any]]) -> Iterator[tuple[str, int, Obj]]:
    for index, doc in documents:
        if doc is None:
            continue
        yield from ((name, index, o) for o in flatten(name, index, doc))


def _read_documents(f: Path, name: str) -> Iterator[tuple[int, Any]]:
    try:
        text = f.read_text(encoding="utf-8")
    except (OSError, UnicodeDecodeError) as e:
        raise ManifestError(name, f"cannot read: {e}") from e
    if f.suffix == ".json":
        yield 0, _decode_json(text, name) if text.strip() else None
        return
    yield from _yaml_documents(text, name)


def _yaml_documents(text: str, name: str) -> Iterator[tuple[int, Any]]:
    count = 0
    try:
        for doc in yaml_loader.load_all(text):
            yield count, doc
            count += 1
    except yaml.YAMLError as e:
        mark = getattr(e, "problem_mark", None) or getattr(e, "context_mark", None)
        where = f"line {mark.line + 1}, column {mark.column + 1}: " if mark is not None else ""
        problem = getattr(e, "problem", None) or str(e)
        raise ManifestError(name, f"{where}YAML syntax error: {problem}", document=count) from e
    except (ValueError, TypeError, OverflowError) as e:
        # PyYAML's constructors let these through for impossible values (a 13th month).
        raise ManifestError(name, f"YAML value error: {e}", document=count) from e


def _decode_json(text: str, name: str) -> Any:
    """The JSON document as `json.loads` gives it: msgspec decodes (~10x faster); on anything it
    refuses (bad syntax, NaN/Infinity, numbers out of range, lone surrogates) `json.loads` decides,
    accepting what it accepts and naming the line and column of a syntax error."""
    try:
        return msgspec.json.decode(text)
    except (msgspec.DecodeError, UnicodeEncodeError):
        pass
    try:
        return json.loads(text)
    except json.JSONDecodeError as e:
        raise ManifestError(name, f"line {e.lineno}, column {e.colno}: JSON syntax error: {e.msg}") from e


def flatten(file: str, index: int, doc: Any) -> list[Obj]:
    """Objects of one document: itself, or the items of a List / <Kind>List / bare sequence."""
    kind = api = path = ""
    if isinstance(doc, list):
        items: Any = doc
    elif isinstance(doc, dict):
        list_kind = doc.get("kind")
        if not (isinstance(list_kind, str) and list_kind.endswith("List") and "items" in doc):
            return [doc]
        items = doc.get("items") or []
        api_version = doc.get("apiVersion")
        api = api_version if isinstance(api_version, str) else ""
        kind = "" if list_kind == "List" else list_kind[: -len("List")]
        path = "items"
        if not isinstance(items, list):
            raise ManifestError(file, "expected a list", document=index, field="items")
    else:
        raise ManifestError(file, f"expected a mapping (an object), got {type_name(doc)}", document=index)
    out: list[Obj] = []
    for i, item in enumerate(items):
        if item is None:
            continue
        if not isinstance(item, dict):
            raise ManifestError(
                file,
                f"expected a mapping (an object), got {type_name(item)}",
                document=index,
                field=f"{path}[{i}]",
            )
        if kind and "kind" not in item:
            item = {"apiVersion": api, "kind": kind, **item}
        out.extend(
            flatten(file, index, item)
            if isinstance(item.get("kind"), str) and item["kind"].endswith("List")
            else [item]
        )
    return out
