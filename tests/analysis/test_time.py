"""``capture-trace time``: phase boundaries checked against the events themselves.

The reference below reads the raw JSON with ``json.load`` and sweeps boundary points with depth
counters (no interval algebra, no code shared with ``mixins.analysis.commands.time``). It runs on the real
vLLM capture trace, on the demo's real CPU traces, and on hand-written CUDA capture traces (named
fakes: no GPU here) with several windows, instantiate/upload calls, vLLM/HIP names and no segment.
Last, ``time``'s two ways to nest calls (the columns and the stack walk) agree on generated traces.
"""

from __future__ import annotations

import json
import re
import shutil
import tempfile
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest
from hypothesis import given
from hypothesis import strategies as st

import mixins.analysis.commands.time as time_command
from mixins.analysis.commands.time import PHASES
from mixins.analysis.model.roles import identify
from mixins.analysis.model.timeline import BareEvent, load_timeline
from mixins.analysis.serialise import to_json
from tests.trace_files import Event, call, event, load_trace, op, span, write_trace

DATA = Path(__file__).resolve().parent.parent / "data"
VLLM = DATA / "vllm_decode_full_graph_capture_rank_0.json.gz"
RUNNERS = ("DecodeCudaGraphRunner", "EAGLEDraftCudaGraphRunner", "EAGLEDraftExtendCudaGraphRunner")
PREFILL = "PrefillCudaGraphRunner"  # the demo's profile-mode runner: capture::tokens= segments
Run = Callable[..., tuple[int, str, str]]  # the run_cli fixture
TOL = 0.005  # µs: Kineto timestamps are ns-precise; ours are rounded to whole ns


# -- the independent reference -----------------------------------------------------------------------


def _segments(calls: list[dict], annotations: list[dict]) -> list[tuple[str, float, float, Any]]:
    ours = [(a["name"][len("capture::") :], a) for a in annotations if a["name"].startswith("capture::")]
    foreign = []
    for a in annotations:
        m = re.fullmatch(r"capture_(\d+)(?:_([A-Za-z0-9]+))?", a["name"])
        if m:
            foreign.append((f"tokens={m[1]}" + (f",variant={m[2]}" if m[2] else ""), a))  # vLLM: tokens
    picked = ours or foreign
    if picked:
        return [(label, a["ts"], a["ts"] + a.get("dur", 0), a["pid"]) for label, a in picked]
    ends = [e["ts"] + e.get("dur", 0) for e in calls + annotations]
    return [("all", min(e["ts"] for e in calls + annotations), max(ends), None)]


def _sweep(s0: float, s1: float, sets: dict[str, list[tuple[float, float]]]) -> dict[str, float]:
    """Walk the boundary points; each piece goes to the deepest-precedence phase open over it."""
    points = []
    for phase, ivs in sets.items():
        for a, b in ivs:
            a, b = max(a, s0), min(b, s1)
            if b > a:
                points += [(a, 1, phase), (b, -1, phase)]
    points.sort(key=lambda p: (p[0], p[1]))
    depth = dict.fromkeys(sets, 0)
    out = dict.fromkeys(PHASES, 0.0)
    last = s0
    for t, step, phase in points:
        open_phase = next((p for p in ("capture", "instantiate", "warmup") if depth[p] > 0), "other")
        out[open_phase] += t - last
        depth[phase] += step
        last = t
    out["other"] += s1 - last
    return out


