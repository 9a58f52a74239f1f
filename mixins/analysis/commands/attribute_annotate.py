"""``attribute --annotate``: the replay trace again, each attributed graph kernel with ``capture_*`` args.

The output is the replay unchanged except for the added args: every top-level member and event is
copied as its own JSON text, streamed through the bounded reader (docs/DESIGN.md §7.1) from the
descriptor the command opened once (``reader.holding``), so a file swapped in after attribution is
never the one annotated, and a small gzip of gigabytes of whitespace costs what any trace costs.
Only device events whose text can match are decoded, given their args and encoded again. The result
goes through ``safe_io.output_file``: all or nothing, never over a device or a FIFO.
"""

from __future__ import annotations

import gzip
from typing import IO, Any

import msgspec

from mixins.analysis.commands.attribute_match import annotation_key
from mixins.analysis.model import events as E
from mixins.analysis.read.reader import open_trace
from mixins.analysis.read.safe_io import output_file

__all__ = ["write_annotated", "write_output"]

_DEVICE_CATS = E.DEVICE_CATEGORIES  # device work as the timeline keeps it
_MAY_MATCH = tuple(f'"{c}"'.encode() for c in _DEVICE_CATS)  # a device event's text holds its cat


def _annotated(raw: bytes, annotations: dict[tuple[Any, ...], dict[str, Any]]) -> bytes | None:
    """``raw`` (one event's JSON) with its capture_* args added; None when it gains none."""
    if not any(tag in raw for tag in _MAY_MATCH):
        return None
    ev = msgspec.json.decode(raw)  # the reader parsed this element already: it is valid and bounded
    if not isinstance(ev, dict) or ev.get("cat") not in _DEVICE_CATS:
        return None
    args = ev.get("args")
    if not isinstance(args, dict):
        return None
    key = annotation_key(args.get("correlation"), args.get("graph node id"), ev.get("ts"), ev.get("name") or "")
    got = annotations.get(key)
    if got is None:
        return None
    args.update(got)
    return msgspec.json.encode(ev)


class _Copy:
    """Writes the document back, member by member, as the reader streams it."""

    def __init__(self, out: IO[bytes] | gzip.GzipFile) -> None:
        self.out = out
        self.members = 0
        self.in_events = False
        self.first_event = True

    def member(self, key: str, raw: bytes | None) -> None:
        self._close_events()
        self.out.write((b"{" if self.members == 0 else b", ") + msgspec.json.encode(key) + b": ")
        self.members += 1
        if raw is None:  # traceEvents: its elements follow
            self.out.write(b"[")
            self.in_events, self.first_event = True, True
        else:
            self.out.write(raw)

    def events(self, items: list[bytes]) -> None:
        if not items:
            return
        self.out.write((b"" if self.first_event else b", ") + b", ".join(items))
        self.first_event = False

    def _close_events(self) -> None:
        if self.in_events:
            self.out.write(b"]")
            self.in_events = False

    def end(self) -> None:
        self._close_events()
        self.out.write(b"{}" if self.members == 0 else b"}")


def _copy(replay: str, out: IO[bytes] | gzip.GzipFile, annotations: dict[tuple[Any, ...], dict[str, Any]]) -> int:
    stream = open_trace(replay)
    copy = _Copy(out)
    stream.on_member = copy.member
    done = 0
    for raws in stream.raw_events():
        items = []
        for r in raws:
            text = bytes(r)
            new = _annotated(text, annotations)
            if new is not None:
                done += 1
                text = new
            items.append(text)
        copy.events(items)
    copy.end()
    return done


def write_annotated(replay: str, out: str, annotations: dict[tuple[Any, ...], dict[str, Any]]) -> int:
    """Write ``replay`` with ``annotations`` added to ``out`` (gzip if it ends in .gz); how many kernels
    gained args. A bad replay is a TraceError naming it; nothing is left at ``out`` then."""
    with output_file(out) as f:
        if not out.endswith(".gz"):
            return _copy(replay, f, annotations)
        with gzip.GzipFile(filename="", mode="wb", compresslevel=6, fileobj=f, mtime=0) as z:  # no name, no time
            return _copy(replay, z, annotations)


def write_output(out: str, data: bytes) -> None:
    """Write ``data`` to the user-named ``out`` (``--csv``) through ``safe_io.output_file``."""
    with output_file(out) as f:
        f.write(data)
