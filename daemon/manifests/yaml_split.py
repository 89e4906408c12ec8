"""One large multi-document YAML text parsed in two processes: split at a document boundary, the
second part in a forked child, the documents handed back pickled in chunks as they are parsed,
in order (the caller decodes each chunk while the child parses the next: `build_loading` in
daemon/manifests/snapshot.py).

Only `fumarole schedule` (a process of its own, no threads) uses this, for a file of at least
`PARALLEL_MIN_BYTES`: PyYAML's C parser takes ~0.35 s on issue 11's 3.9 MB cluster, and the
machine has cores to spare while the command imports the scheduler and parses its configuration.

Where the split is exact.  A `---` at column 0 followed by a blank, a line break or the end is
always a document-start token for PyYAML's scanner and libyaml's (in the middle of a plain
scalar it ends the scalar, in a block scalar it is below the minimum indentation of 1, in a
quoted scalar or a flow collection it is an error): every token before it is the same as if
the text ended there, where the stream-end token closes the last document as the document-start
token does.  Directives belong to the next document only (both parsers reset them at each
explicit document start), so a split is refused where a `%` directive line may precede the
`---` (the line before it is blank, a comment or a directive: only a content line or a `...`
before it is accepted), and anchors are per document.  Texts with line breaks other than `\\n`
and `\\r\\n` (a lone `\\r`, NEL, LS, PS) are not split.  Either part failing in any way (a syntax
error, a constructor's error, the child dying) makes the caller parse the whole text in one
parser, so errors keep their document index, line and column exactly.
"""

from __future__ import annotations

import contextlib
import fcntl
import os
import pickle
import signal
from collections.abc import Iterator
from typing import Any, BinaryIO

from fumarole.daemon.manifests.yaml_loader import load_all

__all__ = ["PARALLEL_MIN_BYTES", "SplitLoad", "spare_core", "split_offset"]

PARALLEL_MIN_BYTES = 1 << 20
"""Below this, a process start and the hand-off cost more than half a parse saves."""

CHILD_SHARE = 0.8
"""The child's share of the text: the parent also imports the scheduler, parses its configuration
and decodes every object as it is read (daemon/manifests/snapshot.py `build_loading`)."""

CHUNK_DOCUMENTS = 256
"""Documents per chunk the child sends (a few milliseconds of parsing each): the parent decodes a
chunk while the child parses the next."""

PIPE_BYTES = 1 << 20
"""The pipe's capacity asked for (Linux's default limit): the child's chunks wait there, without
blocking it, while the parent is still busy with its own part."""

_OTHER_BREAKS = ("\x85", "\u2028", "\u2029")


def spare_core() -> bool:
    """Whether this process may run on more than one CPU (else a child only adds its hand-off)."""
    return len(os.sched_getaffinity(0)) > 1 if hasattr(os, "sched_getaffinity") else (os.cpu_count() or 1) > 1


def split_offset(text: str, child_share: float = CHILD_SHARE) -> int | None:
    """The offset of a `---` line where `text` splits into two streams whose documents, in order, are
    the whole text's (see the module docstring), nearest after the point leaving `child_share`
    of the text to the second part (else nearest before it); None when there is none."""
    if any(b in text for b in _OTHER_BREAKS) or text.count("\r") != text.count("\r\n"):
        return None
    target = max(1, int(len(text) * (1.0 - child_share)))
    at = text.find("\n---", target - 1)
    while at != -1:
        if _is_boundary(text, at + 1):
            return at + 1
        at = text.find("\n---", at + 4)
    at = text.rfind("\n---", 0, target)
    while at != -1:
        if _is_boundary(text, at + 1):
            return at + 1
        at = text.rfind("\n---", 0, at)
    return None


def _is_boundary(text: str, start: int) -> bool:
    """`text[start:]` begins with a document-start marker line preceded by a content line or `...`."""
    after = text[start + 3 : start + 4]
    if after not in ("", " ", "\t", "\n", "\r"):
        return False
    line_start = text.rfind("\n", 0, start - 1) + 1
    previous = text[line_start : start - 1].rstrip("\r")
    return bool(previous.strip()) and previous[0] != "%" and not previous.lstrip().startswith("#")