def reference(path: Path) -> dict[str, dict[str, Any]]:
    """label -> {wall, phases, windows} by the issue's definitions, from the raw JSON."""
    events = [e for e in load_trace(path)["traceEvents"] if e.get("ph") == "X" and "ts" in e]
    calls = [e for e in events if e.get("cat") == "cpu_op" or re.search("runtime|driver", e.get("cat", ""))]
    annotations = [e for e in events if e.get("cat") == "user_annotation"]
    out = {}
    for label, s0, s1, pid in _segments(calls, annotations):
        mine = sorted((c for c in calls if pid is None or c["pid"] == pid), key=lambda c: c["ts"])
        begins = [c["ts"] + c["dur"] for c in mine if "StreamBeginCapture" in c["name"]]
        ends = [c["ts"] + c["dur"] for c in mine if "StreamEndCapture" in c["name"]]
        windows = [(b, e) for b, e in zip(begins, ends, strict=False) if e > s0 and b < s1]
        inst = [(c["ts"], c["ts"] + c["dur"]) for c in mine if re.search("GraphInstantiate|GraphUpload", c["name"])]
        first = min([max(b, s0) for b, _ in windows], default=s1)
        ops = [
            (c["ts"], min(c["ts"] + c["dur"], first))
            for c in mine
            if c.get("cat") == "cpu_op" and s0 <= c["ts"] <= s1 and c["ts"] < first
        ]
        phases = _sweep(s0, s1, {"capture": windows, "instantiate": inst, "warmup": ops})
        out[label] = {"wall": s1 - s0, "phases": phases, "windows": len(windows)}
    return out


def assert_matches_reference(got: dict[str, Any], path: Path) -> None:
    want = reference(path)
    assert [s["label"] for s in got["segments"]] == list(want)
    for seg in got["segments"]:
        ref = want[seg["label"]]
        assert seg["wall_us"] == pytest.approx(ref["wall"], abs=TOL)
        assert seg["capture_windows"] == ref["windows"]
        for p in PHASES:
            assert seg["phases"][p] == pytest.approx(ref["phases"][p], abs=4 * TOL), (seg["label"], p)
        assert sum(seg["phases_ns"].values()) == seg["wall_ns"]  # exactly, in integer ns
        assert sum(seg["phases"].values()) == pytest.approx(seg["wall_us"], abs=1e-3)  # µs floats: within 1 ns
        assert sum(seg["shares"].values()) == pytest.approx(1.0, abs=1e-3) or seg["wall_us"] == 0


def time_json(run_cli: Run, *args: Any) -> dict[str, Any]:
    rc, out, err = run_cli("time", *args, "--json")
    assert rc == 0, err
    return json.loads(out)


# -- real traces ------------------------------------------------------------------------------------


def test_vllm_capture_trace_phases_match_its_events(run_cli: Run) -> None:
    doc = time_json(run_cli, VLLM)
    assert "profiling inflates CPU time" in doc["note"]
    (t,) = doc["traces"]
    assert (t["path"], t["runner"], t["tp_rank"]) == (str(VLLM), None, 0)
    (seg,) = t["segments"]
    want = ("tokens=32,variant=FULL", None, "FULL", 1)  # vLLM sizes are token counts
    assert (seg["label"], seg["bs"], seg["variant"], seg["capture_windows"]) == want
    assert_matches_reference(t, VLLM)
    # the boundaries themselves, as the trace states them (capture_32_FULL; hipStreamBeginCapture ends at
    # ...66387.623, hipStreamEndCapture at ...121373.322, hipGraphInstantiateWithFlags lasts 817.066 µs)
    assert seg["wall_us"] == pytest.approx(58406.933, abs=TOL)
    assert seg["phases"]["capture"] == pytest.approx(121373.322 - 66387.623, abs=TOL)
    assert seg["phases"]["instantiate"] == pytest.approx(817.066, abs=TOL)
    top = {(r["phase"], r["op"]): r for r in seg["top"]}
    assert top[("instantiate", "hipGraphInstantiateWithFlags")]["count"] == 1
    assert top[("other", "hipFree")]["count"] == 2  # 808.497 + 7.94 µs, outside every op
    assert top[("other", "hipFree")]["self_us"] == pytest.approx(808.497 + 7.94, abs=TOL)
    assert t["totals"]["phases"] == seg["phases"]


