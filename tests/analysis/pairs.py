"""DERIVED capture/replay pairs, built from the real traces in tests/data (never stored): each builder takes
loaded trace documents and returns new ones, for what the real pair alone cannot exercise (a wrong capture,
extra launches, piecewise graphs, another rank, an NVIDIA-style pair, a scaled pair for the benchmark).
"""

from __future__ import annotations

import copy
import gzip
from pathlib import Path
from typing import Any

import msgspec

from tests.trace_files import call
from tests.trace_files import span as range_  # ``span`` is a local name in scaled()

DATA = Path(__file__).resolve().parent.parent / "data"
VLLM_CAPTURE = DATA / "vllm_decode_full_graph_capture_rank_0.json.gz"
VLLM_REPLAY = DATA / "vllm_decode_full_graph_replay_rank_0.json.gz"
VLLM_DETAILS = DATA / "vllm_decode_full_execution_details.json"
VLLM_OPS_SUMMARY = DATA / "vllm_decode_full_tracelens_ops_summary.csv"
H100 = DATA / "h100_qwen1.5-0.5b_inference.json.gz"

Doc = dict[str, Any]
_DEVICE = ("kernel", "gpu_memcpy", "gpu_memset")


def load(path: Path) -> Doc:
    """The trace as ``json.load`` gives it (msgspec: the same dicts, lists and numbers, several times faster)."""
    with gzip.open(path, "rb") as f:
        doc: Doc = msgspec.json.decode(f.read())
    return doc


def save(doc: Doc, path: Path) -> Path:
    """Compact JSON, gzip level 1: the derived pairs are written once, in a second, not half a minute."""
    path.write_bytes(gzip.compress(msgspec.json.encode(doc), compresslevel=1))
    return path


def clone(doc: Any) -> Any:
    """A deep copy of JSON data (an encode/decode round trip: exact, and far faster than deepcopy)."""
    return msgspec.json.decode(msgspec.json.encode(doc))


def window_launches(doc: Doc) -> list[dict[str, Any]]:
    """The capture window's kernel launches, in time order."""
    ev = doc["traceEvents"]
    marks = ("StreamBeginCapture", "StreamEndCapture")
    b, e = (next(x["ts"] for x in ev if mark in x.get("name", "")) for mark in marks)
    got = [x for x in ev if x.get("cat") == "cuda_runtime" and "LaunchKernel" in x["name"] and b <= x["ts"] <= e]
    return sorted(got, key=lambda x: x["ts"])


def graph_kernels(doc: Doc) -> list[dict[str, Any]]:
    """The replay's graph kernels (those sharing the graph launch's correlation), in time order."""
    ev = doc["traceEvents"]
    corr = next(e["args"]["correlation"] for e in ev if "GraphLaunch" in e.get("name", ""))
    got = [e for e in ev if e.get("cat") in _DEVICE and e["args"].get("correlation") == corr]
    return sorted(got, key=lambda e: e["ts"])


def rotate_names(capture: Doc) -> Doc:
    """DERIVED wrong capture: the window's launch kernel names shifted by one position."""
    out = clone(capture)
    launches = window_launches(out)
    names = [x["args"]["kernel"] for x in launches]
    for x, name in zip(launches, names[1:] + names[:1], strict=True):
        x["args"]["kernel"] = name
    return out


def extra_launches(capture: Doc, every: int = 40) -> Doc:
    """DERIVED capture with an extra launch (a kernel the replay never runs) after every ``every``-th one."""
    out = clone(capture)
    launches = window_launches(out)
    for n, x in enumerate(launches[::every]):
        extra = copy.deepcopy(x)
        extra["ts"] = x["ts"] + 0.001
        extra["dur"] = 0.0005
        extra["args"]["kernel"] = f"extra_kernel_{n}"
        extra["args"]["correlation"] = 90_000_000 + n
        out["traceEvents"].append(extra)
    return out


def with_rank(doc: Doc, rank: int) -> Doc:
    """DERIVED: the same trace claiming another ``distributedInfo`` rank."""
    out = dict(doc)  # the events are shared, never changed
    out["distributedInfo"] = {**out.get("distributedInfo", {}), "rank": rank}
    return out