class SplitLoad:
    """`list(load_all(text))` with `text[offset:]` parsed in a forked child meanwhile.

    Construct it early (the child starts at once), call `documents()` when the documents are
    needed, or `first_documents()` and then `second_chunks()` to work on the documents as they
    come; `cancel()` stops the child when they no longer are.  The child sends its documents in
    chunks of `chunk_documents`, each pickled on its own, and a last `True` once its whole part
    parsed (`False` when it did not)."""

    def __init__(self, text: str, offset: int, chunk_documents: int = CHUNK_DOCUMENTS) -> None:
        self._first = text[:offset]
        read_end, write_end = os.pipe()
        with contextlib.suppress(AttributeError, OSError):  # Linux: room for the child to run ahead
            fcntl.fcntl(write_end, fcntl.F_SETPIPE_SZ, PIPE_BYTES)
        pid = os.fork()
        if pid == 0:  # the child: parse, pickle, write, and leave without the parent's exit handlers
            os.close(read_end)
            _child(text[offset:], write_end, chunk_documents)
        os.close(write_end)
        self._pid: int | None = pid
        self._pipe: BinaryIO | None = os.fdopen(read_end, "rb", closefd=True)
        self.complete = False
        """Whether every chunk of the child's part came (its whole part parsed)."""

    def documents(self) -> list[Any] | None:
        """Every document in order, or None when either part failed (parse the whole text then)."""
        first = self.first_documents()
        if first is None:
            return None
        second = [doc for chunk in self.second_chunks() for doc in chunk]
        return first + second if self.complete else None

    def first_documents(self) -> list[Any] | None:
        """The first part's documents, parsed here, or None when it failed (the child is stopped then)."""
        try:
            return list(load_all(self._first))
        except Exception:
            self.cancel()
            return None
        except BaseException:  # an interrupt: no child left behind
            self.cancel()
            raise

    def second_chunks(self) -> Iterator[list[Any]]:
        """The child's documents, a chunk at a time as they come (waiting for each).  When the
        chunks stop, `complete` tells whether they are all of the part (else the part failed or
        the child died); the child has been reaped."""
        try:
            while self._pipe is not None:
                try:
                    chunk = pickle.load(self._pipe)
                except Exception:  # the child died mid-way: a short or empty stream
                    chunk = False
                if chunk is True:
                    self.complete = self._reap()
                    break
                if not isinstance(chunk, list):
                    break
                yield chunk
        finally:
            if not self.complete:
                self.cancel()
            self._close()

    def cancel(self) -> None:
        """Stop the child (if still running) and release the pipe."""
        if self._pid is not None:
            with contextlib.suppress(ProcessLookupError):  # it may have ended by itself
                os.kill(self._pid, signal.SIGKILL)
            self._reap()
        self._close()

    def _reap(self) -> bool:
        pid, self._pid = self._pid, None
        if pid is None:
            return False
        _, status = os.waitpid(pid, 0)
        return os.waitstatus_to_exitcode(status) == 0

    def _close(self) -> None:
        pipe, self._pipe = self._pipe, None
        if pipe is not None:
            pipe.close()


def _child(
    text: str, write_end: int, chunk_documents: int
) -> None:  # pragma: no cover - runs in the forked child
    code = 0
    try:
        with os.fdopen(write_end, "wb", closefd=True) as pipe:
            chunk: list[Any] = []
            try:
                for doc in load_all(text):
                    chunk.append(doc)
                    if len(chunk) == chunk_documents:
                        pipe.write(pickle.dumps(chunk, protocol=pickle.HIGHEST_PROTOCOL))
                        pipe.flush()
                        chunk = []
                if chunk:
                    pipe.write(pickle.dumps(chunk, protocol=pickle.HIGHEST_PROTOCOL))
                end = True
            except Exception:  # the parent parses the whole text again and reports the error
                end = False
            pipe.write(pickle.dumps(end))
    except BaseException:
        code = 1
    finally:
        os._exit(code)
