"""One reading of a trace: ``time`` and ``attribute`` see the same capture windows, ``summary`` and
``attribute`` name the same captured launches, and ``time``'s phases never contradict their ops.

The trace is hand-built (a named fake of an NVIDIA capture: no GPU here) with what tells definitions
apart: two captures nested on one thread (the inner one ends first), a capture begun on one thread and
ended on another, and an op that starts in the warm-up pass and runs on through the first capture.
"""

from __future__ import annotations

import argparse
import gc
import json
from collections import Counter
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest

from mixins.analysis.model import windows
from mixins.analysis.model.windows import load_capture
from tests.trace_files import call, kernel, op, span, write_trace

Run = Callable[..., tuple[int, str, str]]


def _op(name: str, ts: float, dur: float, ext: int, tid: int = 1) -> dict[str, Any]:
    return op(name, ts, dur, tid=tid, **{"External id": ext, "Input Dims": [[4, 4]], "Input type": ["float"]})


def _launch(ts: float, corr: int, ext: int, tid: int = 1) -> dict[str, Any]:
    return call("cudaLaunchKernel", ts, 2, tid=tid, correlation=corr, **{"External id": ext})


def _kernel(name: str, ts: float, corr: int, ext: int) -> dict[str, Any]:
    return kernel(name, ts, 3, tid=99, correlation=corr, **{"External id": ext})


EVENTS = [
    span("capture::bs=1", 0, 1000),
    # warm-up pass: the kernels really ran (their names are known)
    _op("aten::mm", 10, 10, 1), _launch(12, 1, 1), _kernel("gemm_kernel", 13, 1, 1),
    _op("aten::relu", 22, 10, 2), _launch(24, 2, 2), _kernel("relu_kernel", 25, 2, 2),
    _op("aten::add", 34, 10, 3), _launch(36, 3, 3), _kernel("add_kernel", 37, 3, 3),
    # an op from the warm-up pass on through the first capture window (80 .. 300)
    _op("aten::long_op", 80, 220, 4),
    # outer window on thread 1: mm, [inner window: relu], add
    call("cudaStreamBeginCapture", 100, 5, correlation=10),
    _op("aten::mm", 110, 10, 5), _launch(112, 11, 5),
    call("cudaStreamBeginCapture", 140, 5, correlation=12),
    _op("aten::relu", 150, 10, 6), _launch(152, 13, 6),
    call("cudaStreamEndCapture", 180, 5, correlation=14),
    _op("aten::add", 190, 10, 7), _launch(192, 15, 7),
    call("cudaStreamEndCapture", 220, 5, correlation=16),
    # a window begun on thread 1 and ended on thread 2
    call("cudaStreamBeginCapture", 400, 5, correlation=20),
    _op("aten::mm", 410, 10, 8), _launch(412, 21, 8),
    call("cudaStreamEndCapture", 450, 5, tid=2, correlation=22),
    call("cudaGraphInstantiate", 460, 40, tid=2, correlation=23),
]


def _write(path: Path) -> Path:
    return write_trace(path, EVENTS)


def test_time_and_attribute_read_the_same_windows(tmp_path: Path, run_cli: Run) -> None:
    path = _write(tmp_path / "cuda_graph_capture-DecodeCudaGraphRunner-TP-0.json.gz")
    rc, out, err = run_cli("time", "--json", path)
    assert rc == 0, err
    (seg,) = json.loads(out)["traces"][0]["segments"]
    windows = load_capture(str(path)).windows
    assert seg["capture_windows"] == len(windows) == 3
    # each launch belongs to the innermost window open on its thread; the cross-thread one has its own
    sites = [[n.site.name for n in w.nodes] for w in windows]
    assert sites == [["aten::mm", "aten::add"], ["aten::relu"], ["aten::mm"]]
    # time's capture phase is exactly the windows' union: 105..225 and 405..455 (Begin end .. End end)
    assert seg["phases"]["capture"] == 120.0 + 50.0