def piecewise(capture: Doc, replay: Doc, cut: int) -> tuple[Doc, Doc]:
    """DERIVED piecewise pair: the window split in two at launch ``cut``, the graph launch split likewise."""
    cap = clone(capture)
    launches = window_launches(cap)
    tpl = next(e for e in cap["traceEvents"] if "StreamBeginCapture" in e.get("name", ""))
    t = (launches[cut - 1]["ts"] + launches[cut - 1].get("dur", 0) + launches[cut]["ts"]) / 2
    end = {**copy.deepcopy(tpl), "name": tpl["name"].replace("Begin", "End"), "ts": t, "dur": 0.001}
    begin = {**copy.deepcopy(tpl), "ts": t + 0.002, "dur": 0.001}
    cap["traceEvents"] += [end, begin]
    rep = clone(replay)
    kernels = graph_kernels(rep)
    launch = next(e for e in rep["traceEvents"] if "GraphLaunch" in e.get("name", ""))
    second = copy.deepcopy(launch)
    second["ts"] = launch["ts"] + launch.get("dur", 0) + 1.0
    second["args"]["correlation"] = 91_000_000
    rep["traceEvents"].append(second)
    for k in kernels[cut:]:
        k["args"]["correlation"] = 91_000_000
    return cap, rep


def _seg_bs(s: int) -> int:
    return 32 * (s + 1)


def scaled(capture: Doc, replay: Doc, segments: int, launches: int) -> tuple[Doc, Doc]:
    """DERIVED large pair: the capture repeated in ``segments`` ``capture::tokens=N`` segments (N = 32, 64, …;
    identical kernels: only the replay's size hint tells them apart), and the replay's graph launch with its
    kernels repeated ``launches`` times, launch n inside an ``execute_<N>_…`` annotation naming segment n."""
    cap = clone(capture)
    ev = cap["traceEvents"]
    base = [e for e in ev if e.get("ph") == "X" and "ts" in e and not str(e.get("name")).startswith("capture_")]
    lo = min(e["ts"] for e in base)
    span = max(e["ts"] + e.get("dur", 0) for e in base) - lo + 1000.0
    begin = next(e for e in ev if "StreamBeginCapture" in e.get("name", ""))
    cap["traceEvents"] = ev = [e for e in ev if not str(e.get("name")).startswith("capture_")]
    for s in range(1, segments):
        for e, c in zip(base, clone(base), strict=True):
            c["ts"] = e["ts"] + s * span
            if "correlation" in c.get("args", {}):
                c["args"]["correlation"] += s * 10_000_000
            ev.append(c)
    for s in range(segments):
        ev.append(range_(f"capture::tokens={_seg_bs(s)}", lo + s * span - 1.0, span - 500.0, pid=begin["pid"],
                         tid=begin["tid"]))
    rep = clone(replay)
    kernels = graph_kernels(rep)
    launch = next(e for e in rep["traceEvents"] if "GraphLaunch" in e.get("name", ""))
    step = max(k["ts"] + k["dur"] for k in kernels) - launch["ts"] + 100.0
    corr0 = launch["args"]["correlation"]
    rep["traceEvents"] = [e for e in rep["traceEvents"] if e.get("cat") != "user_annotation"]
    for n in range(launches):
        g = launch if n == 0 else copy.deepcopy(launch)
        g["ts"] = launch["ts"] + n * step if n else g["ts"]
        bs = _seg_bs(n % segments)
        name = f"execute_{bs}_context_0_generation_{bs}"
        rep["traceEvents"].append(range_(name, g["ts"] - 1.0, step - 50.0, pid=g["pid"], tid=g["tid"]))
        if n == 0:
            continue
        g["args"]["correlation"] = corr0 + 50_000_000 + n
        rep["traceEvents"].append(g)
        for k in kernels:
            c = copy.deepcopy(k)
            c["ts"] += n * step
            c["args"]["correlation"] = g["args"]["correlation"]
            rep["traceEvents"].append(c)
    return cap, rep


# -- NVIDIA-style pair from the H100 trace ----------------------------------------------------------


def _node_calls(doc: Doc) -> tuple[list[dict[str, Any]], dict[int, dict[str, Any]]]:
    """Launch / memcpy / memset calls whose device work is in the trace, and that work by correlation."""
    ev = doc["traceEvents"]
    work = {e["args"]["correlation"]: e for e in ev if e.get("cat") in _DEVICE and "correlation" in e.get("args", {})}
    calls = [
        e
        for e in ev
        if e.get("cat") in ("cuda_runtime", "cuda_driver")
        and any(w in e["name"] for w in ("LaunchKernel", "Memcpy", "Memset"))
        and e.get("args", {}).get("correlation") in work
    ]
    return sorted(calls, key=lambda e: e["ts"]), work


