"""Streaming reader for Kineto / chrome-trace JSON, gzip or plain, in any layout: ``json.load`` of a
500k-event trace is ~1.2 GB of dicts; here ``traceEvents`` is cut into slices that msgspec decodes into
small typed structs. A cut is a ``}`` before ``,{`` or ``]`` whose slice decodes as a JSON array: the slice
starts at a real element boundary, so a cut inside a string or object cannot parse. Every bound and
failure: docs/DESIGN.md §7.1 (one :class:`TraceError` naming the file).
"""

from __future__ import annotations

import gc
import gzip
import json
import os
import re
from collections.abc import Callable, Iterator
from contextlib import ExitStack, contextmanager, suppress
from itertools import count, islice
from typing import IO, Annotated, Any, ClassVar, NamedTuple, cast

import msgspec
from msgspec import Struct

from mixins.analysis.read import safe_io
from mixins.analysis.read.safe_io import TraceError

try:  # optional: ISA-L inflates ~5x faster than zlib (0.07 s vs 0.39 s for 196 MB); not required
    from isal import igzip as _fast_gzip  # type: ignore[import-untyped]
except ImportError:  # pragma: no cover - depends on the environment
    _fast_gzip = None  # type: ignore[assignment]

__all__ = [
    "TraceError", "compact_json", "Args", "Event", "SlimArgs", "SlimEvent", "BareEvent", "Limits", "Buffering",
    "using_buffering", "TraceStream", "open_trace", "current_limits", "using_limits", "MAX_TEXT", "cut_text",
    "texts_cut",
]

class Buffering(Struct, frozen=True):
    """How much the reader inflates and decodes at a time; tests shrink it so every boundary is a cut."""

    slice: int = 4 << 20  # bytes of JSON per decode call: big enough to amortise, small enough to bound memory
    min_slice: int = 64 << 10  # ... shrunk down to this when elements are tiny, so that a slice holds about
    slice_events: int = 50_000  # ... this many elements (a real Kineto event is ~400 bytes: 10k a full slice)
    block: int = 1 << 20  # bytes read from the decompressor at a time
    tail_window: int = 256 << 10  # where boundary candidates are searched first (the slice's tail)
    fast_tries: int = 8  # candidate cuts tried before falling back to an exact element-by-element split


class Limits(Struct, frozen=True):
    """Bounds on what one trace may cost, far above any real capture (docs/DESIGN.md §7.1)."""

    max_events: int = 10_000_000
    max_value_bytes: int = 64 << 20
    max_distinct_bytes: int = 256 << 20


# Process-wide settings for streams opened without explicit ones (:func:`_using`).
_current: dict[type, Any] = {Limits: Limits(), Buffering: Buffering()}

# The one cap on a text read from a trace, cut where it is read (:func:`cut_text`; docs/DESIGN.md §7.1).
MAX_TEXT = 4096
# Window pairs ``windows._nested`` may compare where capture windows overlap without nesting (§7.1).
MAX_OVERLAPPING_PAIRS = 2_000_000

_texts_cut = 0  # texts cut in this process so far (``texts_cut``: a command's note counts its own)


def cut_text(text: str) -> str:
    """``text`` if at most MAX_TEXT characters, else its first MAX_TEXT and a marker saying how many more."""
    global _texts_cut
    if len(text) <= MAX_TEXT:
        return text
    _texts_cut += 1
    return f"{text[:MAX_TEXT]}…[{len(text) - MAX_TEXT:,} more characters]"


def texts_cut() -> int:
    """How many texts :func:`cut_text` has cut in this process (a caller subtracts its start)."""
    return _texts_cut


_held: dict[str, int] = {}  # path -> the descriptor a command holds open for it (:func:`holding`)


def current_limits() -> Limits:
    return cast(Limits, _current[Limits])


@contextmanager
def _using(setting: Limits | Buffering) -> Iterator[None]:
    """``setting`` process-wide for streams opened without explicit ones: every reader obeys the CLI's
    options without passing them through each signature."""
    kind = type(setting)
    before, _current[kind] = _current[kind], setting
    try:
        yield
    finally:
        _current[kind] = before