def test_warm_up_names_agree_between_summary_and_attribute(tmp_path: Path, run_cli: Run) -> None:
    path = _write(tmp_path / "cuda_graph_capture-DecodeCudaGraphRunner-TP-0.json.gz")
    by_attribute = Counter(
        (n.site.name, n.kernel.name) for w in load_capture(str(path)).windows for n in w.nodes if n.kernel is not None
    )
    want = {("aten::mm", "gemm_kernel"): 2, ("aten::add", "add_kernel"): 1, ("aten::relu", "relu_kernel"): 1}
    assert by_attribute == want
    rc, out, err = run_cli("summary", "--json", "--top", "10", path)
    assert rc == 0, err
    (seg,) = json.loads(out)["traces"][0]["segments"]
    by_summary = Counter(
        {(row["op"], k["name"]): k["count"] for row in seg["top"] for k in row["kernels"] if k.get("attributed")}
    )
    assert by_summary == by_attribute  # one namer: the same launches, the same names
    # the nested window is named by the pass before the outer one (still open at its begin), and the
    # cross-thread one, with no eager pass since the last window, by the segment's pass: all four named
    assert (seg["unnamed_launches"], seg["attributed_launches"], seg["unknown_launches"]) == (4, 4, 0)


def test_an_op_across_phases_gives_each_phase_only_its_part(tmp_path: Path, run_cli: Run) -> None:
    path = _write(tmp_path / "cuda_graph_capture-DecodeCudaGraphRunner-TP-0.json.gz")
    rc, out, err = run_cli("time", "--json", "--top", "100", path)
    assert rc == 0, err
    (seg,) = json.loads(out)["traces"][0]["segments"]
    top: dict[str, dict[str, float]] = {}
    for row in seg["top"]:
        top.setdefault(row["phase"], {})[row["op"]] = row["self_us"]
    for phase, ops in top.items():  # a phase's ops never add up to more than the phase
        assert sum(ops.values()) <= seg["phases"][phase] + 1e-6, (phase, ops, seg["phases"])
    # aten::long_op (80 .. 300) less its children: warm-up 80..100, capture from 105 (Begin's end) on
    long_op = {phase: ops["aten::long_op"] for phase, ops in top.items() if "aten::long_op" in ops}
    # warm-up 80..105 less the Begin call in it; capture 105..225 less mm, Begin, relu, End, add, End;
    # other 225..300 (the op ran on after the window): 20 + 75 + 75 = its 220 µs less 50 µs of children
    assert long_op == {"warmup": 20.0, "capture": 75.0, "other": 75.0}


ANALYSIS = Path(__file__).resolve().parents[2] / "mixins" / "analysis"
# What classifies or defines, and its one home (docstrings and examples excepted: the test reads code).
ONE_HOME = {
    "LaunchKernel": "model/events.py",  # a kernel launch
    "GraphLaunch": "model/events.py",  # a graph launch
    "BeginCapture": "model/events.py",  # capture window marks
    "EndCapture": "model/events.py",
    "GraphInstantiate": "model/events.py",
    "Memcpy": "model/events.py",
    '"cpu_op"': "model/events.py",
    '"python_function"': "model/events.py",
    '"user_annotation"': "model/events.py",
    '"gpu_memcpy"': "model/events.py",
    "SequenceMatcher": "model/record.py",  # the one alignment routine and its limits
    "= matching_runs(": "model/windows.py",  # the one namer of captured launches
    "open_trace(path": "model/timeline.py",  # the one pass that builds the model (annotate copies raw)
    "def capture_windows": "model/timeline.py",  # the one capture-window definition
    "class IdIndex": "model/timeline.py",
    "def compact_json": "read/reader.py",
    "def who": "render.py",
    "def segments_of": "model/segments.py",
    "def assigner(": "model/segments.py",  # the one placement of events in segments
}


def _code_lines(path: Path) -> list[str]:
    """The file's lines outside docstrings and comments (a crude but sufficient reading)."""
    out, in_doc = [], False
    for line in path.read_text().splitlines():
        stripped = line.strip()
        quotes = stripped.count('"""')
        if in_doc:
            in_doc = quotes % 2 == 0
            continue
        if stripped.startswith('"""'):
            in_doc = quotes == 1
            continue
        if not stripped.startswith("#"):
            out.append(line.split("  #")[0])
    return out