def test_demo_every_batch_size_of_every_runner_is_a_row(
    demo_dir: Path, run_cli: Run
) -> None:
    # every op (--top 100): which ops lead by self time depends on the machine's load
    doc = time_json(run_cli, demo_dir, "--top", "100")
    assert sorted(t["runner"] for t in doc["traces"]) == sorted((*RUNNERS, PREFILL))
    for t in doc["traces"]:
        assert [(s["label"], s["bs"], s["variant"]) for s in t["segments"]] == (
            [("tokens=64", None, None), ("tokens=32", None, None), ("tokens=16", None, None)]  # 16 per batch
            if t["runner"] == PREFILL
            else [("bs=4", 4, None), ("bs=2", 2, None), ("bs=1", 1, None)]  # sglang captures the largest first
        )
        for s in t["segments"]:  # on CPU there is no capture window: the passes are eager
            assert s["capture_windows"] == 0 and s["phases"]["capture"] == s["phases"]["instantiate"] == 0
            assert s["phases"]["warmup"] > 0
            assert {r["phase"] for r in s["top"]} <= {"warmup", "other"}
            assert any(r["op"] == "aten::addmm" for r in s["top"])
        assert_matches_reference(t, Path(t["path"]))
        assert t["totals"]["wall_us"] == pytest.approx(sum(s["wall_us"] for s in t["segments"]), abs=TOL)


def test_directory_of_ranks_uses_the_pool_with_the_same_result(
    demo_dir: Path, tmp_path: Path, run_cli: Run
) -> None:
    for rank in range(3):
        shutil.copy(
            demo_dir / "cuda_graph_capture-DecodeCudaGraphRunner-TP-0.json.gz",
            tmp_path / f"cuda_graph_capture-DecodeCudaGraphRunner-TP-{rank}.json.gz",
        )
    shutil.copy(VLLM, tmp_path / VLLM.name)
    serial = time_json(run_cli, tmp_path, "-j", "1")
    pooled = time_json(run_cli, tmp_path, "-j", "2")
    assert pooled == serial and len(serial["traces"]) == 4


def test_text_output_has_a_bar_per_segment_and_runners_side_by_side(
    demo_dir: Path, run_cli: Run
) -> None:
    rc, out, err = run_cli("time", demo_dir, VLLM)
    assert rc == 0, err
    assert "profiling inflates CPU time" in out
    assert "runners side by side" in out
    for runner in RUNNERS:
        assert f"{runner} TP 0" in out
    bar_rows = [line for line in out.splitlines() if re.match(r"^│ bs=\d", line)]
    assert len(bar_rows) == 3 * 3 + 3  # 9 demo rows; side by side: 3 labels (vLLM's size is tokens=32)
    assert "█" in out and "░" in out  # vLLM's capture window and the demo's eager passes
    side = out.split("runners side by side", 1)[1].splitlines()
    rows = [line for line in side if line.startswith("│")]
    assert len(rows) == 5 + 3  # + tokens=16/32/64
    for row in rows:  # the slowest marked where runners compare (every cell that reads as the largest);
        # a lone value (prefill's tokens=) and a row where all read the same are not
        values = [c.strip() for c in row.strip("│").split("│")[1:]]
        shown = [c.rstrip(" *") for c in values if c != "-"]
        top = max(shown, key=lambda c: float(c.replace(",", "")))
        assert row.count(" *") == (shown.count(top) if len(set(shown)) > 1 else 0), row
        assert all(c.endswith(" *") == (c.rstrip(" *") == top and len(set(shown)) > 1) for c in values if c != "-")