using_limits = using_buffering = _using


@contextmanager
def holding(path: str) -> Iterator[None]:
    """Open ``path`` once for the duration; every stream over it reads that descriptor from its start
    (``attribute --annotate`` reads the replay twice: a file swapped in between is never annotated)."""
    fd, _ = safe_io.open_input(path)
    _held[path] = fd
    try:
        yield
    finally:
        del _held[path]
        os.close(fd)


class _OutOfRange(Exception):
    """A number msgspec or float() cannot hold (more than ~308 digits, or 4,300 for an integer)."""


def _after_ws(buf: bytes, pos: int) -> int:
    """The index of the first byte at or after ``pos`` that is not JSON whitespace."""
    return cast(re.Match[bytes], _WS.match(buf, pos)).end()  # the pattern matches anywhere, if only ""


def _has_separator(buf: bytes, lo: int, hi: int) -> bool:
    """Whether ``buf[lo:hi]`` holds a ``,`` or ``]``: what must follow a traceEvents element that ends there."""
    return buf.find(b",", lo, hi) >= 0 or buf.find(b"]", lo, hi) >= 0


_RAW_EMPTY = msgspec.Raw(b"")

# Bounded numbers, checked by the typed decoder in C (why these bounds: docs/DESIGN.md §7.1, "Bounded fields")
MAX_TIME_US = 4e15
_Time = Annotated[float, msgspec.Meta(ge=-MAX_TIME_US, le=MAX_TIME_US)]
_Int64 = Annotated[int, msgspec.Meta(ge=-(1 << 63), le=(1 << 63) - 1)]  # ids go into int64 arrays
# checked by the typed decoder in C; a longer text sends its slice down the tolerant path, which cuts it
_Text = Annotated[str, msgspec.Meta(max_length=MAX_TEXT)]


class SlimArgs(
    msgspec.Struct,
    gc=False,
    rename={"dims": "Input Dims", "types": "Input type", "node": "graph node id", "ext": "External id"},
):
    """The ``args`` fields ``attribute`` reads; everything else is skipped by the decoder. ``ext`` (the
    External id) joins a launch to the op that made it, the rule every command shares (docs/DESIGN.md §7.3)."""

    dims: msgspec.Raw = _RAW_EMPTY  # kept as raw JSON: hashable, compared after removing whitespace
    types: msgspec.Raw = _RAW_EMPTY
    correlation: _Int64 | None = None
    kernel: _Text | None = None
    grid: tuple[int, ...] | None = None  # tuples: hashable, so a kernel identity is a plain key
    block: tuple[int, ...] | None = None
    node: _Int64 | None = None  # CUPTI graph node id of a replayed graph kernel (CUDA >= 12)
    ext: _Int64 | None = None


class Args(
    SlimArgs,
    gc=False,
    rename={"concrete": "Concrete Inputs", "smem": "shared memory", "regs": "registers per thread"},
):
    """:class:`SlimArgs` and Kineto's inputs and kernel resources (the op-sequence record)."""

    concrete: msgspec.Raw = _RAW_EMPTY
    smem: _Int64 | None = None
    regs: _Int64 | None = None


class _Common(msgspec.Struct, gc=False):
    """The fields every event shape reads."""

    cat: _Text | None = None
    name: _Text | None = None
    pid: int | _Text | None = None
    tid: int | _Text | None = None
    ts: _Time | None = None
    dur: _Time | None = None


class Event(_Common, gc=False):
    """One trace event, reduced to what identity, segments, signatures and links need."""

    ph: str | None = None
    id: int | str | None = None
    args: Args | None = None


class SlimEvent(_Common, gc=False):
    """:class:`Event` without ``ph``, ``id`` and the args only the record reads: undeclared fields are
    skipped without building objects, ~25 % of the decode time."""

    args: SlimArgs | None = None


class BareEvent(_Common, gc=False):
    """:class:`Event` without ``args``, never decoded nor checked (``ev.args`` reads None): ``time``'s."""

    args: ClassVar[None] = None


