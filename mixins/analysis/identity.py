"""Who produced a trace: runner, ranks, capture index, from metadata, file name or ``distributedInfo``."""

from __future__ import annotations

import os
import re
from dataclasses import dataclass, field
from typing import Any

__all__ = ["Identity", "identity_from_name", "identity_of", "is_trace_name", "rank_from_name"]

_OURS = re.compile(
    r"^cuda_graph_capture-(?P<runner>.+?)-TP-(?P<tp>\d+)(?:-PP-(?P<pp>\d+))?(?:-(?P<n>\d+))?\.json(?:\.gz)?$"
)
_UPSTREAM_BS = re.compile(r"^(?:(?P<runner>.+?)_)?bs_(?P<bs>\d+)_rank(?P<rank>\d+)\.json(?:\.gz)?$")
_RANK_IN_NAME = re.compile(r"(?:-TP-|(?:^|[_.-])rank_?)(?P<rank>\d+)(?=[_.-]|$)")


def is_trace_name(name: str) -> bool:
    """Files ``ls``/``check`` consider: visible ``*.json``/``*.json.gz`` (dotfiles are our temp files)."""
    return not name.startswith(".") and (name.endswith(".json.gz") or name.endswith(".json"))


@dataclass
class Identity:
    """Who produced a trace; ``source`` says where it came from (never guessed silently)."""

    runner: str | None = None
    runner_class: str | None = None
    tp_rank: int | None = None
    pp_rank: int | None = None
    pp_size: int | None = None
    capture_index: int = 1
    source: str = "none"  # "metadata" | "filename" | "distributedInfo" | "none"
    bs: int | None = None  # only from an upstream per-batch-size file name
    # the rest of our metadata (sizes, versions, host, device, time): `ls --long`, `check`'s completeness
    extra: dict[str, Any] = field(default_factory=dict)

    def as_json(self) -> dict[str, Any]:
        return {
            "runner": self.runner,
            "runner_class": self.runner_class,
            "tp_rank": self.tp_rank,
            "pp_rank": self.pp_rank,
            "capture_index": self.capture_index,
            "identity_source": self.source,
        }


_KEPT_METADATA = (
    "sglang_version", "torch_version", "package_version", "hostname", "device", "time_utc", "pid",
    "tp_size", "dp_size", "world_size", "rank_source", "size_source", "capture_bs",
)


def _int_or_none(v: Any) -> int | None:
    return v if isinstance(v, int) and not isinstance(v, bool) else None


def identity_from_name(path: str) -> Identity | None:
    """Parse our file name, upstream's per-batch-size one or vLLM's ``graph_capture_rank_N``; None if none."""
    name = os.path.basename(path)
    m = _OURS.match(name)
    if m:
        return Identity(
            runner=m["runner"],
            tp_rank=int(m["tp"]),
            pp_rank=int(m["pp"]) if m["pp"] else 0,
            capture_index=int(m["n"]) if m["n"] else 1,
            source="filename",
        )
    m = _UPSTREAM_BS.match(name)
    if m:
        return Identity(
            runner=m["runner"], tp_rank=int(m["rank"]), pp_rank=0, bs=int(m["bs"]), source="filename"
        )
    return None


def rank_from_name(path: str) -> int | None:
    """A rank written in a file name (``-TP-0``, ``_rank0``, vLLM's ``graph_capture_rank_0.<stamp>``), else None."""
    m = _RANK_IN_NAME.search(os.path.basename(path))
    return int(m["rank"]) if m else None


def identity_of(path: str, metadata: dict[str, Any]) -> Identity:
    """metadata ``capture_trace`` > file name > ``distributedInfo.rank`` > nothing."""
    from_name = identity_from_name(path)
    meta = metadata.get("capture_trace")
    if isinstance(meta, dict) and (
        meta.get("runner") is not None or _int_or_none(meta.get("tp_rank")) is not None
    ):
        runner = meta.get("runner")
        idx = _int_or_none(meta.get("capture_index"))
        return Identity(
            runner=runner if isinstance(runner, str) else None,
            runner_class=meta.get("runner_class") if isinstance(meta.get("runner_class"), str) else None,
            tp_rank=_int_or_none(meta.get("tp_rank")),
            pp_rank=_int_or_none(meta.get("pp_rank")) or 0,
            pp_size=_int_or_none(meta.get("pp_size")),
            capture_index=idx if idx is not None else (from_name.capture_index if from_name else 1),
            source="metadata",
            bs=from_name.bs if from_name else None,
            extra={k: meta[k] for k in _KEPT_METADATA if k in meta},
        )
    if from_name is not None:
        return from_name
    dist = metadata.get("distributedInfo")
    if isinstance(dist, dict) and _int_or_none(dist.get("rank")) is not None:
        world = _int_or_none(dist.get("world_size"))  # the rank is a world rank: the world is the group
        return Identity(tp_rank=dist["rank"], pp_rank=0, source="distributedInfo", extra={"tp_size": world})
    return Identity()