def test_one_definition_each() -> None:
    """Each kind predicate, the window definition, the alignment and the shared helpers live in one
    module: a second classification by substring, or a second definition, fails here."""
    homes: dict[str, set[str]] = {needle: set() for needle in ONE_HOME}
    for path in ANALYSIS.rglob("*.py"):
        code = "\n".join(_code_lines(path))
        for needle in ONE_HOME:
            if needle in code:
                homes[needle].add(path.relative_to(ANALYSIS).as_posix())
    assert homes == {needle: {home} for needle, home in ONE_HOME.items()}


# What a damaged trace may hold: an op, a launch and a segment range without a timestamp. The record
# counts them (in "(outside)"); nothing that places events in time can use them.
UNTIMED = [op("aten::untimed", None), call("cudaLaunchKernel", None), span("capture::bs=9", None)]


# A serving trace replaying the outer window's graph (mm's and add's kernels), written beside the captures
# as the demo writes it.
REPLAY = [
    call("cudaGraphLaunch", 2000, 5, correlation=100),
    kernel("gemm_kernel", 2010, 3, correlation=100),
    kernel("add_kernel", 2014, 3, correlation=100),
]


@pytest.mark.parametrize("attributing", [False, True], ids=["time+check", "time+check+attribute"])
def test_report_reads_each_trace_once(
    tmp_path: Path, run_cli: Run, monkeypatch: pytest.MonkeyPatch, attributing: bool
) -> None:
    """``report`` reads each trace once: every capture once for ``time``, ``check`` and (given ``--replay``)
    ``attribute``'s windows (one model, loaded with Kineto's ids), and a replay lying in the captures'
    folder only as the replay. Its sections equal what the three commands print, untimed events and all."""
    folder = tmp_path / "graph_capture_profile"
    folder.mkdir()
    for rank in (0, 1):
        write_trace(folder / f"cuda_graph_capture-DecodeCudaGraphRunner-TP-{rank}.json.gz", EVENTS + UNTIMED)
    replay = write_trace(folder / "replay-TP-0.json.gz", REPLAY) if attributing else None
    rc, out, err = run_cli("summary", "--json", folder / "cuda_graph_capture-DecodeCudaGraphRunner-TP-0.json.gz")
    assert rc == 0, err
    outside = json.loads(out)["traces"][0]["segments"][-1]
    assert (outside["label"], outside["cpu_ops"], outside["launches"]) == ("(outside)", 1, 1)
    expected: dict[str, Any] = {"attribute": None}
    for command in ("time", "check"):
        rc, out, err = run_cli(command, "--json", folder)  # a replay in the folder: skipped
        assert rc == 0, err
        expected[command] = json.loads(out)
    if replay is not None:
        rc, out, err = run_cli("attribute", "--json", "--any-rank", replay, folder)
        assert rc == 0, err
        expected["attribute"] = json.loads(out)
        assert expected["attribute"]["coverage"]["graph_kernels_attributed"] == 2

    from mixins.analysis.commands.report import report_dicts
    from mixins.analysis.read import safe_io

    opened: list[str] = []
    open_input = safe_io.open_input

    def counted(path: str) -> Any:
        opened.append(path)
        return open_input(path)

    monkeypatch.setattr(safe_io, "open_input", counted)
    named: list[str] = []  # the windows are named once per capture: the record's names and attribute's windows
    sites_of = windows.sites_of_calls  # once per naming (``windows._Context``)

    def naming(tl: Any, calls: list[int]) -> Any:
        named.append(tl.path)
        return sites_of(tl, calls)

    monkeypatch.setattr(windows, "sites_of_calls", naming)
    args = argparse.Namespace(traces=[str(folder)], replay=replay and str(replay), jobs=1, any_rank=True)
    got = report_dicts(args)
    assert got is not None
    time_json, check_json, attribute_json = got
    assert (time_json, check_json, attribute_json) == (expected["time"], expected["check"], expected["attribute"])
    assert sorted(opened) == sorted(str(p) for p in folder.iterdir())  # each once
    assert sorted(named) == sorted(str(p) for p in folder.glob("cuda_graph_capture-*"))