# What a slice decodes into (msgspec.Raw: each element as its text), and the args the tolerant path builds
_SLICE: dict[type, msgspec.json.Decoder[Any]] = {
    Event: msgspec.json.Decoder(list[Event]), SlimEvent: msgspec.json.Decoder(list[SlimEvent]),
    BareEvent: msgspec.json.Decoder(list[BareEvent]), msgspec.Raw: msgspec.json.Decoder(list[msgspec.Raw]),
}
_ARGS_OF: dict[type, type] = {Event: Args, SlimEvent: SlimArgs}  # BareEvent's args are never built
_ANY = msgspec.json.Decoder()
_ELEMENT: dict[type, msgspec.json.Decoder[Any]] = {}  # one element's typed decoder, made when first needed
_WS = re.compile(rb"[ \t\r\n]*")
_CUT = re.compile(rb"\}[ \t\r\n]*(?:,[ \t\r\n]*(?=\{)|\])")
_NUMBER_TAIL = re.compile(rb"[0-9.eE+-]+")  # what may follow a number's prefix in its own text
_JSON_TEXT = json.JSONDecoder()

_VALUE_WINDOW = 512  # bytes first tried for a top-level value (doubled while it is incomplete)
_MAX_TOP_MEMBERS = 100_000  # a Kineto trace has ~15; each costs ~6 us, so 1 GB of `"a":0,` stops early
_MAX_TOP_KEYS = 256  # distinct top-level key names remembered (informational); a hostile file may have millions
_MAX_TOP_KEY_CHARS = 256
_SHOWN_KEYS = 5  # top-level keys named when a file has no traceEvents (what it is instead)

# Top-level keys worth keeping (small); the rest are parsed for validity and dropped.
KEEP_KEYS = frozenset(
    {"capture_trace", "distributedInfo", "schemaVersion", "traceName", "displayTimeUnit", "baseTimeNanoseconds"}
)


_ARG_FORMS = {"dims": "raw", "types": "raw", "concrete": "raw", "grid": "ints", "block": "ints", "kernel": "text"}
# The JSON types an event field may have (``ts`` and ``dur`` then go through :func:`_as_time`).
_EVENT_TYPES = {"ph": (str,), "cat": (str,), "name": (str,), "pid": (int, str), "tid": (int, str), "id": (int, str),
                "ts": (int, float), "dur": (int, float), "args": (dict,)}


def _pick(v: Any, types: tuple[type, ...]) -> Any:
    """``v`` if of ``types`` (never a bool), texts cut (:func:`cut_text`); else None."""
    if isinstance(v, bool) or not isinstance(v, types):
        return None
    return cut_text(v) if isinstance(v, str) else v


def _tolerant_args(raw_args: dict[str, Any], cls: type[Any]) -> Any:
    """``cls`` built from a generic ``args`` dict by its fields' JSON names; other ids are 64-bit ints."""
    values: dict[str, Any] = {}
    for name, key in zip(cls.__struct_fields__, cls.__struct_encode_fields__, strict=True):
        form, v = _ARG_FORMS.get(name), cast(Any, raw_args.get(key))
        if form == "raw":
            values[name] = msgspec.Raw(msgspec.json.encode(v)) if key in raw_args else _RAW_EMPTY
        elif form == "ints":
            ints = isinstance(v, list) and all(isinstance(x, int) and not isinstance(x, bool) for x in v)
            values[name] = tuple(v) if ints else None
        else:
            values[name] = _pick(v, (str,)) if form == "text" else _int64(_pick(v, (int,)), key)
    return cls(**values)


def _tolerant_event(obj: Any, kind: type[Any]) -> Any:
    """Build a ``kind`` event from a generic decoded value, dropping fields of unexpected types; a field
    the event does not declare is neither read nor checked."""
    if not isinstance(obj, dict):
        return None
    values = {name: _pick(obj.get(name), _EVENT_TYPES[name]) for name in kind.__struct_fields__}
    if values.get("args") is not None:  # first: a number out of range there is named before one in ts or dur
        values["args"] = _tolerant_args(values["args"], _ARGS_OF[kind])
    for name in ("ts", "dur"):
        values[name] = _as_time(values[name], name)
    return kind(**values)


