"""Hand-built traces at the edges that were once mishandled: events without a timestamp (kept, with NaN,
for the record's counts), segment labels that collide with their own suffixes, numbers cut at a buffer's
end, cooperative launches. Each test fails on the code before its fix."""

from __future__ import annotations

import json
import shutil
from collections.abc import Callable
from pathlib import Path

import pytest

from mixins.analysis.model.events import C_LAUNCH, call_kind
from mixins.analysis.model.records import load_record
from mixins.analysis.read.reader import Buffering, open_trace
from tests.trace_files import call, kernel, op, span, write_trace

Run = Callable[..., tuple[int, str, str]]


def _mm(ts: float, ext: int) -> dict:
    return op("aten::mm", ts, 10, **{"External id": ext, "Input Dims": [[2, 2]], "Input type": ["float"]})


def _capture(untimed_op: bool) -> list[dict]:
    """A warm-up ``mm`` that ran its kernel, then a capture of the same ``mm`` whose launch names no kernel
    (the namer names it by the warm-up pass); optionally one op without a timestamp in between."""
    return [
        span("capture::bs=1", 0, 1000),
        _mm(10, 1),
        call("cudaLaunchKernel", 12, 2, correlation=100, **{"External id": 1}),
        kernel("gemm_kernel", 50, 5, correlation=100, **{"External id": 1}),
        *([op("aten::zeros", None, **{"External id": 9})] if untimed_op else []),
        call("cudaStreamBeginCapture", 100, 1),
        _mm(110, 2),
        call("cudaLaunchKernel", 112, 2, correlation=101, **{"External id": 2}),
        call("cudaStreamEndCapture", 200, 1),
    ]


# one capture segment around every timed op here: diff reads captures
CAPTURED = span("capture::bs=1", 0, 100)


def test_an_untimed_op_does_not_unname_captured_launches(tmp_path: Path, run_cli: Run) -> None:
    """A NaN start in the namer's interval sweep stopped it: the captured launch lost its warm-up name."""
    totals = []
    for untimed in (False, True):
        rc, out, err = run_cli("summary", "--json", write_trace(tmp_path / f"c{untimed}.json", _capture(untimed)))
        assert rc == 0, err
        totals.append(json.loads(out)["traces"][0]["totals"])
    assert [t["attributed_launches"] for t in totals] == [1, 1]
    assert [t["unknown_launches"] for t in totals] == [0, 0]


def test_an_untimed_segment_marker_bounds_nothing(tmp_path: Path, run_cli: Run) -> None:
    """A ``capture::`` range without a time made a NaN segment that broke the segments' order: ops moved."""
    events = []
    for n, bs in enumerate((1, 2, 8)):
        events += [span(f"capture::bs={bs}", n * 100, 50), op(f"op_in_bs={bs}", n * 100 + 5, 5)]
    tops = []
    for extra in ([], [span("capture::bs=4", None, None)]):
        rc, out, err = run_cli("summary", "--json", write_trace(tmp_path / f"s{len(extra)}.json", events + extra))
        assert rc == 0, err
        segments = json.loads(out)["traces"][0]["segments"]
        tops.append({s["label"]: [t["op"] for t in s["top"]] for s in segments if s["label"] != "(outside)"})
    assert tops[0] == tops[1] == {f"bs={bs}": [f"op_in_bs={bs}"] for bs in (1, 2, 8)}


@pytest.mark.parametrize(
    ("events", "order"),
    [
        # ops by time, those without one last
        ([op("aten::x", 5, 1), op("aten::u", None, None), op("aten::y", 3, 1)], ["aten::y", "aten::x", "aten::u"]),
        # a parent and its first child start at one timestamp: the longer first, as ``time`` orders calls
        ([op("aten::linear", 10, 9), op("aten::t", 10, 2)], ["aten::linear", "aten::t"]),
    ],
    ids=["untimed_last", "longer_first"],
)
def test_ops_are_in_one_order_whatever_the_file_order(
    tmp_path: Path, run_cli: Run, events: list[dict], order: list[str]
) -> None:
    """The same events in two file orders are the same trace (file order decided ties: "changed")."""
    a = write_trace(tmp_path / "a.json", [CAPTURED, *events])
    b = write_trace(tmp_path / "b.json", [*events[::-1], CAPTURED])
    for path in (a, b):
        assert [op.sig.name for s in load_record(str(path)).segments for op in s.ops] == order
    assert run_cli("diff", a, b)[0] == 0


