"""Who produced a trace: runner, ranks, capture index, from metadata, file name or ``distributedInfo``."""

from __future__ import annotations

import os
import re
from typing import Any

from msgspec import Struct, field

from mixins.analysis.read.reader import MAX_TEXT, TraceError, cut_text
from mixins.formats import TRACE_NAME

__all__ = [
    "Identity", "identity_from_name", "identity_of", "is_trace_name", "rank_from_name", "MAX_WORLD", "names_a_trace",
]

# The one bound on ranks and group sizes read from a trace or a file name (docs/DESIGN.md §7.1).
MAX_WORLD = 1 << 16
_MAX_INDEX = 1 << 31  # capture index, batch size: only printed and compared
_MAX_DIGITS = 10  # int() of a longer digit run is never needed (and past 4,300 digits raises)

_UPSTREAM_BS = re.compile(r"^(?:(?P<runner>.+?)_)?bs_(?P<bs>\d+)_rank(?P<rank>\d+)\.json(?:\.gz)?$")
_RANK_IN_NAME = re.compile(r"(?:-TP-|(?:^|[_.-])rank_?)(?P<rank>\d+)(?=[_.-]|$)")


def names_a_trace(name: str) -> bool:
    """Whether a file's name says it is a trace (``*.json.gz``, "trace" or ``graph_capture`` in it, ours,
    upstream's): a broken one so named is an error, where other JSON in a listed folder is skipped."""
    base = os.path.basename(name)
    named = base.endswith(".gz") or "trace" in base.lower() or "graph_capture" in base
    return named or bool(TRACE_NAME.match(base) or _UPSTREAM_BS.match(base))


def is_trace_name(name: str) -> bool:
    """Files ``ls``/``check`` consider: visible ``*.json``/``*.json.gz`` (dotfiles are our temp files)."""
    return not name.startswith(".") and (name.endswith(".json.gz") or name.endswith(".json"))


class Identity(Struct):
    """Who produced a trace; ``source`` says where it came from (never guessed silently)."""

    runner: str | None = None
    runner_class: str | None = None
    tp_rank: int | None = None
    pp_rank: int | None = None
    pp_size: int | None = None
    dp_rank: int | None = None  # the data-parallel replica; None: not one of several (or not recorded)
    capture_index: int = 1
    source: str = "none"  # "metadata" | "filename" | "distributedInfo" | "none"
    bs: int | None = None  # only from an upstream per-batch-size file name
    # the rest of our metadata (sizes, versions, host, device, time): `ls --long`, `check`'s completeness
    extra: dict[str, Any] = field(default_factory=dict)
    # what the trace is and which server start wrote it (``roles.identify``; None: not decided)
    role: str | None = None
    role_evidence: str = ""
    run: tuple[Any, ...] = ()

    def as_json(self) -> dict[str, Any]:
        shown = ("runner", "runner_class", "tp_rank", "pp_rank", "dp_rank", "capture_index")
        return {**{k: getattr(self, k) for k in shown}, "identity_source": self.source}


def _int_or_none(v: Any) -> int | None:
    return v if isinstance(v, int) and not isinstance(v, bool) else None


def _checked(path: str, what: str, v: int | None, low: int, high: int) -> int | None:
    """``v`` when ``low <= v < high``; a TraceError naming ``what`` otherwise (None stays None)."""
    if v is not None and not low <= v < high:
        shown = str(v) if abs(v) < 10**30 else f"a {len(str(abs(v)))}-digit number"
        raise TraceError(path, f"{what} {shown} out of range ({low}..{high - 1})")
    return v


def _digits(path: str, what: str, text: str | None, high: int) -> int | None:
    """A digit run from a file name as a bounded int (the length is checked before ``int()``)."""
    if text is None:
        return None
    if len(text) > _MAX_DIGITS:
        raise TraceError(path, f"{what} in the file name has {len(text):,} digits (at most {high - 1})")
    return _checked(path, f"{what} in the file name", int(text), 0, high)


def _rank(path: str, what: str, v: Any) -> int | None:
    return _checked(path, what, _int_or_none(v), 0, MAX_WORLD)


def _size(path: str, what: str, v: Any) -> int | None:
    return _checked(path, what, _int_or_none(v), 1, MAX_WORLD + 1)