def _as_time(v: int | float | None, name: str) -> float | None:
    """A ``ts`` / ``dur`` as float µs within ±MAX_TIME_US; _OutOfRange naming it otherwise."""
    if v is None:
        return None
    try:
        f = float(v)
    except OverflowError:
        raise _OutOfRange from None
    if not -MAX_TIME_US <= f <= MAX_TIME_US:  # also NaN, which no JSON number gives
        raise _OutOfRange(f"number out of range: {name} {f:g} (|{name}| <= {MAX_TIME_US:g} µs)")
    return f


def _int64(v: int | None, name: str) -> int | None:
    if v is not None and not -(1 << 63) <= v < 1 << 63:
        raise _OutOfRange(f'number out of range: "{name}" of {len(str(abs(v)))} digits (a signed 64-bit integer)')
    return v


def _decode_slice(buf: bytes, start: int, end: int, kind: type[Any]) -> tuple[list[Any], int] | None:
    """Decode ``buf[start:end]`` as the elements of a JSON array into (Events, number of elements); None when
    it is not valid JSON. _OutOfRange and RecursionError are real even when the cut is false (§7.1)."""
    with memoryview(buf) as view:  # one copy of a multi-megabyte slice, not three
        data = b"".join((b"[", view[start:end], b"]"))
    try:
        events = _SLICE[kind].decode(data)
        return events, len(events)
    except msgspec.ValidationError:
        pass  # valid JSON of unexpected types, or invalid JSON caught early: decide below
    except msgspec.DecodeError:
        return None
    try:
        elements = _SLICE[msgspec.Raw].decode(data)
    except msgspec.DecodeError:
        return None
    # Element by element, so that an element decodes the same whatever shares its slice: a well-typed
    # one as on the fast path (a number out of range in a field nobody reads is never looked at).
    one = _ELEMENT.get(kind) or _ELEMENT.setdefault(kind, msgspec.json.Decoder(kind))
    events = []
    for element in elements:
        try:
            ev = one.decode(element)
        except msgspec.ValidationError:
            try:
                value = _ANY.decode(element)
            except msgspec.ValidationError:  # the untyped decoder only refuses numbers out of range
                raise _OutOfRange from None
            ev = _tolerant_event(value, kind)
        if ev is not None:
            events.append(ev)
    return events, len(elements)


class _Cut(NamedTuple):
    """A run of whole elements decoded from the buffer: where to resume, whether ``]`` was reached."""

    events: list[Any]  # Event or SlimEvent
    elements: int
    resume: int
    closed: bool