def test_duplicate_labels_never_take_a_label_the_trace_has(tmp_path: Path, run_cli: Run) -> None:
    events = []
    for n, name in enumerate(["capture::bs=8", "capture::bs=8", "capture::bs=8#2"]):
        events += [span(name, n * 100, 50), op(f"op{n}", n * 100 + 10, 5)]
    trace = write_trace(tmp_path / "labels.json", events)
    rc, out, err = run_cli("summary", "--json", trace)
    assert rc == 0, err
    assert [s["label"] for s in json.loads(out)["traces"][0]["segments"]] == ["bs=8", "bs=8#3", "bs=8#2"]
    shutil.copy(trace, tmp_path / "copy.json")
    assert run_cli("diff", trace, tmp_path / "copy.json")[0] == 0  # a file and its copy do not differ


@pytest.mark.parametrize("slice_bytes", [16, 64, 256])
def test_a_number_element_cut_at_the_buffer_end_is_read(tmp_path: Path, slice_bytes: int) -> None:
    """``12.`` at a buffer's end is the start of ``12.5``, not an element followed by a bad separator."""
    path = tmp_path / "numbers.json"
    path.write_text('{"traceEvents": [' + ", ".join(["12.5e-1"] * 200) + "]}")
    for block in range(1, 120):
        stream = open_trace(str(path), buffering=Buffering(block=block, slice=slice_bytes, min_slice=slice_bytes))
        for _ in stream.events():  # elements that are not objects are counted, never kept
            pass
        assert stream.elements == 200, block


def test_a_top_level_number_cut_at_the_window_end_is_read(tmp_path: Path, run_cli: Run) -> None:
    """A top-level value is parsed from a 512-byte window first: a number cut there after ``e`` waits for more."""
    number = "1" + "0" * 510 + "e-500"  # the window ends right after the "e"
    path = tmp_path / "top.json"
    path.write_text('{"padding": ' + number + ', "traceEvents": [' + json.dumps(op("aten::mm", 1, 1)) + "]}")
    rc, out, err = run_cli("summary", "--json", path)
    assert rc == 0, err
    assert json.loads(out)["traces"][0]["totals"]["cpu_ops"] == 1


@pytest.mark.parametrize("name", ["cudaLaunchCooperativeKernel", "cudaLaunchCooperativeKernelMultiDevice",
                                  "cuLaunchCooperativeKernel", "hipLaunchCooperativeKernel"])
def test_cooperative_launches_are_launches(name: str) -> None:
    assert call_kind(name) == C_LAUNCH


def test_an_unread_number_out_of_range_does_not_depend_on_its_neighbours(tmp_path: Path, run_cli: Run) -> None:
    """``1e999`` in a field nobody reads is never looked at: alone in its slice, or beside an event of an
    unexpected type (which sent the whole slice through the untyped decoder, and refused the trace)."""
    odd = {"ph": "X", "cat": "cpu_op", "name": "odd", "ts": "x", "pid": 1, "tid": 1}
    for n, neighbours in enumerate(([], [odd])):
        path = tmp_path / f"t{n}.json"
        events = [json.dumps(op("aten::mm", 1, 1))[:-1] + ', "zz": 1e999}', *map(json.dumps, neighbours)]
        path.write_text('{"traceEvents": [' + ", ".join(events) + "]}")
        rc, out, err = run_cli("summary", "--json", path)
        assert (rc, err) == (0, "")
        assert json.loads(out)["traces"][0]["events"] == 1 + len(neighbours)


def test_device_work_without_a_correlation_is_unattributed_eager_work(tmp_path: Path, run_cli: Run) -> None:
    """A replayed kernel with no correlation has no launching call: ``attribute`` says so in an unattributed
    row (device work grouped by correlation keeps the ``-1`` group; dropping it lost the kernel silently)."""
    capture = write_trace(tmp_path / "cuda_graph_capture-DecodeCudaGraphRunner-TP-0.json.gz", _capture(False))
    replay = write_trace(tmp_path / "replay-TP-0.json.gz", [
        call("cudaGraphLaunch", 2000, 5, correlation=300), kernel("gemm_kernel", 2010, 3, correlation=300),
        kernel("lone_kernel", 2020, 7),
    ])
    rc, out, err = run_cli("attribute", "--json", replay, capture)
    assert rc == 0, err
    doc = json.loads(out)
    assert doc["coverage"] == {"gpu_time_us": 10.0, "attributed_us": 3.0, "graph_kernels": 1,
                               "graph_kernels_attributed": 1}
    assert [(u["source"], u["reason"], u["kernels"], u["gpu_time_us"]) for u in doc["unattributed"]] == [
        ("eager", "no launching runtime call", 1, 7.0)
    ]