def test_equal_looking_values_mark_no_slowest() -> None:
    """Of three values that read the same, none is starred: a tie has no slowest."""
    from mixins.analysis.commands.time_render import slowest_cells

    ms, us = (1e3, "ms"), (1.0, "µs")  # as a table shows them: 0.44 ms; 440.1 µs
    assert slowest_cells([440.1, 440.3, 439.9], ms) == [False, False, False]
    assert slowest_cells([440.1, 440.3, 439.9], us) == [False, True, False]
    assert slowest_cells([440.1, None, 97.0], ms) == [True, False, False]
    assert slowest_cells([12.0, None, None], us) == [False, False, False]
    assert slowest_cells([5.0, 9.0, 9.001], us) == [False, True, True]  # equal as shown: both are the slowest
    # two that read 88.26 and 88.31 ms agree to three digits: the one that reads larger is the slowest
    assert slowest_cells([88_260.0, 88_310.0, 1_000.0], ms) == [False, True, False]


# -- hand-written CUDA capture traces (named fakes: no GPU here) ---------------------------------------


FAKE_TWO_WINDOWS = [
    span("capture::bs=8,variant=decode", 0, 1000),
    op("warm_forward", 10, 100),  # warm-up pass: 10..110, with a child op and a launch
    op("aten::mm", 20, 20),
    call("cudaLaunchKernel", 50, 5),
    call("cudaDeviceSynchronize", 120, 30),  # other
    call("cudaStreamBeginCapture", 200, 5),  # window 1: 205..410
    op("captured_forward", 210, 190),
    call("cudaStreamEndCapture", 400, 10),
    call("cudaGraphInstantiateWithFlags", 420, 100),  # instantiate 420..540
    call("cudaGraphUpload", 520, 20),
    call("cudaStreamBeginCapture", 600, 2),  # window 2: 602..703
    op("captured_forward", 605, 95),
    call("cudaStreamEndCapture", 700, 3),
    event("cuda_driver", "cuGraphInstantiate", 710, 50),
    op("aten::copy_", 800, 50),  # after the windows: other
    span("capture::bs=4", 2000, 500),
    op("warm_forward", 2010, 90),
    call("cudaStreamBeginCapture", 2390, 11),  # window runs past the segment's end
    call("cudaStreamEndCapture", 2600, 5),
    {"ph": "X", "cat": "kernel", "name": "gemm", "ts": 30, "dur": 500, "pid": 0, "tid": 7},  # device: ignored
]


def _want(*rows: tuple[Any, ...]) -> list[tuple[Any, ...]]:
    """(label, bs, variant, capture windows, wall µs, phases µs in ``PHASES`` order) per segment."""
    return [(*row[:5], dict(zip(PHASES, row[5:], strict=True))) for row in rows]