class TraceStream:
    """One pass over a trace file (single use): ``metadata`` (kept top-level keys) fills in while ``events()``
    runs; ``progress(compressed bytes read, file size)`` after each slice."""

    def __init__(
        self,
        path: str,
        progress: Callable[[int, int], None] | None = None,
        limits: Limits | None = None,
        buffering: Buffering | None = None,
    ) -> None:
        self.path = path
        self.progress = progress
        self.limits = limits if limits is not None else current_limits()
        self.buffering = buffering if buffering is not None else _current[Buffering]
        self.metadata: dict[str, Any] = {}
        self.top_keys: list[str] = []  # distinct names in file order, at most _MAX_TOP_KEYS (for errors)
        self.events_seen = False
        self.size = 0
        self.elements = 0  # traceEvents elements so far, objects or not
        self._files = ExitStack()  # the file and its decompressor: ``close`` closes both, whatever fails
        self._raw: IO[bytes] | None = None
        self._fh: IO[bytes] | None = None
        self._buf = b""
        self._pos = 0
        self._eof = False
        self._base = 0  # bytes dropped from the front of _buf, for error offsets
        self._kind: type[Any] = Event
        # called with (key, raw JSON of the value) for each top-level member in file order, and with
        # ("traceEvents", None) where that array starts (its elements are the slices): ``events(msgspec.Raw)``
        self.on_member: Callable[[str, bytes | None], None] | None = None

    # -- low level -------------------------------------------------------------------------------
    def _error(self, message: str, not_a_trace: bool = False) -> TraceError:
        return TraceError(self.path, message, not_a_trace)

    def _too_big(self, what: str) -> TraceError:
        mib = self.limits.max_value_bytes / (1 << 20)
        return self._error(f"{what} larger than {mib:g} MiB at byte {self._offset()} (the limit; see --max-value-mib)")

    def _more(self, held: int, what: str) -> int:
        """The next window once ``held`` bytes hold no complete ``what``: twice as many, up to the limit."""
        if held > self.limits.max_value_bytes:
            raise self._too_big(what)
        return min(2 * held, self.limits.max_value_bytes + self.buffering.block)

    def _open(self) -> None:
        """Open the file once (or take the descriptor the command holds for it, :func:`holding`), by
        descriptor from then on: a name flipped to a FIFO or a link after a check changes nothing."""
        held = _held.get(self.path)
        if held is not None:
            fd, st = os.dup(held), os.fstat(held)
            os.lseek(fd, 0, os.SEEK_SET)
        else:
            fd, st = safe_io.open_input(self.path)  # through the module: tests count the opens
        self.size = st.st_size
        raw = self._raw = self._files.enter_context(os.fdopen(fd, "rb"))
        magic = raw.read(2)
        raw.seek(0)
        if not magic:
            raise self._error("empty file")
        if magic != b"\x1f\x8b" and self.path.endswith(".gz"):
            raise self._error("not gzip (the name ends in .gz, the file has no gzip header)")
        if magic == b"\x1f\x8b":
            opener = _fast_gzip.IGzipFile if _fast_gzip is not None else gzip.GzipFile
            self._fh = self._files.enter_context(opener(fileobj=raw, mode="rb"))  # type: ignore[assignment]
        else:
            self._fh = raw

    def close(self) -> None:
        with suppress(Exception):  # closing a broken stream must not mask the real error
            self._files.close()

    def _read_block(self, n: int) -> bytes:
        assert self._fh is not None
        try:
            return self._fh.read(n)
        except EOFError:
            raise self._error("truncated gzip stream (file ends before the end-of-stream marker)") from None
        except gzip.BadGzipFile as exc:  # an OSError, but the data's fault
            raise self._error(f"corrupt gzip data ({exc})") from None
        except OSError as exc:
            raise self._error(f"cannot read: {exc.strerror or exc}") from None
        except MemoryError:
            raise  # the decompressor's output buffer: out of memory, not corrupt data (``events`` says so)
        except Exception as exc:  # noqa: BLE001 - zlib's or isal's error class, or any decompressor failure
            raise self._error(f"corrupt gzip data ({exc})") from None

    def _fill(self, need: int) -> bool:
        """Make ``need`` bytes available after ``_pos`` (callers grow it geometrically); False at EOF."""
        if len(self._buf) - self._pos >= need:
            return True
        with memoryview(self._buf) as view:
            parts: list[bytes | memoryview] = [view[self._pos :]]  # the unread rest, copied once by join
            have = len(self._buf) - self._pos
            while have < need and not self._eof:
                block = self._read_block(max(self.buffering.block, need - have))
                if not block:
                    self._eof = True
                    break
                parts.append(block)
                have += len(block)
            self._base += self._pos
            self._pos = 0
            self._buf = b"".join(parts)
            del parts
        return have >= need

    def _skip_ws(self) -> None:
        while True:
            self._pos = _after_ws(self._buf, self._pos)
            if self._pos < len(self._buf) or not self._fill(1):
                return

    def _peek(self) -> bytes:
        self._skip_ws()
        return self._buf[self._pos : self._pos + 1]

    def _take(self, char: bytes) -> bool:
        """Whether ``char`` is next (after whitespace); if so the cursor moves past it."""
        if self._peek() != char:
            return False
        self._pos += 1
        return True

    def _expect(self, char: bytes, what: str) -> None:
        if not self._take(char):
            got = self._peek()
            found = f"{got.decode('latin-1')!r}" if got else "end of data"
            raise self._error(f"invalid JSON: expected {what}, found {found} at byte {self._offset()}")

    def _offset(self) -> int:
        return self._base + self._pos

    def _report(self) -> None:
        if self.progress is not None and self._raw is not None:
            with suppress(OSError, ValueError):
                self.progress(self._raw.tell(), self.size)

    # -- JSON structure ----------------------------------------------------------------------------
    def _read_key(self) -> str:
        """A top-level object key, bounded: ``bytes.find`` from quote to quote, each quote looked at once; the
        buffer doubles while the key is open (docs/DESIGN.md §7.1)."""
        if self._peek() != b'"':
            raise self._error(f"invalid JSON: expected an object key at byte {self._offset()}")
        at = 0  # the last quote looked at, from the cursor: the opening one, then each escaped one
        while True:
            buf, pos = self._buf, self._pos
            while (quote := buf.find(b'"', pos + at + 1)) >= 0:
                seg = buf[pos + at + 1 : quote]  # a backslash run before a quote lies after the previous one
                if (len(seg) - len(seg.rstrip(b"\\"))) % 2 == 0:
                    break
                at = quote - pos
            scan = (quote if quote >= 0 else len(buf)) - pos
            if scan > self.limits.max_value_bytes:
                raise self._too_big("an object key")
            if quote >= 0:
                break
            if self._eof:
                raise self._error(f"invalid JSON: unterminated object key at byte {self._offset()}")
            self._fill(2 * scan + self.buffering.block)
        try:
            key = msgspec.json.decode(buf[pos : quote + 1])
        except msgspec.DecodeError:
            raise self._error(f"invalid JSON: bad object key at byte {self._offset()}") from None
        self._pos = quote + 1
        assert isinstance(key, str)
        return key

    def _read_value(self) -> tuple[Any, bytes]:
        """The complete JSON value (not traceEvents) at the cursor, and its text, reading more as needed."""
        self._skip_ws()
        want = _VALUE_WINDOW
        while True:
            self._fill(want)
            stop = min(len(self._buf), self._pos + want)
            try:  # latin-1: 1 byte = 1 char, so offsets stay byte offsets
                end = self._pos + _JSON_TEXT.raw_decode(self._buf[self._pos : stop].decode("latin-1"))[1]
            except json.JSONDecodeError:  # incomplete (or invalid: never complete)
                end = -1
            except RecursionError:  # the parse starts at a real value, so the depth is real
                raise self._error(f"invalid JSON: nested too deeply near byte {self._offset()}") from None
            except ValueError:  # an integer of more than 4,300 digits (Python's int-string limit)
                raise self._error(f"invalid JSON: number out of range near byte {self._offset()}") from None
            at_eof = self._eof and stop == len(self._buf)
            # A value is only known complete when a byte follows it that cannot continue a number.
            if end >= 0 and ((end < stop and not _NUMBER_TAIL.fullmatch(self._buf, end, stop)) or at_eof):
                try:
                    raw = self._buf[self._pos : end]
                    value = msgspec.json.decode(raw)
                except msgspec.ValidationError:  # the untyped decoder only refuses numbers out of range
                    raise self._error(f"invalid JSON: number out of range near byte {self._offset()}") from None
                except msgspec.DecodeError as exc:
                    raise self._error(f"invalid JSON: {exc}") from None
                self._pos = end
                return value, raw
            if at_eof:
                raise self._error(f"invalid JSON: bad or truncated value at byte {self._offset()}")
            want = self._more(stop - self._pos, "a value")

    def _cut(self, buf: bytes, start: int, limit: int, exact: bool) -> _Cut | None:
        """The longest decodable run of elements in ``buf[start:limit]``: unless ``exact``, the last few
        candidate boundaries first; then (also without candidates: elements need not be objects) an exact
        walk, element by element with the stdlib scanner (slow, rarely needed)."""
        try:
            if not exact:
                b = self.buffering
                cands = list(_CUT.finditer(buf, max(start, limit - b.tail_window), limit))
                if not cands and limit - start > b.tail_window:
                    cands = list(_CUT.finditer(buf, start, limit))
                for m in islice(reversed(cands), b.fast_tries):
                    got = _decode_slice(buf, start, m.start() + 1, self._kind)
                    if got is not None:
                        return _Cut(got[0], got[1], m.end(), buf[m.end() - 1 : m.end()] == b"]")
            text = buf.decode("latin-1")  # 1 byte = 1 char, so offsets stay byte offsets
            pos, last_end, resume, closed = start, -1, -1, False
            while pos < limit:
                try:  # the stdlib scanner does not skip leading whitespace
                    _, end = _JSON_TEXT.raw_decode(text, _after_ws(buf, pos))
                except json.JSONDecodeError:
                    break
                except RecursionError:  # the walk is in sync with the document: the depth is real
                    raise self._error(
                        f"invalid JSON: nested too deeply in traceEvents near byte {self._base + pos}"
                    ) from None
                except ValueError:  # an integer of more than 4,300 digits
                    raise _OutOfRange from None
                nxt = _after_ws(buf, end)
                if nxt >= len(buf):
                    break  # the separator is not in the buffer yet
                sep = buf[nxt : nxt + 1]
                if sep == b"]":
                    last_end, resume, closed = end, nxt + 1, True
                    break
                if sep != b",":
                    if nxt == end and _NUMBER_TAIL.fullmatch(buf, end):  # a number cut at the buffer's end
                        break
                    raise self._error(f"invalid JSON in traceEvents at byte {self._base + nxt}")
                last_end = end
                pos = resume = _after_ws(buf, nxt + 1)
            if last_end < 0:
                return None
            got = _decode_slice(buf, start, last_end, self._kind)
            if got is None:
                raise self._error(f"invalid JSON in traceEvents near byte {self._base + start}")
            return _Cut(got[0], got[1], resume, closed)
        except _OutOfRange as exc:
            what = str(exc) or "invalid JSON: number out of range"
            raise self._error(f"{what} in traceEvents near byte {self._base + start}") from None

    def _event_slices(self) -> Iterator[list[Any]]:
        """Yield decoded slices of the traceEvents array; the cursor ends after its ``]``."""
        self._expect(b"[", "'[' after \"traceEvents\"")
        if self._take(b"]"):
            return
        want = min(self.buffering.slice, self.buffering.min_slice)  # the first slice measures element sizes
        # (absolute start, absolute limit) of the last scan that found no complete element: while the first
        # element grows past the buffer, only bytes read since can complete it, and only with a separator
        # among them (a scan of the whole buffer per doubling made a 60 MiB name cost n log n)
        fruitless = (-1, -1)
        while True:
            self._fill(want)
            buf, start = self._buf, self._pos
            limit = min(len(buf), start + want)
            if fruitless[0] == self._base + start and not _has_separator(buf, fruitless[1] - self._base - 1, limit):
                cut = None
            else:
                cut = self._cut(buf, start, limit, exact=False)
            if cut is None and self._eof and limit == len(buf):  # nothing more will come: the exact walk names
                self._cut(buf, start, limit, exact=True)  # the fault it finds, if any
                raise self._error(f"invalid JSON in traceEvents (truncated or malformed) near byte {self._offset()}")
            if cut is None:
                fruitless = (self._base + start, self._base + limit)
                want = self._more(limit - start, "a traceEvents element")  # the first element is not complete yet
                continue
            self._pos = cut.resume
            self.elements += cut.elements
            if self.elements > (cap := self.limits.max_events):
                raise self._error(f"more than {cap:,} events in traceEvents (the limit; see --max-events)")
            yield cut.events
            self._report()
            if cut.closed:
                return
            # Aim at slice_events elements a slice: 4 MiB of tiny `{},` would be 1.4M structs at once.
            per_event = (cut.resume - start) / max(cut.elements, 1)
            b = self.buffering
            want = min(b.slice, max(b.min_slice, int(per_event * b.slice_events)))
            if per_event > b.slice:  # elements larger than a slice: room for the next one at once, not by doublings
                want = min(2 * int(per_event), self.limits.max_value_bytes + b.block)

    # -- public ------------------------------------------------------------------------------------
    def events(self, fields: type = Event) -> Iterator[list[Any]]:
        """Event slices in file order, each event a ``fields``; TraceError on any bad input. ``msgspec.Raw``:
        each element's JSON text (``--annotate`` copies the replay so, ``on_member`` taking the rest)."""
        self._kind = fields
        gc_was_enabled = gc.isenabled()
        gc.disable()  # decoding creates millions of acyclic objects; collections only cost time
        try:
            self._open()
            if self._fill(3) and self._buf.startswith(b"\xef\xbb\xbf"):
                self._pos = 3
            first = self._peek()
            if not first:
                raise self._error("empty file" if self.size == 0 else "no JSON content")
            if first != b"{":
                raise self._error("not a JSON object (a Kineto trace is an object with traceEvents)", not_a_trace=True)
            self._pos += 1
            if not self._take(b"}"):
                yield from self._members()
            if self._peek():
                raise self._error(f"invalid JSON: extra data after the top-level object at byte {self._offset()}")
            if not self.events_seen:
                keys = ", ".join(repr(k[:40]) for k in self.top_keys[:_SHOWN_KEYS])
                more = f", … {len(self.top_keys) - _SHOWN_KEYS:,} more" if len(self.top_keys) > _SHOWN_KEYS else ""
                found = f"; its keys: {keys}{more}" if keys else "; an empty object"
                raise self._error(f"no traceEvents array (not a Kineto/chrome trace{found})", not_a_trace=True)
            self._report()
        except MemoryError:
            raise self._error("out of memory while reading") from None
        except RecursionError:
            raise self._error("invalid JSON: nested too deeply") from None
        finally:
            self.close()
            if gc_was_enabled:
                gc.enable()

    def _members(self) -> Iterator[list[Any]]:
        """The top-level object's members, cursor after its ``{``; traceEvents is streamed."""
        seen: set[str] = set()
        for members in count(1):
            key = self._read_key()
            self._expect(b":", "':' after an object key")
            if members > _MAX_TOP_MEMBERS:
                raise self._error(f"more than {_MAX_TOP_MEMBERS:,} top-level members (the limit)")
            if len(seen) < _MAX_TOP_KEYS and key not in seen:
                seen.add(key)
                self.top_keys.append(key[:_MAX_TOP_KEY_CHARS])
            # a kept key given twice: JSON parsers and Perfetto take the last, a streaming reader the first
            if key in self.metadata or (key == "traceEvents" and self.events_seen):
                raise self._error(f"duplicate top-level key {key!r} (ambiguous: refused)")
            if key == "traceEvents":
                if self._peek() != b"[":
                    raise self._error("traceEvents is not an array")
                self.events_seen = True
                if self.on_member is not None:
                    self.on_member(key, None)
                yield from self._event_slices()
            else:
                value, raw = self._read_value()
                if key in KEEP_KEYS:
                    self.metadata[key] = value
                if self.on_member is not None:
                    self.on_member(key, raw)
            if self._take(b"}"):
                return
            if not self._take(b","):
                raise self._error(f"invalid JSON: expected ',' or '}}' at byte {self._offset()}")


def compact_json(raw: bytes, cache: dict[bytes, str]) -> str:
    """Layout-independent text of a raw JSON value such as ``Input Dims`` ('' when absent), so equal values
    compare and hash equal whatever the writer's spacing; ``cache`` keeps each distinct raw text's answer."""
    if not raw:
        return ""
    got = cache.get(raw)
    if got is None:
        try:
            got = msgspec.json.encode(msgspec.json.decode(raw)).decode()
        except msgspec.DecodeError:  # pragma: no cover - the reader validated it
            got = raw.decode("utf-8", "replace")
        cache[raw] = got
    return got


open_trace = TraceStream