def test_a_report_job_frees_its_model_on_return(tmp_path: Path) -> None:
    """The model holds its joins and they hold only its columns: no cycle, so reference counting frees the
    model when ``report``'s job returns, not a later collection (a worker reads trace after trace)."""
    from mixins.analysis.commands.report import capture_job
    from mixins.analysis.model.timeline import Timeline

    path = str(write_trace(tmp_path / "cuda_graph_capture-DecodeCudaGraphRunner-TP-0.json.gz", EVENTS + UNTIMED))
    gc.collect()
    gc.disable()
    try:
        capture_job(path, {path: {}})  # time, check and attribute's windows, as ``report --replay`` asks
        # type(), not isinstance(): isinstance reads __class__, which warns on torch.distributed.reduce_op
        left = [o for o in gc.get_objects() if type(o) is Timeline and o.path == path]
    finally:
        gc.enable()
    assert left == []


def test_a_trace_of_untimed_events_only_is_one_role_for_every_command(tmp_path: Path, run_cli: Run) -> None:
    """Untimed rows are kept apart from the columns placed in time (``Timeline.undated``), yet they are
    the trace's content: ``summary`` counts them and calls it a profile, as ``time`` does."""
    path = write_trace(tmp_path / "t.json", UNTIMED[:2])
    roles = []
    for command in ("summary", "time"):
        rc, out, err = run_cli(command, "--json", path)
        assert rc == 0, err
        roles.append(json.loads(out)["traces"][0]["role"])
    assert roles == ["profile", "profile"]


def test_a_launch_is_named_by_its_external_id_before_time_in_every_command(tmp_path: Path, run_cli: Run) -> None:
    """A launch that lies inside ``aten::inner`` (nested in ``aten::outer`` by time) but carries outer's
    External id was made by outer: the one rule (External id, else innermost by time). ``attribute``
    alone read no External id and named inner; ``summary`` and ``report`` named outer."""
    def forward(t0: float, ext: int, corr: int, ran: bool) -> list[dict[str, Any]]:
        events = [_op("aten::outer", t0, 40, ext), _op("aten::inner", t0 + 10, 20, ext + 1),
                  _launch(t0 + 15, corr, ext)]
        return events + [_kernel("gemm_kernel", t0 + 16, corr, ext)] if ran else events

    capture = [
        span("capture::bs=1", 0, 1000), *forward(10, 1, 1, True),
        call("cudaStreamBeginCapture", 100, 5, correlation=10), *forward(110, 3, 11, False),
        call("cudaStreamEndCapture", 200, 5, correlation=12),
    ]
    folder = tmp_path / "graph_capture_profile"
    folder.mkdir()
    path = write_trace(folder / "cuda_graph_capture-DecodeCudaGraphRunner-TP-0.json.gz", capture)
    replay = write_trace(tmp_path / "replay-TP-0.json.gz", [
        call("cudaGraphLaunch", 2000, 5, correlation=100), kernel("gemm_kernel", 2010, 3, correlation=100),
    ])
    rc, out, err = run_cli("attribute", "--json", replay, path)
    assert rc == 0, err
    by_attribute = json.loads(out)
    assert [o["name"] for o in by_attribute["ops"]] == ["aten::outer"]
    rc, out, err = run_cli("summary", "--json", path)
    assert rc == 0, err
    (seg,) = json.loads(out)["traces"][0]["segments"]
    named = {row["op"] for row in seg["top"] for k in row["kernels"] if k.get("attributed")}
    assert named == {"aten::outer"}

    from mixins.analysis.commands.report import report_dicts

    args = argparse.Namespace(traces=[str(folder)], replay=str(replay), jobs=1, any_rank=True)
    got = report_dicts(args)
    assert got is not None and got[2] == by_attribute  # report's attribution section: the same answer