# file name, events, whether the reference holds the phases too, (runner, tp_rank, segment source), segments
FAKES = {
    "several-windows-instantiate-and-upload": (
        "fake_cuda_capture.json.gz", FAKE_TWO_WINDOWS, True, (None, None, "capture::"),
        _want(("bs=8,variant=decode", 8, "decode", 2, 1000.0, 100.0, 306.0, 170.0, 424.0),
                  ("bs=4", 4, None, 1, 500.0, 90.0, 99.0, 0.0, 311.0))),
    "vllm-names-on-hip": ("piecewise.json.gz", [
        span("capture_16_PIECEWISE", 0, 300),
        op("aten::fill_", 5, 10),
        call("hipStreamBeginCapture", 20, 1),
        call("hipStreamEndCapture", 60, 1),
        call("hipGraphInstantiate", 62, 8),
        op("vllm::unified_attention", 75, 20),  # eager between the pieces: other
        call("hipStreamBeginCapture", 100, 1),
        call("hipStreamEndCapture", 150, 1),
        call("hipGraphInstantiate", 152, 8),
    ], True, (None, None, "foreign"),
        _want(("tokens=16,variant=PIECEWISE", None, "PIECEWISE", 2, 300.0, 10.0, 90.0, 16.0, 184.0))),
    "no-segment": ("plain.json.gz", [e for e in FAKE_TWO_WINDOWS if e["cat"] != "user_annotation"], True,
                   (None, None, "all"), _want(("all", None, None, 3, 2595.0, 100.0, 510.0, 170.0, 1815.0))),
    "nested-windows-and-an-end-on-another-thread": ("nested.json.gz", [
        span("capture::bs=2,stream=1", 0, 400),
        call("cudaStreamBeginCapture", 10, 1),  # outer: 11..201
        call("cudaStreamBeginCapture", 50, 2),  # inner, another stream: 52..103
        call("cudaStreamEndCapture", 100, 3),
        call("cudaStreamEndCapture", 200, 1),
        call("cudaStreamBeginCapture", 250, 1),  # closed from thread 2: 251..305
        call("cudaStreamEndCapture", 300, 5, tid=2),
        call("cudaGraphInstantiate", 310, 20, tid=2),
    ], True, (None, None, "capture::"), _want(("bs=2,stream=1", 2, None, 3, 400.0, 0.0, 244.0, 20.0, 136.0))),
    # An aborted capture (a begin, no end) in bs=8 ran on through every later segment of the process: bs=16
    # read all capture. It ends with bs=8 now, as the design says.
    "a-window-never-closed-ends-with-its-own-segment": ("aborted.json.gz", [
        span("capture::bs=8", 0, 1000),
        op("A", 10, 100),
        call("cudaStreamBeginCapture", 200, 10),  # never closed: capture 210..1000
        span("capture::bs=16", 2000, 1000),
        op("A", 2010, 100),
        call("cudaStreamBeginCapture", 2200, 10),  # 2210..2520
        call("cudaStreamEndCapture", 2500, 20),
    ], False, (None, None, "capture::"), _want(("bs=8", 8, None, 1, 1000.0, 100.0, 790.0, 0.0, 110.0),
                                                   ("bs=16", 16, None, 1, 1000.0, 100.0, 310.0, 0.0, 590.0))),
    # Two threads of one process capture at once (bs=8 on thread 1 from 0, bs=16 on thread 2 from 600): op B
    # (thread 2, 610..910) lay in both segments' time and was counted in both, with thread 1's window booked
    # as bs=16's capture too. Each call is now in one segment, where summary puts it, and each window in its
    # begin's (test_overlapping_segments_of_one_process_count_each_call_once: the ops, as summary counts them).
    "overlapping-segments-of-one-process": ("two_threads.json.gz", [
        span("capture::bs=8", 0, 1000),
        op("A", 10, 400),
        call("cudaStreamBeginCapture", 500, 10),  # 510..910
        call("cudaStreamEndCapture", 900, 10),
        span("capture::bs=16", 600, 1000, tid=2),
        op("B", 610, 300, tid=2),
        call("cudaStreamBeginCapture", 1000, 10, tid=2),  # 1010..1510
        call("cudaStreamEndCapture", 1500, 10, tid=2),
    ], False, (None, None, "capture::"), _want(("bs=8", 8, None, 1, 1000.0, 400.0, 400.0, 0.0, 200.0),
                                                   ("bs=16", 16, None, 1, 1000.0, 300.0, 500.0, 0.0, 200.0))),
    # upstream's per-batch-size file: one segment, the CPU span 10..850
    "upstream-per-batch-size-file": ("DecodeCudaGraphRunner_bs_8_rank1.json.gz", FAKE_TWO_WINDOWS[1:15], False,
                                     ("DecodeCudaGraphRunner", 1, "filename"),
                                     _want(("bs=8", 8, None, 2, 840.0, 100.0, 306.0, 170.0, 264.0))),
}


@pytest.mark.parametrize("case", FAKES)
def test_phases_of_hand_written_capture_traces(tmp_path: Path, run_cli: Run, case: str) -> None:
    name, events, by_reference, who, want = FAKES[case]
    path = write_trace(tmp_path / name, events)
    (t,) = time_json(run_cli, path)["traces"]
    if by_reference:
        assert_matches_reference(t, path)
    assert (t["runner"], t["tp_rank"], t["segment_source"]) == who
    got = [(s["label"], s["bs"], s["variant"], s["capture_windows"], s["wall_us"], s["phases"]) for s in t["segments"]]
    assert got == want