# the metadata fields kept (in this order), each with the type it must have; a value of another type is
# dropped (ls --long shows "?")
_TEXT, _INT, _SIZE, _INT_LIST = "text", "int", "size", "int list"
_FIELD_TYPES = {
    "sglang_version": _TEXT, "torch_version": _TEXT, "package_version": _TEXT, "hostname": _TEXT,
    "device": _TEXT, "time_utc": _TEXT, "pid": _INT, "tp_size": _SIZE, "dp_size": _SIZE, "world_size": _SIZE,
    "rank_source": _TEXT, "size_source": _TEXT, "capture_bs": _INT_LIST,
}
_MAX_LIST = 4096


def _typed(v: Any, kind: str) -> bool:
    if kind == _TEXT:
        return isinstance(v, str) and len(v) <= MAX_TEXT
    if kind == _INT_LIST:
        return isinstance(v, list) and len(v) <= _MAX_LIST and all(_int_or_none(x) is not None for x in v)
    return _int_or_none(v) is not None


def _extra(path: str, meta: dict[str, Any]) -> dict[str, Any]:
    """The kept metadata fields of the right type; sizes bounded like ranks (TraceError past MAX_WORLD)."""
    out = {k: meta[k] for k, kind in _FIELD_TYPES.items() if k in meta and _typed(meta[k], kind)}
    for k in ("tp_size", "dp_size", "world_size"):
        if k in out:
            out[k] = _size(path, k, out[k])
    return out


def identity_from_name(path: str) -> Identity | None:
    """Parse our file name, upstream's per-batch-size one or vLLM's ``graph_capture_rank_N``; None if none.
    A number out of range (``-TP-999999999``) is a TraceError naming the file."""
    name = os.path.basename(path)
    m = TRACE_NAME.match(name)
    if m:
        return Identity(
            runner=m["runner"],
            tp_rank=_digits(path, "TP rank", m["tp"], MAX_WORLD),
            pp_rank=_digits(path, "PP rank", m["pp"], MAX_WORLD) or 0,
            dp_rank=_digits(path, "DP rank", m["dp"], MAX_WORLD),
            capture_index=_digits(path, "capture index", m["n"], _MAX_INDEX) or 1,
            source="filename",
        )
    m = _UPSTREAM_BS.match(name)
    if m:
        return Identity(
            runner=m["runner"],
            tp_rank=_digits(path, "rank", m["rank"], MAX_WORLD),
            pp_rank=0,
            bs=_digits(path, "batch size", m["bs"], _MAX_INDEX),
            source="filename",
        )
    return None


def rank_from_name(path: str) -> int | None:
    """A rank written in a file name (``-TP-0``, ``_rank0``, vLLM's ``graph_capture_rank_0.<stamp>``), else None."""
    m = _RANK_IN_NAME.search(os.path.basename(path))
    return _digits(path, "rank", m["rank"], MAX_WORLD) if m else None


def identity_of(path: str, metadata: dict[str, Any]) -> Identity:
    """metadata ``capture_trace`` > file name > ``distributedInfo.rank`` > nothing."""
    from_name = identity_from_name(path)
    meta = metadata.get("capture_trace")
    if isinstance(meta, dict) and (
        meta.get("runner") is not None or _int_or_none(meta.get("tp_rank")) is not None
    ):
        runner, runner_class = meta.get("runner"), meta.get("runner_class")
        idx = _checked(path, "capture_index", _int_or_none(meta.get("capture_index")), 0, _MAX_INDEX)
        return Identity(
            runner=cut_text(runner) if isinstance(runner, str) else None,  # in every bar and row: cut as read
            runner_class=cut_text(runner_class) if isinstance(runner_class, str) else None,
            tp_rank=_rank(path, "tp_rank", meta.get("tp_rank")),
            pp_rank=_rank(path, "pp_rank", meta.get("pp_rank")) or 0,
            pp_size=_size(path, "pp_size", meta.get("pp_size")),
            dp_rank=_rank(path, "dp_rank", meta.get("dp_rank")),
            capture_index=idx if idx is not None else (from_name.capture_index if from_name else 1),
            source="metadata",
            bs=from_name.bs if from_name else None,
            extra=_extra(path, meta),
        )
    if from_name is not None:
        return from_name
    dist = metadata.get("distributedInfo")
    if isinstance(dist, dict) and _int_or_none(dist.get("rank")) is not None:
        # the rank is a world rank: the world is the group
        world = _size(path, "distributedInfo.world_size", dist.get("world_size"))
        rank = _rank(path, "distributedInfo.rank", dist["rank"])
        return Identity(tp_rank=rank, pp_rank=0, source="distributedInfo", extra={"tp_size": world})
    return Identity()
