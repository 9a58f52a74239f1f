"""One serialisation path: every result the analyzer prints as JSON goes through ``to_json``, so the
commands share field names and value forms."""

from __future__ import annotations

from collections import Counter
from typing import Any

import msgspec

from mixins.analysis.model.record import Kernel, Segment, TraceRecord
from mixins.analysis.model.segments import size_json

__all__ = ["to_json", "json_value", "op_json", "summarize"]


def to_json(obj: Any) -> Any:
    """Plain JSON values from results: objects with ``as_json``, structs (their fields), containers."""
    as_json = getattr(obj, "as_json", None)
    if callable(as_json):
        return to_json(as_json())
    if isinstance(obj, msgspec.Struct):
        return {name: to_json(getattr(obj, name)) for name in obj.__struct_fields__}
    if isinstance(obj, dict):
        return {str(k): to_json(v) for k, v in obj.items()}
    if isinstance(obj, (list, tuple)):
        return [to_json(v) for v in obj]
    return obj


def json_value(text: str) -> Any:
    """A signature field (kept as compact JSON text for hashing) as the value it encodes; None if absent."""
    return msgspec.json.decode(text) if text else None


def _op_fields(name: str, dims: str, types: str) -> dict[str, Any]:
    return {"op": name, "input_dims": json_value(dims), "input_types": json_value(types)}


def op_json(key: tuple[Any, ...]) -> dict[str, Any]:
    """Human/JSON form of an op key (see ``Op.key``)."""
    name, dims, types, concrete, kernels, graphs = key
    out = {**_op_fields(name, dims, types), "concrete": json_value(concrete)}
    if kernels:
        out["kernels"] = [k.as_json() for k in kernels]
    if graphs:
        out["graph_launches"] = graphs
    return out


_COUNTS = (
    "cpu_ops", "launches", "graph_launches", "kernels", "linked_kernels", "unnamed_launches", "attributed_launches",
    "unknown_launches", "ops_without_shapes",
)

ShapeKey = tuple[str, str, str]


def _kernels_per_signature(s: Segment) -> tuple[Counter[ShapeKey], dict[ShapeKey, Counter[tuple[Kernel, bool]]]]:
    """How often each signature ran, and its kernels (named by alignment or not) with counts."""
    table = s.table
    if table is None:
        return Counter(), {}
    counts = table.shape_counts(s.members)
    kernels: dict[ShapeKey, Counter[tuple[Kernel, bool]]] = {}
    launched, attributed = table.kernels, table.attributed
    for k in filter(launched.__contains__, s.members):  # in time order: ties in ``most_common`` keep it
        kc = kernels.setdefault(table.sigs[table.sig[k]].shape_key, Counter())
        names = attributed.get(k, ())
        for n, kernel in enumerate(launched[k]):
            if kernel.name is None and n < len(names) and names[n] is not None:
                kc[(Kernel(names[n]), True)] += 1
            else:
                kc[(kernel, False)] += 1
    return counts, kernels


def _segment_json(s: Segment, top: int) -> dict[str, Any]:
    """A segment's counts and its ``top`` signatures by device work launched, then by how often they ran
    (by count alone: ``aten::empty`` / ``aten::view``, which launch nothing)."""
    counts, kernels = _kernels_per_signature(s)
    launched = {key: sum(kc.values()) for key, kc in kernels.items()}
    top_rows = [
        {
            **_op_fields(*key),
            "count": count,
            "kernels": [
                {**k.as_json(), "count": c, **({"attributed": True} if attributed else {})}
                for (k, attributed), c in kernels.get(key, Counter()).most_common()
            ],
        }
        for key, count in sorted(counts.items(), key=lambda kv: (-launched.get(kv[0], 0), -kv[1]))[:top]
    ]
    return {
        "label": s.label,
        "bs": s.bs,
        **size_json(s.label),
        "events": s.events,
        "signatures": s.signatures,
        **{k: getattr(s, k) for k in _COUNTS},
        "top": top_rows,
    }


def summarize(rec: TraceRecord, top: int = 10) -> dict[str, Any]:
    """The ``summary --json`` object for one trace (also what ``ls`` shows)."""
    segments = [_segment_json(s, top) for s in rec.segments]
    totals: dict[str, int] = {k: sum(int(seg[k]) for seg in segments) for k in _COUNTS}
    totals["signatures"] = len({key for s in rec.segments if s.table for key in s.table.shape_counts(s.members)})
    return {
        "path": rec.path,
        "role": rec.identity.role,
        **rec.identity.as_json(),
        "size": rec.size,
        "events": rec.events,
        "segment_source": rec.segment_source,
        "totals": totals,
        "segments": segments,
    }