def test_top_ops_shares_and_totals_of_several_windows(tmp_path: Path, run_cli: Run) -> None:
    (t,) = time_json(run_cli, write_trace(tmp_path / "fake_cuda_capture.json.gz", FAKE_TWO_WINDOWS))["traces"]
    bs8 = t["segments"][0]
    assert bs8["shares"] == {"warmup": 0.1, "capture": 0.306, "instantiate": 0.17, "other": 0.424}
    top = {(r["phase"], r["op"]): (r["self_us"], r["count"]) for r in bs8["top"]}
    assert top[("warmup", "warm_forward")] == (75.0, 1)  # 100 minus its child (20) and its launch (5)
    assert top[("capture", "captured_forward")] == (285.0, 2)
    assert top[("instantiate", "cudaGraphInstantiateWithFlags")] == (100.0, 1)
    assert top[("instantiate", "cuGraphInstantiate")] == (50.0, 1)
    assert top[("other", "cudaDeviceSynchronize")] == (30.0, 1)
    assert top[("other", "aten::copy_")] == (50.0, 1)
    assert t["totals"]["phases"]["capture"] == 405.0
    (t,) = time_json(run_cli, tmp_path / "fake_cuda_capture.json.gz", "--top", "0")["traces"]  # no ops, same phases
    assert all(s["top"] == [] for s in t["segments"]) and t["totals"]["top"] == []
    assert t["segments"][0]["phases"] == bs8["phases"]


def test_overlapping_segments_of_one_process_count_each_call_once(tmp_path: Path, run_cli: Run) -> None:
    name, events, *_ = FAKES["overlapping-segments-of-one-process"]
    path = write_trace(tmp_path / name, events)
    (t,) = time_json(run_cli, path)["traces"]
    top = {(r["phase"], r["op"]): (r["self_us"], r["count"]) for r in t["totals"]["top"]}
    assert top[("warmup", "B")] == (300.0, 1) and top[("warmup", "A")] == (400.0, 1)
    summary = json.loads(run_cli("summary", "--json", path)[1])["traces"][0]["segments"]
    assert [[op["op"] for op in s["top"] if op["op"] in "AB"] for s in summary] == [["A"], ["B"]]


# -- bad input ---------------------------------------------------------------------------------------


