"""``attribute --annotate``: the replay copied as its own JSON text through the bounded reader, each
attributed graph kernel with ``capture_*`` args added (docs/DESIGN.md §7, "Attribution" step 6)."""

from __future__ import annotations

import gzip
from typing import IO, Any

import msgspec

from mixins.analysis.commands.attribute_match import annotation_key
from mixins.analysis.model import events as E
from mixins.analysis.read.reader import open_trace
from mixins.analysis.read.safe_io import output_file

__all__ = ["write_annotated"]

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
        self.sep = b"{"  # before the next member
        self.in_events: bytes | None = None  # inside traceEvents: what goes before its next element

    def member(self, key: str, raw: bytes | None) -> None:
        self._close_events()
        self.out.write(self.sep + msgspec.json.encode(key) + b": " + (b"[" if raw is None else raw))
        self.sep = b", "
        self.in_events = b"" if raw is None else None  # None: traceEvents, its elements follow

    def events(self, items: list[bytes]) -> None:
        if items and self.in_events is not None:
            self.out.write(self.in_events + b", ".join(items))
            self.in_events = b", "

    def _close_events(self) -> None:
        if self.in_events is not None:
            self.out.write(b"]")
            self.in_events = None

    def end(self) -> None:
        self._close_events()
        self.out.write(b"{}" if self.sep == b"{" else b"}")


def _copy(replay: str, out: IO[bytes] | gzip.GzipFile, annotations: dict[tuple[Any, ...], dict[str, Any]]) -> int:
    stream = open_trace(replay)
    copy = _Copy(out)
    stream.on_member = copy.member
    done = 0
    for raws in stream.events(msgspec.Raw):
        items = [bytes(r) for r in raws]
        for n, text in enumerate(items):
            if (new := _annotated(text, annotations)) is not None:
                done += 1
                items[n] = new
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
