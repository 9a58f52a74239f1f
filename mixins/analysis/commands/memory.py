"""``memory``: what a capture did to CUDA memory, from the snapshot saved beside each trace, per
``capture::`` segment of that trace (docs/DESIGN.md §7.5)."""

from __future__ import annotations

import argparse
import os
from typing import Any

from mixins.analysis import render
from mixins.analysis.jobs import collect_results, map_files
from mixins.analysis.model.identity import identity_of
from mixins.analysis.model.segments import segments_of
from mixins.analysis.read.reader import TraceError
from mixins.formats import MEMORY_NAME, MEMORY_PREFIX, MEMORY_SUFFIX, SEGMENT_PREFIX, SUBDIR, TRACE_PREFIX, TRACE_SUFFIX
from mixins.helptext import add_command, non_negative_int
from mixins.usage import OK, TROUBLE

_DEFAULT_POOL = (0, 0)  # the caching allocator's own pool; a CUDA graph's private pool has another id


def add(subparsers: Any) -> None:
    p = add_command(
        subparsers,
        "memory",
        "For each memory snapshot (cuda_graph_memory-*.pickle, or the ones in a directory): memory allocated "
        "during each shape's capture:: segment of the trace beside it, the part in CUDA-graph pools, "
        "the peak while recording, and the allocation sites holding the most memory. Snapshots are read "
        "without unpickling any object: anything but torch's snapshot layout is refused.",
        ["capture-trace memory /tmp/graph_capture_profile",
         "capture-trace memory --json cuda_graph_memory-DecodeCudaGraphRunner-TP-0.pickle"],
    )
    p.add_argument("paths", metavar="PATH", nargs="+", help="snapshot files (.pickle) or directories")
    p.add_argument("--json", action="store_true", help="machine-readable output")
    p.add_argument("--top", type=non_negative_int("--top"), default=5, metavar="N", help="top N allocation sites")
    p.set_defaults(func=cmd_memory)


def snapshot_files(path: str) -> list[str]:
    """``path`` itself, or the snapshots of the directory (or of its ``graph_capture_profile``)."""
    if not os.path.isdir(path):
        return [path]
    names = sorted(n for n in os.listdir(path) if MEMORY_NAME.match(n))
    if not names and os.path.isdir(os.path.join(path, SUBDIR)):
        return snapshot_files(os.path.join(path, SUBDIR))
    if not names:
        raise TraceError(path, f"no memory snapshots ({MEMORY_PREFIX}*{MEMORY_SUFFIX}) in this directory")
    return [os.path.join(path, n) for n in names]


def _int(v: Any) -> int:
    return v if isinstance(v, int) and not isinstance(v, bool) else 0


def _time(e: dict[str, Any]) -> float | None:
    t = e.get("time_us")
    return float(t) if isinstance(t, (int, float)) and not isinstance(t, bool) else None


def _graph_pool(pool: Any) -> bool:
    return isinstance(pool, (tuple, list)) and len(pool) == 2 and tuple(pool) != _DEFAULT_POOL


def _site(frames: Any) -> str:
    """Where an allocation was made: the first Python frame outside torch, else the first frame."""
    frames = [f for f in frames if isinstance(f, dict)] if isinstance(frames, list) else []
    python = [f for f in frames if str(f.get("filename", "")).endswith(".py")]
    ours = [f for f in python if "/torch/" not in str(f.get("filename", ""))]
    for f in ours or python or frames:
        return f"{f.get('filename', '?')}:{_int(f.get('line'))} {f.get('name', '?')}"
    return "(no stack recorded)"


def _segments(trace: str) -> tuple[list[tuple[str, float, float]], str | None]:
    """(label, start µs, end µs) of the trace's capture:: segments on the snapshot's clock (Unix µs)."""
    from mixins.analysis.model.timeline import BareEvent, load_timeline

    tl = load_timeline(trace, fields=BareEvent)
    segs, source = segments_of(tl.ranges, identity_of(trace, tl.metadata))
    if source != SEGMENT_PREFIX:
        return [], "the trace beside it has no capture:: segments"
    base = tl.metadata.get("baseTimeNanoseconds")
    offset = base / 1000 if isinstance(base, (int, float)) and not isinstance(base, bool) else 0.0
    return [(s.label, s.start + offset, s.end + offset) for s in segs], None