def test_phases_sum_to_the_wall_time_whatever_the_split() -> None:
    """Integer ns add up exactly; the µs floats within a nanosecond even where no float makes the sum exact
    (found by a run of the demo: 251,420 ns split 8,018 / 5,851 / 6,670 / rest)."""
    import random

    from mixins.analysis.commands.time import phases_json

    rng = random.Random(0)
    walls = [rng.randrange(1, 10**9) for _ in range(20_000)]
    splits = [(251_420, (8_018, 5_851, 6_670))] + [
        (w, tuple(rng.randrange(0, w // 3 + 1) for _ in range(3))) for w in walls
    ]
    for wall_ns, (warmup, capture, instantiate) in splits:
        phases_ns = {"warmup": warmup, "capture": capture, "instantiate": instantiate}
        phases_ns["other"] = wall_ns - warmup - capture - instantiate
        got = phases_json(phases_ns, wall_ns)
        wall, phases = got["wall_us"], got["phases"]
        assert wall == wall_ns / 1000 and phases["other"] >= 0
        assert abs(sum(phases.values()) - wall) < 1e-3, (wall_ns, phases_ns)


def test_bad_input_is_one_line_and_exit_2_while_good_files_are_still_timed(
    tmp_path: Path, run_cli: Run, capsys: pytest.CaptureFixture[str]
) -> None:
    good = write_trace(tmp_path / "a.json.gz", FAKE_TWO_WINDOWS)
    truncated = tmp_path / "b.json.gz"
    truncated.write_bytes(good.read_bytes()[:-20])
    rc, out, err = run_cli("time", tmp_path, "--json")
    assert rc == 2
    assert len(err.splitlines()) == 1 and err.startswith(f"capture-trace: error: {truncated}: ")
    assert "truncated gzip" in err
    assert [t["path"] for t in json.loads(out)["traces"]] == [str(good)]

    rc, out, err = run_cli("time", tmp_path / "missing")
    assert (rc, out) == (2, "")
    assert err == f"capture-trace: error: {tmp_path / 'missing'}: no such file\n"

    empty = tmp_path / "empty"
    empty.mkdir()
    rc, _, err = run_cli("time", empty, good)
    assert rc == 2 and err == f"capture-trace: error: {empty}: no traces (*.json.gz or *.json) in this directory\n"

    with pytest.raises(SystemExit) as usage:  # argparse refuses it, as for every command's --top
        run_cli("time", good, "--top", "-1")
    assert usage.value.code == 2
    assert capsys.readouterr().err.endswith("error: argument --top: --top must be an integer >= 0, got '-1'\n")


# near 4e18 ns a double's step is 512 ns: the µs → ns conversion is exact to that step only
_NESTED = {"parent": pytest.approx(6.0, abs=0.5), "child": pytest.approx(4.0, abs=0.5)}
_ENDS_OF_TIME = [pytest.param([op("child", start, 4.0), op("parent", start, 10.0)], _NESTED, id=str(start))
                 for start in (-4e15, 0.0, 4e15 - 10.0)]  # the ends of the times a trace may hold (µs); the child first


@pytest.mark.parametrize(("events", "want"), [
    *_ENDS_OF_TIME, pytest.param([op("short", 0.0, 1.0), op("long", 1.0, 4e15)], {"short": 1.0, "long": 4e15}),
    pytest.param([op("A", 0.0, 10.0), op("B", 5.0, 15.0)], {"A": 5.0, "B": 15.0}, id="past-its-parent"),
])
def test_self_time_where_calls_nest_at_the_edges(
    tmp_path: Path, run_cli: Run, events: list[Any], want: dict[str, Any]
) -> None:
    """Calls are walked by start, the longer first on a tie: a parent and the child starting with it, at
    the largest and smallest times the reader accepts (integer ns near ±2**62), still nest, so the parent's
    self time is its duration less the child's. A call ending at 1 µs and one starting there and running
    for 4e15 µs (the longest duration the reader accepts): neither is the other's child, each keeps its
    whole duration. A sort key that overflowed (start << 64 less the end) got either wrong. A call running
    on past its parent's end (improper nesting: the stack walk) takes from it only its part inside."""
    (t,) = time_json(run_cli, write_trace(tmp_path / "edge.json.gz", events))["traces"]
    assert {r["op"]: r["self_us"] for r in t["totals"]["top"]} == want


# -- the columns (numpy: depth and parent by ``searchsorted``) and the stack walk, each forced by
# ``build(..., vectorised=…)``, on generated traces read by the real reader: improper nesting, zero-length calls,
# ties on start, capture windows begun on one thread and ended on another, segments of one process that overlap.
# Where calls do not nest the columns hand the segment to the walk; the last test shows the columns really
# answer where they do.


PID = 7
NAMES = ("aten::mm", "aten::add", "aten::relu", "cudaLaunchKernel", "cudaMemcpyAsync")

half_us = st.integers(0, 80).map(lambda k: k * 0.5)  # coarse times: ties on start and end are common
# generated CPU ops and runtime calls (cpu), capture segments and windows
cpu = st.tuples(st.sampled_from(NAMES), st.integers(1, 3), half_us, st.sampled_from([0.0, 0.5, 1.0, 3.0, 10.0, 40.0]))
a_segment = st.tuples(st.integers(1, 64), half_us, st.integers(0, 60).map(lambda k: k * 0.5), st.sampled_from([PID, 8]))
a_window = st.tuples(st.integers(1, 3), st.integers(1, 3), half_us, st.integers(0, 40).map(lambda k: k * 0.5))


def _trace(calls: list[Any], segments: list[Any], windows: list[Any], instantiate: float | None) -> list[Event]:
    events = [event("cuda_runtime" if name.startswith("cuda") else "cpu_op", name, ts, dur, pid=PID, tid=tid)
              for name, tid, ts, dur in calls]
    events += [span(f"capture::bs={bs}", ts, dur, pid=pid) for bs, ts, dur, pid in segments]
    for begin_tid, end_tid, ts, length in windows:  # begun on one thread, maybe ended on another
        events.append(event("cuda_runtime", "cudaStreamBeginCapture", ts, 0.5, pid=PID, tid=begin_tid))
        events.append(event("cuda_runtime", "cudaStreamEndCapture", ts + length, 0.5, pid=PID, tid=end_tid))
    if instantiate is not None:
        events.append(event("cuda_runtime", "cudaGraphInstantiate", instantiate, 2.0, pid=PID))
    return events


def _both(events: list[Event]) -> tuple[Any, Any]:
    with tempfile.TemporaryDirectory() as tmp:
        path = write_trace(Path(tmp) / "cuda_graph_capture-DecodeCudaGraphRunner-TP-0.json", events)
        tl = load_timeline(str(path), fields=BareEvent)
    identity = identify(tl)
    columns = to_json(time_command.build("t", identity, tl, 50, vectorised=True))
    walk = to_json(time_command.build("t", identity, tl, 50, vectorised=False))
    return columns, walk


@given(
    st.lists(cpu, max_size=40),
    st.lists(a_segment, max_size=3),
    st.lists(a_window, max_size=3),
    st.one_of(st.none(), half_us),
    st.integers(1, 5),
)
def test_columns_and_walk_agree_and_chunks_change_nothing(
    calls: list[Any], segments: list[Any], windows: list[Any], inst: float | None, chunk: int
) -> None:
    """The two paths agree; cut in chunks of a few (``_CHUNK``: what is held stays small), every carry from one
    chunk to the next is exercised, and the answer is the same."""
    doc = _trace(calls, segments, windows, inst)
    whole, default = _both(doc), time_command._CHUNK
    assert whole[0] == whole[1]
    time_command._CHUNK = chunk
    try:
        assert _both(doc) == whole
    finally:
        time_command._CHUNK = default


@given(st.lists(st.tuples(st.sampled_from(NAMES), st.integers(1, 3), st.integers(0, 6)), min_size=1, max_size=30))
def test_properly_nested_calls_are_answered_by_the_columns(shape: list[Any]) -> None:
    """Each generated call is nested in the one before it on its thread or follows it (zero-length and
    tied starts included): the columns answer (never handing over to the walk) and agree with it."""
    calls, free = [], {1: 0.0, 2: 0.0, 3: 0.0}
    open_: dict[int, list[tuple[float, float]]] = {1: [], 2: [], 3: []}
    for name, tid, width in shape:
        stack = open_[tid]
        if stack and width * 0.5 <= stack[-1][1] - stack[-1][0]:  # fits in the innermost open call: nest at its start
            ts = stack[-1][0]
        else:
            stack.clear()
            ts = free[tid]
        dur = min(width * 0.5, stack[-1][1] - ts) if stack else width * 0.5
        calls.append((name, tid, ts, dur))
        stack.append((ts, ts + dur))
        free[tid] = max(free[tid], ts + dur)
    answered = []
    original = time_command._parents

    def spy(*args: Any) -> Any:
        got = original(*args)
        answered.append(got is not None)
        return got

    setattr(time_command, "_parents", spy)  # noqa: B010 - a spy in place of the module's function
    try:
        columns, walk = _both(_trace(calls, [(1, 0.0, 200.0, PID)], [], None))
    finally:
        setattr(time_command, "_parents", original)  # noqa: B010
    assert columns == walk
    assert answered and all(answered)