def nvidia_pair(h100: Doc, warmup: bool = True, node_ids: bool = False) -> tuple[Doc, Doc]:
    """DERIVED NVIDIA-style pair from the real H100 trace (whose launches carry no kernel names).

    Capture: the original trace is the eager warm-up pass; after it, one capture window repeats the
    launching thread's ops and node calls (new correlations, no device work, as during capture), all
    inside ``capture::bs=1``. ``warmup=False`` drops the warm-up's device work (nothing can name the
    captured launches). Replay: one ``cudaGraphLaunch`` owning the device work of those calls, with
    ``graph node id`` in capture order when ``node_ids`` (adjacent kernels then swap start times, so
    only the node ids give the right order).
    """
    calls, work = _node_calls(h100)
    tid, pid = calls[0]["tid"], calls[0]["pid"]
    ev = h100["traceEvents"]
    cpu_cats = ("cpu_op", "python_function")
    cpu = [e for e in ev if e.get("tid") == tid and e.get("ph") == "X" and e.get("cat") in cpu_cats]
    lo = min(e["ts"] for e in cpu + calls)
    hi = max(e["ts"] + e.get("dur", 0) for e in ev if e.get("ph") == "X")
    off = hi + 1000.0 - lo
    kept = {id(e) for e in calls}
    cap_events = clone([e for e in ev if warmup or e.get("cat") not in _DEVICE])
    for e, c in zip(cpu + calls, clone(cpu + calls), strict=True):
        c["ts"] = e["ts"] + off
        if id(e) in kept:
            c["args"] = {"correlation": e["args"]["correlation"] + 80_000_000, "cbid": e["args"].get("cbid")}
        cap_events.append(c)
    w_end = max(e["ts"] + e.get("dur", 0) for e in cpu + calls) + off
    marks = [("cudaStreamBeginCapture", hi + 500.0), ("cudaStreamEndCapture", w_end + 10.0)]
    cap_events += [call(n, t, 1.0, pid=pid, tid=tid) for n, t in marks]
    cap_events.append(range_("capture::bs=1", lo - 1.0, w_end + 20.0 - lo, pid=pid, tid=tid))
    capture = {k: v for k, v in h100.items() if k != "traceEvents"} | {"traceEvents": cap_events}
    return capture, _nvidia_replay(h100, calls, work, node_ids)


def _nvidia_replay(h100: Doc, calls: list[dict[str, Any]], work: dict[int, dict[str, Any]], node_ids: bool) -> Doc:
    tid, pid = calls[0]["tid"], calls[0]["pid"]
    first = min(work[c["args"]["correlation"]]["ts"] for c in calls)
    graph = call("cudaGraphLaunch", first - 50.0, 20.0, pid=pid, tid=tid, correlation=77_000_000, cbid=311)
    device = []
    for n, c in enumerate(calls):
        k = copy.deepcopy(work[c["args"]["correlation"]])
        k["args"]["correlation"] = 77_000_000
        k["args"].pop("External id", None)
        if node_ids:
            k["args"]["graph node id"] = 1000 + n
        device.append(k)
    if node_ids:
        for a, b in zip(device[0::2], device[1::2], strict=False):
            a["ts"], b["ts"] = b["ts"], a["ts"]
    return {k: v for k, v in h100.items() if k != "traceEvents"} | {"traceEvents": [graph, *device]}


def as_ours(capture: Doc, runner: str, rank: int = 0) -> Doc:
    """DERIVED: the capture as our exporter writes it (``capture_trace`` metadata first; the foreign
    ``capture_32_FULL`` range becomes ``capture::bs=32``)."""
    out = clone(capture)
    for e in out["traceEvents"]:
        if e.get("name") == "capture_32_FULL":
            e["name"] = "capture::bs=32"
    meta = {"runner": runner, "runner_class": f"demo.{runner}", "tp_rank": rank, "pp_rank": 0, "capture_index": 1}
    return {"capture_trace": meta, **out}


def with_replay_range(replay: Doc, name: str) -> Doc:
    """DERIVED: the replay with one more ``record_function`` range around its graph launch."""
    out = clone(replay)
    g = next(e for e in out["traceEvents"] if "GraphLaunch" in e.get("name", ""))
    out["traceEvents"].append(range_(name, g["ts"] - 1.0, g["dur"] + 2.0, pid=g["pid"], tid=g["tid"]))
    return out


def our_rank(doc: Doc, rank: int, size: int) -> Doc:
    """DERIVED: one of our captures as TP rank ``rank`` of a ``size``-rank server (``capture_trace``'s
    ``tp_rank`` and ``tp_size``); the events are shared, never changed."""
    return {**doc, "capture_trace": {**doc["capture_trace"], "tp_rank": rank, "tp_size": size}}


def slower(doc: Doc, factor: float) -> Doc:
    """DERIVED: the same trace ``factor`` times slower (every event's ``ts`` and ``dur`` scaled), as the
    run after a change that slowed the whole capture down."""
    out = clone(doc)
    for e in out["traceEvents"]:
        for k in ("ts", "dur"):
            if isinstance(e.get(k), (int, float)):
                e[k] = round(e[k] * factor, 3)
    return out