def analyse(snapshot: dict[str, Any], segments: list[tuple[str, float, float]], top: int) -> dict[str, Any]:
    """The numbers ``memory`` shows for one snapshot (``segments``: from ``_segments``)."""
    events = sorted(
        (e for trace in snapshot.get("device_traces", []) for e in trace if isinstance(e, dict)),
        key=lambda e: _time(e) or 0.0,
    )
    live = peak = 0
    for e in events:
        if e.get("action") == "alloc":
            live += _int(e.get("size"))
            peak = max(peak, live)
        elif e.get("action") == "free_completed":
            live -= _int(e.get("size"))
    shapes = []
    for label, start, end in segments:
        inside = [e for e in events if (t := _time(e)) is not None and start <= t <= end]
        allocs = [e for e in inside if e.get("action") == "alloc"]
        allocated = sum(_int(e.get("size")) for e in allocs)
        freed = sum(_int(e.get("size")) for e in inside if e.get("action") == "free_completed")
        shapes.append({
            "label": label, "allocs": len(allocs), "allocated_bytes": allocated,
            "graph_pool_bytes": sum(_int(e.get("size")) for e in allocs if _graph_pool(e.get("pool_id"))),
            "freed_bytes": freed, "net_bytes": allocated - freed,
        })
    segs = [s for s in snapshot["segments"] if isinstance(s, dict)]
    sites: dict[str, list[int]] = {}
    for seg in segs:
        for block in seg.get("blocks", []) if isinstance(seg.get("blocks"), list) else []:
            if isinstance(block, dict) and block.get("state") == "active_allocated":
                entry = sites.setdefault(_site(block.get("frames")), [0, 0])
                entry[0] += _int(block.get("size"))
                entry[1] += 1
    ranked = sorted(sites.items(), key=lambda kv: (-kv[1][0], kv[0]))[:top]
    return {
        "reserved_bytes": sum(_int(s.get("total_size")) for s in segs),
        "allocated_bytes": sum(_int(s.get("allocated_size")) for s in segs),
        "graph_pool_reserved_bytes": sum(
            _int(s.get("total_size")) for s in segs if _graph_pool(s.get("segment_pool_id"))),
        "peak_recorded_bytes": peak, "trace_events": len(events), "shapes": shapes,
        "top_sites": [{"site": site, "bytes": b, "blocks": n} for site, (b, n) in ranked],
    }


def memory_job(path: str, top: int) -> dict[str, Any]:
    from mixins.analysis.read.safe_io import load_snapshot

    snapshot = load_snapshot(path)
    name = os.path.basename(path)
    m = MEMORY_NAME.match(name)
    stem = name[len(MEMORY_PREFIX): -len(MEMORY_SUFFIX)]  # the trace beside it has the same runner, ranks, number
    beside = os.path.join(os.path.dirname(path), TRACE_PREFIX + stem + TRACE_SUFFIX)
    trace = beside if m and os.path.isfile(beside) else None
    segments, note = _segments(trace) if trace is not None else ([], "no trace beside it")
    return {
        "path": path, "runner": m["runner"] if m else None,
        **{f"{k}_rank": int(m[k]) if m and m[k] else None for k in ("tp", "pp", "dp")},
        "trace": trace, "note": note, **analyse(snapshot, segments, top),
    }


def cmd_memory(args: argparse.Namespace) -> int:
    results, bad = [], False
    for path in args.paths:
        try:
            files = snapshot_files(path)
        except (TraceError, OSError) as exc:
            render.error(str(exc) if isinstance(exc, TraceError) else f"{path}: {exc.strerror or exc}")
            bad = True
            continue
        read, bad_files = collect_results(map_files(memory_job, files, (args.top,), 1, False))
        results += read
        bad = bad or bad_files
    if args.json:
        render.print_json({"snapshots": results})
    else:
        _render(results)
    return TROUBLE if bad else OK


def _render(results: list[dict[str, Any]]) -> None:
    from mixins.analysis.tables import Col, print_table

    out = render.console()
    size = render.size_text
    for r in results:
        out.print(render.safe(
            f"{render.who(r)}: {size(r['allocated_bytes'])} allocated of {size(r['reserved_bytes'])} reserved "
            f"({size(r['graph_pool_reserved_bytes'])} in graph pools); peak while recording "
            f"{size(r['peak_recorded_bytes'])} above its start ({r['path']})"
        ))
        if r["shapes"]:
            shape_cols = (Col("shape", "key"), Col("allocs", "num"), Col("allocated", "num"),
                          Col("graph pool", "num"), Col("freed", "num"), Col("net", "num"))
            rows = [[s["label"], f"{s['allocs']:,}", size(s["allocated_bytes"]), size(s["graph_pool_bytes"]),
                     size(s["freed_bytes"]), "-" * (s["net_bytes"] < 0) + size(abs(s["net_bytes"]))]
                    for s in r["shapes"]]
            print_table(out, shape_cols, rows)
        elif r["note"]:
            out.print(render.safe(f"  per shape: {r['note']}"))
        if r["top_sites"]:
            site_cols = (Col("allocation site", "key", fold=24), Col("held", "num"), Col("blocks", "num"))
            print_table(out, site_cols, [[s["site"], size(s["bytes"]), f"{s['blocks']:,}"] for s in r["top_sites"]])
