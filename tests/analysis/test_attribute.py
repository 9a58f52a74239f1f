"""``capture-trace attribute`` on the real ROCm vLLM pair, on pairs DERIVED from real traces (pairs.py and
tests/data/PROVENANCE.md; each test says so in its name), and on hand-built NVIDIA-style pairs (named fakes: no
GPU here) at the edges that were once mishandled; then what it says beyond the rows: the low-coverage warning
and its cause, progress on a terminal only, "written to" lines and the ``--group-by`` views. The acceptance
test reproduces TraceLens's own ``ops_summary.csv`` for the real pair."""

from __future__ import annotations

import base64
import contextlib
import csv
import gzip
import io
import json
import os
import select
import shutil
import subprocess
import sys
from collections import defaultdict
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import pytest
from inprocess import run_analyzer
from on_a_terminal import run_on_a_terminal
from pairs import (
    DATA,
    H100,
    VLLM_CAPTURE,
    VLLM_DETAILS,
    VLLM_OPS_SUMMARY,
    VLLM_REPLAY,
    extra_launches,
    graph_kernels,
    load,
    nvidia_pair,
    piecewise,
    rotate_names,
    save,
    scaled,
    with_rank,
)

from mixins.analysis.commands.attribute import low_coverage
from mixins.analysis.commands.attribute_match import attribute_replay
from mixins.analysis.model.records import load_record, summarize
from mixins.analysis.model.windows import load_capture
from tests.interop import import_hta
from tests.trace_files import event, write_trace

REPO = Path(__file__).resolve().parents[2]
GOLDEN = DATA / "vllm_decode_full_attribute_main.json"
Run = Callable[..., tuple[int, str, str]]
_CHILD_ENV = {**os.environ, "PYTHONPATH": str(REPO), "TERM": "xterm-256color"}


@pytest.fixture(params=["sequential", "overlapped"])
def reading(request: pytest.FixtureRequest, monkeypatch: pytest.MonkeyPatch) -> str:
    """Both ways ``attribute`` reads one replay: after the captures, or (a big replay) while the captures
    load in worker processes; the threshold is lowered so the real pair takes the overlapped path."""
    from mixins.analysis.commands import attribute as attribute_cmd

    monkeypatch.setattr(attribute_cmd, "OVERLAP_MIN_BYTES", 0 if request.param == "overlapped" else 1 << 62)
    return str(request.param)


#: For tests whose behaviour does not depend on how the replay is read: sequential by default, the
#: overlapped repeat under the ``exhaustive`` marker (``.ci/run`` runs both).
SEQUENTIAL_BY_DEFAULT = pytest.mark.parametrize(
    "reading", ["sequential", pytest.param("overlapped", marks=pytest.mark.exhaustive)], indirect=True
)


def _attribute(run_cli: Any, *argv: Any) -> dict[str, Any]:
    rc, out, err = run_cli("attribute", *argv, "--json")
    assert rc == 0, err
    return json.loads(out)


def _by_name_module(res: dict[str, Any]) -> dict[tuple[str, str], float]:
    tot: dict[tuple[str, str], float] = defaultdict(float)
    for op in res["ops"]:
        tot[(op["name"], op["module"])] += op["gpu_time_us"]
    return dict(tot)


@pytest.fixture(scope="module")
def real() -> dict[str, Any]:
    """The real pair's docs, loaded once for the derived variants."""
    return {"capture": load(VLLM_CAPTURE), "replay": load(VLLM_REPLAY)}


@pytest.fixture(scope="module")
def full() -> dict[str, Any]:
    """``attribute --json`` on the real pair, run once for every test that compares with it."""
    rc, out, err = run_analyzer("attribute", VLLM_REPLAY, VLLM_CAPTURE, "--json")
    assert rc == 0, err
    result: dict[str, Any] = json.loads(out)
    return result


def test_real_vllm_pair_reproduces_tracelens_ops_summary(full: dict[str, Any]) -> None:
    res = full
    cov = res["coverage"]
    assert (cov["graph_kernels"], cov["graph_kernels_attributed"]) == (421, 421)
    assert res["unattributed"] == []
    assert all(op["verified"] for op in res["ops"])
    ours = _by_name_module(res)
    with open(VLLM_OPS_SUMMARY, newline="") as f:
        ref = {(r["name"], r["parent_module"]): float(r["total_direct_kernel_time_sum"]) for r in csv.DictReader(f)}
    total = sum(ref.values())
    checked = 0
    for key, us in ref.items():
        if us > 0.005 * total:
            assert ours.get(key, 0.0) == pytest.approx(us, rel=0.002), key
            checked += 1
    assert checked == 11  # the rows above 0.5 % of the total in TraceLens's table
    assert cov["attributed_us"] == pytest.approx(cov["gpu_time_us"])
    assert cov["gpu_time_us"] == pytest.approx(total, rel=0.002)
    graph = [op for op in res["ops"] if op["source"] == "graph"]
    assert {op["segment"] for op in graph} == {"tokens=32,variant=FULL"}
    moe = next(op for op in graph if op["name"] == "vllm::moe_forward")
    assert (moe["count"], moe["kernels"], moe["input_dims"][0]) == (24, 72, [32, 3072])


@pytest.mark.parametrize(("derive", "nodes"), [
    pytest.param(lambda cap, rep: (extra_launches(cap), rep), [421 + 11], id="capture-with-extra-launches"),
    pytest.param(lambda cap, rep: piecewise(cap, rep, cut=200), [200, 221], id="piecewise-window-by-window"),
])
def test_derived_pairs_verify_and_attribute_as_the_real_one(
    run_cli: Any, real: dict[str, Any], full: dict[str, Any], tmp_path: Path, derive: Any, nodes: list[int]
) -> None:
    cap, rep = derive(real["capture"], real["replay"])
    cap_p, rep_p = save(cap, tmp_path / "capture.json.gz"), save(rep, tmp_path / "replay.json.gz")
    assert [len(w.nodes) for w in load_capture(str(cap_p)).windows] == nodes
    res = _attribute(run_cli, rep_p, cap_p)
    assert res["coverage"]["graph_kernels"] == res["coverage"]["graph_kernels_attributed"] == 421
    assert _by_name_module(res) == pytest.approx(_by_name_module(full))


def test_rank_mismatch_is_a_clean_error(run_cli: Any, real: dict[str, Any], tmp_path: Path, reading: str) -> None:
    other = save(with_rank(real["capture"], 1), tmp_path / "capture_other.json.gz")
    rc, out, err = run_cli("attribute", VLLM_REPLAY, other)
    assert rc == 2 and out == ""
    assert err.count("\n") == 1
    assert err.startswith(f"capture-trace: error: {VLLM_REPLAY}: replay is rank 0, captures are rank 1")
    rc, out, _ = run_cli("attribute", VLLM_REPLAY, other, "--any-rank", "--json")
    assert rc == 0 and json.loads(out)["coverage"]["graph_kernels_attributed"] == 421
    rc, _, err = run_cli("attribute", VLLM_REPLAY, VLLM_CAPTURE, other)
    assert rc == 2 and "captures come from different ranks" in err and err.count("\n") == 1


@pytest.mark.parametrize("which", ["replay", "capture"])
@pytest.mark.parametrize(
    "content,expect,reading",
    [
        pytest.param(content, expect, reading, marks=[pytest.mark.exhaustive] if repeat else [])
        for content, expect in [
            (b"\x1f\x8b\x08\x00truncated", "gzip"),
            (gzip.compress(b'{"traceEvents": [{"ph": "X", "name": 1', mtime=0), "invalid JSON"),  # same id per worker
            (None, "no such file"),
        ]
        for reading, repeat in [("sequential", False), ("overlapped", expect != "invalid JSON")]
    ],
    indirect=["reading"],
)
def test_bad_replay_or_capture_exits_2_with_one_line(
    run_cli: Any, tmp_path: Path, which: str, content: bytes | None, expect: str, reading: str
) -> None:
    bad = tmp_path / f"bad_{which}.json.gz"
    if content is not None:
        bad.write_bytes(content)
    argv = (bad, VLLM_CAPTURE) if which == "replay" else (VLLM_REPLAY, bad)
    rc, out, err = run_cli("attribute", *argv)
    assert rc == 2 and out == ""
    assert err.count("\n") == 1 and err.startswith(f"capture-trace: error: {bad}: ")
    assert expect.lower() in err.lower()


def _annotated(run_cli: Any, out_dir: Path) -> Path:
    out_dir.mkdir()
    out = out_dir / "annotated_rank0.json.gz"
    rc, _, err = run_cli("attribute", VLLM_REPLAY, VLLM_CAPTURE, "--annotate", out, "--json")
    assert rc == 0, err
    assert [p.name for p in out_dir.iterdir()] == [out.name]  # no temp file left behind
    return out


def test_annotate_adds_args_only_and_loads_with_json(run_cli: Any, tmp_path: Path) -> None:
    out = _annotated(run_cli, tmp_path / "annotated")
    with gzip.open(out, "rt") as f:
        doc = json.load(f)
    original = load(VLLM_REPLAY)
    added = ("capture_op", "capture_module", "capture_input_dims", "capture_input_types", "capture_segment",
             "capture_runner")
    tagged = [e for e in doc["traceEvents"] if "capture_op" in e.get("args", {})]
    assert len(tagged) == 421
    assert {e["args"]["capture_segment"] for e in tagged} == {"tokens=32,variant=FULL"}
    moe = [e for e in tagged if e["args"]["capture_op"] == "vllm::moe_forward"]
    assert len(moe) == 72 and moe[0]["args"]["capture_module"] == "nn.Module: GraphModule"
    assert moe[0]["args"]["capture_input_dims"][0] == [32, 3072]
    for e in tagged:
        for k in added:
            e["args"].pop(k)
    assert doc == original


def test_annotate_output_loads_in_hta(run_cli: Any, tmp_path: Path) -> None:
    """HolisticTraceAnalysis reads the annotated replay and sees the added args (HTA: the ``interop`` extra)."""
    import_hta("hta")
    from hta.common.trace import Trace
    from hta.configs.default_values import AttributeSpec, ValueType, YamlVersion
    from hta.configs.parser_config import ParserConfig

    out = _annotated(run_cli, tmp_path / "hta")
    cfg = ParserConfig()
    cfg.add_args([AttributeSpec("capture_op", "capture_op", ValueType.String, "", YamlVersion(1, 0, 0))])
    trace = Trace(trace_dir=str(out.parent), parser_config=cfg)
    trace.parse_traces()
    df = trace.get_trace(0)
    ops = df[df["capture_op"] != ""]["capture_op"]
    assert (ops == "vllm::moe_forward").sum() == 72
    assert len(ops) == 421


def _without_capture_range(doc: dict[str, Any]) -> dict[str, Any]:
    events = [e for e in doc["traceEvents"] if not str(e.get("name", "")).startswith("capture_32")]
    return {**doc, "traceEvents": events}


@pytest.mark.parametrize(("layout", "segment"), [("tracelens", "tokens=32,variant=FULL"), ("sglang_per_bs", "bs=32")])
def test_derived_capture_folder_layouts(
    run_cli: Any, real: dict[str, Any], tmp_path: Path, layout: str, segment: str
) -> None:
    """A capture folder as TraceLens reads it (vLLM's file name, batch size and mode from its index), and
    sglang's per-batch-size files (the size in the file name): no capture range in the trace either way."""
    folder = tmp_path / "capture_folder"
    folder.mkdir()
    name = "bs_32_rank0.json.gz"
    if layout == "tracelens":
        shutil.copy(VLLM_DETAILS, folder / "execution_details.json")
        name = json.loads(VLLM_DETAILS.read_text())[0]["file"]
    save(_without_capture_range(real["capture"]), folder / name)
    res = _attribute(run_cli, VLLM_REPLAY, folder)
    assert res["captures"] == [str(folder / name)]
    assert res["coverage"]["graph_kernels_attributed"] == 421
    assert {op["segment"] for op in res["ops"] if op["source"] == "graph"} == {segment}


# -- NVIDIA-style pairs DERIVED from the real H100 trace --------------------------------------------


@pytest.fixture(scope="module")
def h100() -> dict[str, Any]:
    return load(H100)


def _nvidia(h100: dict[str, Any], tmp_path: Path, rep_edit: Callable[[dict[str, Any]], None] | None = None,
            **kw: Any) -> tuple[Any, list[Any], Path, dict[str, Any]]:
    """``attribute`` on the DERIVED pair ``pairs.nvidia_pair(h100, **kw)`` (``rep_edit`` changes its replay
    first): the Attribution, the capture's windows, the replay's path and document."""
    cap, rep = nvidia_pair(h100, **kw)
    if rep_edit is not None:
        rep_edit(rep)
    cap_p, rep_p = save(cap, tmp_path / "nv_capture.json.gz"), save(rep, tmp_path / "nv_replay.json.gz")
    windows = load_capture(str(cap_p)).windows
    return attribute_replay(str(rep_p), windows, [str(cap_p)], annotate=True), windows, rep_p, rep


def _innermost(events: list[dict[str, Any]], t: float, tid: Any) -> dict[str, Any] | None:
    best = None
    for e in events:
        if e["tid"] == tid and e["ts"] <= t <= e["ts"] + e["dur"] and (best is None or e["ts"] >= best["ts"]):
            best = e
    return best


def test_derived_nvidia_pair_named_by_warmup_pass(h100: dict[str, Any], tmp_path: Path) -> None:
    res, (window,), _, rep = _nvidia(h100, tmp_path)
    assert window.naming == "warm-up" and window.unnamed == 0
    n = len(graph_kernels(rep))
    assert n > 1000 and res.graph_kernels == res.graph_kernels_attributed == n
    assert res.attributed_us == pytest.approx(res.gpu_time_us)
    memsets = [r for r in res.rows if r.name.startswith("Memset")]  # graph memset nodes: rows of their own
    assert memsets and {r.source for r in memsets} == {"graph"}
    # Brute force, independent of the sweep: the innermost op/module of each original launch.
    ev = h100["traceEvents"]
    ops = [e for e in ev if e.get("cat") == "cpu_op"]
    mods = [e for e in ev if e.get("cat") == "python_function" and e["name"].startswith("nn.Module: ")]
    assert res.annotations is not None
    launches = {e["args"]["correlation"]: e for e in ev if e.get("cat") in ("cuda_runtime", "cuda_driver")}
    originals = {k["ts"]: k for k in ev if k.get("cat") in ("kernel", "gpu_memset", "gpu_memcpy")}
    checked = 0
    for (_, ts, _name), args in list(res.annotations.items())[::7]:
        launch = launches[originals[ts]["args"]["correlation"]]
        op = _innermost(ops, launch["ts"], launch["tid"])
        mod = _innermost(mods, launch["ts"], launch["tid"])
        assert args["capture_op"] == (op["name"] if op else "(no cpu_op)")
        assert args["capture_module"] == (mod["name"].rsplit("_", 1)[0] if mod else "NA")
        checked += 1
    assert checked > 100


def test_a_nameless_graph_memset_is_named_memset(h100: dict[str, Any], tmp_path: Path) -> None:
    """A replayed graph node without a name is named by its kind: a memset is "memset" (it was named
    "memcpy", the one fallback for every non-kernel node)."""
    def nameless_memsets(rep: dict[str, Any]) -> None:
        for e in rep["traceEvents"]:
            if e.get("cat") == "gpu_memset":
                del e["name"]

    res = _nvidia(h100, tmp_path, nameless_memsets)[0]
    graph = {r.name for r in res.rows if r.source == "graph"}
    assert "memset" in graph and "memcpy" not in graph and not any(n.startswith("Memset") for n in graph)


def test_derived_nvidia_pair_without_warmup_is_not_guessed(h100: dict[str, Any], tmp_path: Path) -> None:
    res, _, rep_p, _ = _nvidia(h100, tmp_path, warmup=False)
    assert res.graph_kernels_attributed == 0 and not [r for r in res.rows if r.source == "graph"]
    (miss,) = res.unattributed
    assert "no kernel name" in miss.reason
    warning = low_coverage(res, None)  # and the warning names the missing pass
    assert warning is not None and warning.startswith(f"{rep_p}: only 0/{res.graph_kernels:,} graph kernels")
    assert warning.endswith(
        "the captured launches have no kernel names: a capture taken without its eager warm-up pass (which names them)?"
    )


def test_derived_nvidia_graph_node_ids_give_the_order(h100: dict[str, Any], tmp_path: Path) -> None:
    """Replay kernels out of start-time order: only CUPTI's graph node ids put them in capture order."""
    res, windows, _, rep = _nvidia(h100, tmp_path, node_ids=True)
    assert res.graph_kernels_attributed == res.graph_kernels > 1000
    for e in rep["traceEvents"]:
        e.get("args", {}).pop("graph node id", None)
    no_ids = attribute_replay(str(save(rep, tmp_path / "nv_replay_no_ids.json.gz")), windows, res.captures)
    assert no_ids.graph_kernels_attributed == 0


def test_derived_identical_windows_need_the_batch_size_hint(
    run_cli: Any, real: dict[str, Any], tmp_path: Path
) -> None:
    """Two segments with the same kernels (``capture::tokens=N``): the replay's ``execute_<tokens>_…``
    annotation picks one, each segment a row of the segment view; without it the graph is ambiguous and
    stays unattributed (never spread over a guess)."""
    cap, rep = scaled(real["capture"], real["replay"], segments=2, launches=2)
    cap_p, rep_p = save(cap, tmp_path / "two_capture.json.gz"), save(rep, tmp_path / "two_replay.json.gz")
    res = _attribute(run_cli, rep_p, cap_p, "--group-by", "segment")
    assert res["coverage"]["graph_kernels_attributed"] == res["coverage"]["graph_kernels"] == 842
    assert {op["segment"] for op in res["ops"] if op["source"] == "graph"} == {"tokens=32", "tokens=64"}
    rows = {(r["source"], r["segment"]): r for r in res["groups"]["rows"]}
    assert set(rows) == {("graph", "tokens=32"), ("graph", "tokens=64"), ("eager", None)}
    assert rows[("graph", "tokens=32")]["kernels"] == rows[("graph", "tokens=64")]["kernels"] == 421
    assert sum(r["gpu_time_us"] for r in rows.values()) == pytest.approx(res["coverage"]["attributed_us"], abs=0.01)
    rc, out, _ = run_cli("attribute", rep_p, cap_p, "--group-by", "segment")
    assert rc == 0 and "runners and segments by GPU time" in out and "tokens=64" in out
    rep["traceEvents"] = [e for e in rep["traceEvents"] if e.get("cat") != "user_annotation"]
    res = _attribute(run_cli, save(rep, tmp_path / "no_hint.json.gz"), cap_p)
    assert res["coverage"]["graph_kernels_attributed"] == 0
    (miss,) = [u for u in res["unattributed"] if u["source"] == "graph"]
    assert miss["launches"] == 2 and miss["reason"].startswith("ambiguous: 2 capture windows verify")


def test_bad_replay_and_bad_capture_report_the_capture_only(run_cli: Any, tmp_path: Path, reading: str) -> None:
    """As when reading in turn: a bad capture stops before any replay is reported (overlapped, the
    replay was read meanwhile, and its error is dropped)."""
    bad_cap, bad_rep = tmp_path / "bad_capture.json.gz", tmp_path / "bad_replay.json.gz"
    bad_cap.write_bytes(b"\x1f\x8b\x08\x00truncated")
    bad_rep.write_bytes(b"{")
    rc, out, err = run_cli("attribute", bad_rep, VLLM_CAPTURE, bad_cap)
    assert (rc, out) == (2, "")
    assert err.count("\n") == 1 and err.startswith(f"capture-trace: error: {bad_cap}: ")


def test_overlapped_reading_gives_the_same_result(
    run_cli: Any, real: dict[str, Any], tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """The replay read while two captures load in workers: byte-identical JSON to ``-j 1``. That it
    overlaps is a handshake, not a timing: each capture worker waits (inherited pipe) until this process
    has begun indexing the replay, which only happens before the captures are done when they overlap."""
    from mixins.analysis.commands import attribute as attribute_cmd

    other = save(rotate_names(real["capture"]), tmp_path / "rotated_capture.json.gz")
    argv = ("attribute", VLLM_REPLAY, VLLM_CAPTURE, other, "--json")
    rc, sequential, err = run_cli(*argv, "-j", "1")  # -j 1: no worker, so nothing to overlap with
    assert rc == 0, err
    started_r, started_w = os.pipe()
    load_capture, index_replay = attribute_cmd.load_capture, attribute_cmd.index_replay

    def capture_after_replay_began(*a: Any) -> Any:  # runs in a (forked) worker
        ready, _, _ = select.select([started_r], [], [], 120)
        assert ready and os.read(started_r, 1) == b"x", "the replay was not being indexed while captures loaded"
        return load_capture(*a)

    def replay_began(*a: Any) -> Any:
        os.write(started_w, b"xx")  # one token per capture worker
        return index_replay(*a)

    monkeypatch.setattr(attribute_cmd, "OVERLAP_MIN_BYTES", 0)
    monkeypatch.setattr(attribute_cmd, "load_capture", capture_after_replay_began)
    monkeypatch.setattr(attribute_cmd, "index_replay", replay_began)
    try:
        rc, out, err = run_cli(*argv, "-j", "3")
    finally:
        os.close(started_r)
        os.close(started_w)
    assert rc == 0, err
    assert out == sequential
    assert json.loads(sequential)["coverage"]["graph_kernels_attributed"] == 421


def test_derived_repeated_launches_add_up_whatever_the_batch(
    run_cli: Any, real: dict[str, Any], full: dict[str, Any], tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """DERIVED: the real graph launch replayed 40 times (same kernels, same durations). Launches of one
    graph are added to the rows in batches; any batch size gives the same JSON, and every row is the
    single launch's row with 40x the count, kernels and time, and the same min and max."""
    from mixins.analysis.commands import attribute_match as attribute

    cap, rep = scaled(real["capture"], real["replay"], segments=1, launches=40)
    cap_p, rep_p = save(cap, tmp_path / "capture.json.gz"), save(rep, tmp_path / "replay_rank0.json.gz")
    outputs = []
    for batch in (7, 40, 1 << 30):
        monkeypatch.setattr(attribute, "_BATCH", batch)
        rc, out, err = run_cli("attribute", rep_p, cap_p, "--json")
        assert rc == 0, err
        outputs.append(out)
    assert outputs[0] == outputs[1] == outputs[2]
    many = json.loads(outputs[0])
    assert many["coverage"]["graph_kernels_attributed"] == 40 * 421
    one = full
    key = lambda op: (op["name"], op["module"], json.dumps(op["input_dims"]), op["source"])  # noqa: E731
    singles = {key(op): op for op in one["ops"] if op["source"] == "graph"}
    graph = [op for op in many["ops"] if op["source"] == "graph"]
    assert len(graph) == len(singles)
    for op in graph:
        single = singles[key(op)]
        assert (op["count"], op["kernels"]) == (40 * single["count"], 40 * single["kernels"])
        assert op["gpu_time_us"] == pytest.approx(40 * single["gpu_time_us"], rel=1e-9)
        assert (op["min_us"], op["max_us"]) == (single["min_us"], single["max_us"])


@SEQUENTIAL_BY_DEFAULT
def test_replay_inside_the_capture_directory_is_not_a_capture(
    run_cli: Any, tmp_path: Path, reading: str
) -> None:
    """The demo writes ``replay-TP-0.json.gz`` beside the captures: ``attribute DIR/replay DIR`` works."""
    folder = tmp_path / "graph_capture_profile"
    folder.mkdir()
    cap, rep = folder / "capture_rank0.json.gz", folder / "replay-TP-0.json.gz"
    shutil.copy(VLLM_CAPTURE, cap)
    shutil.copy(VLLM_REPLAY, rep)
    res = _attribute(run_cli, rep, folder)
    assert res["captures"] == [str(cap)]
    assert res["coverage"]["graph_kernels_attributed"] == 421
    cap.unlink()
    rc, out, err = run_cli("attribute", rep, folder)
    assert (rc, out) == (2, "")
    assert err == f"capture-trace: error: {folder}: no capture traces (*.json.gz or *.json) in this directory\n"


def test_many_replays_in_a_directory_run_in_worker_processes(
    run_cli: Any, real: dict[str, Any], tmp_path: Path
) -> None:
    folder = tmp_path / "replays"
    folder.mkdir()
    shutil.copy(VLLM_REPLAY, folder / "a_rank0.json.gz")
    _, rep = piecewise(real["capture"], real["replay"], cut=200)
    save(rep, folder / "b_rank0.json.gz")
    rc, out, err = run_cli("attribute", folder, VLLM_CAPTURE, "--json", "-j", "2")
    assert rc == 0, err
    got = json.loads(out)["replays"]
    assert [Path(r["replay"]).name for r in got] == ["a_rank0.json.gz", "b_rank0.json.gz"]
    assert got[0]["coverage"]["graph_kernels_attributed"] == 421
    # each piece is found, in order, inside the one full window (captured launches may be skipped)
    assert got[1]["coverage"]["graph_kernels_attributed"] == 421
    rc, _, err = run_cli("attribute", folder, VLLM_CAPTURE, "--annotate", tmp_path / "x.json.gz")  # one replay only
    assert rc == 2 and "--annotate takes one replay trace, got 2" in err


@pytest.mark.parametrize("option", ["--annotate", "--csv"])
def test_unwritable_output_is_one_line_and_leaves_nothing(run_cli: Any, tmp_path: Path, option: str) -> None:
    """ENOTDIR (the parent is a regular file): root cannot write there either."""
    parent = tmp_path / "not_a_dir"
    parent.write_text("x")
    out = parent / "out.json.gz"
    rc, stdout, err = run_cli("attribute", VLLM_REPLAY, VLLM_CAPTURE, option, out)
    assert rc == 2 and stdout == ""
    assert err.count("\n") == 1 and err.startswith(f"capture-trace: error: {out}: cannot write: ")
    assert sorted(p.name for p in tmp_path.iterdir()) == ["not_a_dir"]


def test_output_written_under_rlimit_fsize_is_all_or_nothing(tmp_path: Path) -> None:
    """EFBIG half-way through the write: the target never appears, the temp file is removed."""
    import subprocess

    from analysis_child import child_env, command

    root = Path(__file__).resolve().parents[2]
    out = tmp_path / "annotated.json"
    proc = subprocess.run(
        command("annotate_under_fsize_limit", VLLM_REPLAY, VLLM_CAPTURE, out),
        capture_output=True, text=True, env=child_env(PYTHONPATH=str(root)), timeout=300,
    )
    assert proc.returncode == 2, proc.stderr
    assert proc.stderr.startswith(f"capture-trace: error: {out}: cannot write: File too large")
    assert list(tmp_path.iterdir()) == []


def test_derived_our_layout_two_runners_runner_hint(run_cli: Any, real: dict[str, Any], tmp_path: Path) -> None:
    """Our files (metadata identity, ``capture::bs=…``): two runners captured the same kernels, so only
    the replay's ``runner=`` hint decides; without it the graph stays unattributed."""
    from pairs import as_ours, with_replay_range

    folder = tmp_path / "graph_capture_profile"
    folder.mkdir()
    for runner in ("DecodeCudaGraphRunner", "EAGLEDraftCudaGraphRunner"):
        save(as_ours(real["capture"], runner), folder / f"cuda_graph_capture-{runner}-TP-0.json.gz")
    hinted = save(with_replay_range(real["replay"], "replay::runner=EAGLEDraftCudaGraphRunner,bs=32"),
                  tmp_path / "replay-TP-0.json.gz")
    res = _attribute(run_cli, hinted, folder)
    assert res["coverage"]["graph_kernels_attributed"] == 421
    graph = [op for op in res["ops"] if op["source"] == "graph"]
    assert {(op["runner"], op["segment"]) for op in graph} == {("EAGLEDraftCudaGraphRunner", "bs=32")}
    res = _attribute(run_cli, VLLM_REPLAY, folder)
    assert res["coverage"]["graph_kernels_attributed"] == 0
    assert res["unattributed"][0]["reason"].startswith("ambiguous: 2 capture windows verify")


# -- the record (``summary``) names captured launches by the eager pass of the same segment -------------------


def _capture_summary(cap: dict[str, Any], path: Path, top: int = 10) -> dict[str, Any]:
    s = summarize(load_record(str(save(cap, path))), top=top)
    return next(x for x in s["segments"] if x["label"] == "bs=1")


def test_derived_nvidia_capture_launches_get_names_from_the_eager_pass(h100: dict[str, Any], tmp_path: Path) -> None:
    """DERIVED (``pairs.nvidia_pair``): the window's launches carry no kernel; the record names each by the
    one namer (``windows.windows_of``), as ``attribute`` does, with a name the same signature ran eagerly."""
    seg = _capture_summary(nvidia_pair(h100)[0], tmp_path / "t.json.gz", top=10_000)
    counts = ("launches", "unnamed_launches", "attributed_launches", "unknown_launches")
    assert [seg[k] for k in counts] == [2 * 1029, 1029, 1029, 0]
    attributed = [k for row in seg["top"] for k in row["kernels"] if k.get("attributed")]
    assert attributed and all(k["name"] for k in attributed)
    for row in seg["top"]:  # a recovered name is one the same signature really ran eagerly
        seen = {k["name"] for k in row["kernels"] if not k.get("attributed") and k["name"]}
        assert {k["name"] for k in row["kernels"] if k.get("attributed")} <= seen


def test_derived_nvidia_capture_op_that_differs_is_not_guessed(h100: dict[str, Any], tmp_path: Path) -> None:
    """The first captured ``aten::mm`` with other input dims than its eager run: its launch stays unknown."""
    cap = nvidia_pair(h100)[0]
    begin = next(e["ts"] for e in cap["traceEvents"] if e["name"] == "cudaStreamBeginCapture")
    op = next(e for e in cap["traceEvents"] if e.get("cat") == "cpu_op" and e["name"] == "aten::mm" and e["ts"] > begin)
    op["args"]["Input Dims"] = [[12345]] + op["args"]["Input Dims"][1:]
    launches = [e for e in cap["traceEvents"] if "LaunchKernel" in e["name"] and e["tid"] == op["tid"]
                and op["ts"] <= e["ts"] <= op["ts"] + op["dur"]]
    seg = _capture_summary(cap, tmp_path / "t.json.gz")
    assert (seg["unknown_launches"], seg["attributed_launches"]) == (len(launches), 1029 - len(launches)) == (1, 1028)


# -- hand-built NVIDIA-style pairs (named fakes) at the edges once mishandled: each fails on the code before its fix


Kernel = tuple[str, int, float]  # name, grid x, duration


class Trace:
    """A capture or replay built event by event: CPU time advances one µs per begin and end."""

    def __init__(self) -> None:
        self.events: list[dict[str, Any]] = []
        self.t = 1000.0
        self.gpu = 1000.0
        self.corr = 1

    def _x(self, cat: str, name: str, ts: float, dur: float, args: dict[str, Any], pid: int = 100,
           tid: int = 1) -> dict[str, Any]:
        self.events.append(done := event(cat, name, ts, dur, pid=pid, tid=tid, **args))
        return done

    @contextlib.contextmanager
    def span(self, cat: str, name: str, args: dict[str, Any] | None = None) -> Iterator[None]:
        t0, self.t = self.t, self.t + 1
        yield
        self.t += 1
        self._x(cat, name, t0, self.t - t0, args or {})

    def module(self, name: str) -> contextlib.AbstractContextManager[None]:
        return self.span("python_function", f"nn.Module: {name}")

    def op(self, name: str, dims: list[list[int]]) -> contextlib.AbstractContextManager[None]:
        return self.span("cpu_op", name, {"Input Dims": dims, "Input type": ["float"] * len(dims),
                                          "External id": 5000 + self.corr})

    def launch(self, kernel: str, ran: bool, grid: int = 1, dur: float = 5.0) -> None:
        """A kernel launch; ``ran``: eager (its kernel record follows), else captured (no kernel)."""
        c, self.corr = self.corr, self.corr + 1
        self._x("cuda_runtime", "cudaLaunchKernel", self.t, 1.0, {"correlation": c, "External id": 5000 + c})
        self.t += 2
        if ran:
            self.gpu = max(self.gpu, self.t) + 1
            args = {"correlation": c, "External id": 5000 + c, "grid": [grid, 1, 1], "block": [128, 1, 1]}
            self._x("kernel", kernel, self.gpu, dur, args, pid=0, tid=7)
            self.gpu += dur

    def mark(self, name: str) -> None:
        self._x("cuda_runtime", name, self.t, 1.0, {"correlation": self.corr})
        self.corr, self.t = self.corr + 1, self.t + 2

    def graph(self, kernels: list[Kernel]) -> list[dict[str, Any]]:
        """A replayed graph launch: its kernels share its correlation, each with its graph node id."""
        c, self.corr = self.corr, self.corr + 1
        self._x("cuda_runtime", "cudaGraphLaunch", self.t, 3.0, {"correlation": c})
        self.t += 4
        g, out = max(self.gpu, self.t) + 1, []
        for n, (name, grid, dur) in enumerate(kernels):
            args = {"correlation": c, "grid": [grid, 1, 1], "block": [128, 1, 1], "graph node id": 1000 * c + n}
            out.append(self._x("kernel", name, g, dur, args, pid=0, tid=7))
            g += dur + 0.5
        self.gpu = g
        return out

    def save(self, path: Path) -> Path:
        events = sorted(self.events, key=lambda e: e["ts"])
        return write_trace(path, events)


def _forward(t: Trace, bs: int, ran: bool, grid: int = 1) -> None:
    with t.module("Model_0"):
        with t.op("aten::mm", [[bs, 16], [16, 16]]):
            t.launch("gemm", ran, grid)
        with t.op("aten::add", [[bs, 16], [bs, 16]]):
            t.launch("add_k", ran)


def _elementwise_capture(ops: tuple[str, ...], path: Path) -> Path:
    """bs=2: each op of ``ops`` launches ``elementwise_kernel``, in a warm-up pass and then a capture."""
    cap = Trace()
    with cap.span("user_annotation", "capture::bs=2"):
        for ran in (True, False):
            if not ran:
                cap.mark("cudaStreamBeginCapture")
            with cap.module("Model_0"):
                for op in ops:
                    with cap.op(op, [[2, 16], [2, 16]]):
                        cap.launch("elementwise_kernel", ran)
            if not ran:
                cap.mark("cudaStreamEndCapture")
    return cap.save(path)


def _ops(doc: dict[str, Any]) -> list[tuple[str | None, str, float]]:
    return [(o["segment"], o["name"], o["gpu_time_us"]) for o in doc["ops"]]


def test_graphs_of_several_sizes_in_one_file_are_not_taken_for_piecewise_pieces(tmp_path: Path, run_cli: Run) -> None:
    """sglang captures sizes largest first into one file. After bs=4 was identified, the next graph that
    both bs=2 and bs=1 verify was taken for "the next window" (bs=2), the one after for bs=1: a guess.
    Two windows of one file are "next" only as pieces of one segment; otherwise it is ambiguous."""
    cap = Trace()
    for bs, grid in ((4, 2), (2, 1), (1, 1)):
        with cap.span("user_annotation", f"capture::bs={bs}"):
            _forward(cap, bs, True, grid)
            cap.mark("cudaStreamBeginCapture")
            _forward(cap, bs, False, grid)
            cap.mark("cudaStreamEndCapture")
    rep = Trace()
    rep.graph([("gemm", 2, 20.0), ("add_k", 1, 4.0)])  # only bs=4's gemm has grid 2
    for _ in range(3):
        rep.graph([("gemm", 1, 10.0), ("add_k", 1, 3.0)])  # bs=2 and bs=1 look alike
    rc, out, err = run_cli("attribute", rep.save(tmp_path / "r.json.gz"), cap.save(tmp_path / "c.json.gz"), "--json")
    doc = json.loads(out)
    assert _ops(doc) == [("bs=4", "aten::mm", 20.0), ("bs=4", "aten::add", 4.0)]
    (missed,) = doc["unattributed"]
    assert missed["reason"].startswith("ambiguous: 2 capture windows verify") and missed["kernels"] == 6, missed
    assert rc == 0 and "several capture windows verify" in err


def test_a_nested_capture_is_named_by_the_warm_up_pass_too(tmp_path: Path, run_cli: Run) -> None:
    """One thread captures a side stream inside the main stream's capture: the inner window's warm-up
    pass was searched from the outer window's end (after the inner one began): nothing, unnamed."""
    cap = Trace()

    def part(op: str, kernel: str, dims: list[list[int]], ran: bool) -> None:
        with cap.op(op, dims):
            cap.launch(kernel, ran)

    with cap.span("user_annotation", "capture::bs=2"), cap.module("Model_0"):
        for ran in (True, False):
            if not ran:
                cap.mark("cudaStreamBeginCapture")  # outer: the main stream
            part("aten::mm", "gemm", [[2, 16], [16, 16]], ran)
            if not ran:
                cap.mark("cudaStreamBeginCapture")  # inner: a side stream, ends first
            part("aten::relu", "relu_k", [[2, 16]], ran)
            if not ran:
                cap.mark("cudaStreamEndCapture")
            part("aten::add", "add_k", [[2, 16], [2, 16]], ran)
            if not ran:
                cap.mark("cudaStreamEndCapture")
    rep = Trace()
    rep.graph([("gemm", 1, 10.0), ("add_k", 1, 3.0)])
    rep.graph([("relu_k", 1, 7.0)])
    doc = _attribute(run_cli, rep.save(tmp_path / "r.json.gz"), cap.save(tmp_path / "c.json.gz"))
    assert sorted(_ops(doc)) == [("bs=2", "aten::add", 3.0), ("bs=2", "aten::mm", 10.0), ("bs=2", "aten::relu", 7.0)]
    assert doc["unattributed"] == []


def test_a_later_piece_of_a_piecewise_capture_is_named_by_the_whole_model_warm_up(
    tmp_path: Path, run_cli: Run
) -> None:
    """vLLM-style piecewise capture on NVIDIA: one eager pass of the whole model, then each piece captured
    with eager attention between. The second piece was searched for names only after the first
    window, where only attention ran: unnamed, and a low-coverage warning."""
    cap = Trace()

    def piece_1(ran: bool) -> None:
        with cap.module("Piece_0"), cap.op("aten::mm", [[32, 16], [16, 48]]):
            cap.launch("qkv_gemm", ran)

    def attention() -> None:
        with cap.module("Attention_0"), cap.op("vllm::unified_attention", [[32, 16]]):
            cap.launch("flash_attn", True)

    def piece_2(ran: bool) -> None:
        with cap.module("Piece_1"):
            with cap.op("aten::mm", [[32, 16], [16, 16]]):
                cap.launch("o_gemm", ran)
            with cap.op("aten::add", [[32, 16], [32, 16]]):
                cap.launch("add_k", ran)

    with cap.span("user_annotation", "capture_32_PIECEWISE"):
        piece_1(True)  # the whole model's eager pass
        attention()
        piece_2(True)
        for piece in (piece_1, piece_2):
            cap.mark("cudaStreamBeginCapture")
            piece(False)
            cap.mark("cudaStreamEndCapture")
            if piece is piece_1:
                attention()
    rep = Trace()
    rep.graph([("qkv_gemm", 1, 10.0)])
    rep.graph([("o_gemm", 1, 8.0), ("add_k", 1, 3.0)])
    doc = _attribute(run_cli, rep.save(tmp_path / "r.json.gz"), cap.save(tmp_path / "c.json.gz"))
    segment = "tokens=32,variant=PIECEWISE"
    assert _ops(doc) == [(segment, "aten::mm", 10.0), (segment, "aten::mm", 8.0), (segment, "aten::add", 3.0)]
    assert doc["coverage"]["graph_kernels_attributed"] == 3


def test_annotate_tells_same_named_kernels_starting_together_apart(tmp_path: Path, run_cli: Run) -> None:
    """add and mul both launch ``elementwise_kernel``; replayed on two streams they start at one time. The
    annotation was keyed by (correlation, start, name): both kernels got the last op written (mul).
    Keyed by the graph node id now, each gets its own."""
    capture = _elementwise_capture(("aten::add", "aten::mul"), tmp_path / "c.json.gz")
    rep = Trace()
    add_k, mul_k = rep.graph([("elementwise_kernel", 1, 4.0), ("elementwise_kernel", 1, 9.0)])
    mul_k["ts"], mul_k["tid"] = add_k["ts"], 8  # the other stream, the same start
    out = tmp_path / "annotated.json"
    _attribute(run_cli, rep.save(tmp_path / "r.json.gz"), capture, "--annotate", str(out))
    kernels = [e for e in json.loads(out.read_text())["traceEvents"] if e["cat"] == "kernel"]
    assert sorted((e["dur"], e["args"]["capture_op"]) for e in kernels) == [(4.0, "aten::add"), (9.0, "aten::mul")]


def test_which_launches_a_shorter_replay_skipped_is_never_guessed(tmp_path: Path, run_cli: Run) -> None:
    """add, mul and sub all launch ``elementwise_kernel``; the replayed graph runs two of them. The first
    in-order fit (add, mul) was reported as verified, though (add, sub) and (mul, sub) fit as well: the
    graph is now unattributed, with that reason. When every fit gives the same ops, it is attributed."""
    def capture(ops: tuple[str, ...]) -> Path:
        return _elementwise_capture(ops, tmp_path / f"c{len(ops)}-{ops[-1]}.json.gz")

    rep = Trace()
    rep.graph([("elementwise_kernel", 1, 4.0), ("elementwise_kernel", 1, 9.0)])
    replay = rep.save(tmp_path / "r.json.gz")
    rc, out, err = run_cli("attribute", replay, capture(("aten::add", "aten::mul", "aten::sub")), "--json")
    doc = json.loads(out)
    assert doc["ops"] == [] and [u["reason"] for u in doc["unattributed"]] == [
        "ambiguous: the replayed kernels fit the capture window's launches in more than one way"
    ]
    assert "which launches they skipped is not clear" in err
    same = _attribute(run_cli, replay, capture(("aten::add", "aten::add", "aten::add")))
    assert [(o["name"], o["count"], o["gpu_time_us"]) for o in same["ops"]] == [("aten::add", 2, 13.0)]


# -- what attribute says: the low-coverage warning -------------------------------------------------------------------


_PLAIN = (f"{H100}: holds no CUDA-graph content (no capture window, no graph launch): it is a plain profile; CAPTURE "
          "takes the traces taken at start-up, with CUDA-graph capture")


@pytest.mark.parametrize(("argv", "said"), [
    # a plain profile (the real H100 inference trace) as the capture attributed no graph kernel, warned and
    # exited 0 (or 1 under --min-coverage): a confident answer about the wrong file; its role is read first
    *(((VLLM_REPLAY, H100, *extra), _PLAIN) for extra in ((), ("--json",), ("--min-coverage", "0.02"))),
    ((VLLM_REPLAY, VLLM_REPLAY), f"{VLLM_REPLAY}: holds graph launches and no capture windows: it is a replay "
     "(serving) trace; it is REPLAY already: give its captures after it"),
    # ``--csv "$OUT"`` with OUT unset wrote nothing and said nothing (exit 0); a coverage above 1
    *(((VLLM_REPLAY, VLLM_CAPTURE, option, ""), f"{option}: expected a file name ('-' for stdout), got an empty one")
      for option in ("--csv", "--annotate")),
    ((VLLM_REPLAY, VLLM_CAPTURE, "--min-coverage", "1.5"),
     "--min-coverage: expected a fraction between 0 and 1, got 1.5"),
])
def test_wrong_inputs_and_option_values_are_one_line(run_cli: Any, argv: tuple[Any, ...], said: str) -> None:
    assert run_cli("attribute", *argv) == (2, "", f"capture-trace: error: {said}\n")


def test_a_fully_attributed_replay_meets_min_coverage_1(run_cli: Any) -> None:
    """The two totals are float sums of the same kernels in different orders (10717.708000000004 and
    …008 µs): compared as shown, to the ns, 421/421 kernels and all GPU time attributed meets 1.0."""
    rc, out, err = run_cli("attribute", VLLM_REPLAY, VLLM_CAPTURE, "--json", "--min-coverage", "1")
    cov = json.loads(out)["coverage"]
    assert cov["attributed_us"] == cov["gpu_time_us"] and cov["graph_kernels_attributed"] == cov["graph_kernels"]
    assert (rc, err) == (0, "")


def test_derived_wrong_capture_and_wrong_rank_name_their_causes(
    run_cli: Any, real: dict[str, Any], tmp_path: Path
) -> None:
    """DERIVED: the capture's kernel names rotated (another model or build): no graph attributed, eager work
    still on its own ops, exit 1 under --min-coverage; and the same capture claiming rank 1 (given with
    --any-rank): a rank that differs is named first."""
    rotated = rotate_names(real["capture"])
    wrong = save(rotated, tmp_path / "wrong_capture.json.gz")
    rc, out, err = run_cli("attribute", VLLM_REPLAY, wrong, "--json")
    head = f"capture-trace: warning: {VLLM_REPLAY}: only 0/421 graph kernels and 3.1 % of GPU time attributed: "
    assert (rc, err) == (0, head + "the replayed kernel sequences are not the captured ones: wrong capture or "
                         "runner (another model, runner or build)?\n")
    res = json.loads(out)
    assert res["coverage"]["graph_kernels_attributed"] == 0 and {op["source"] for op in res["ops"]} == {"eager"}
    (miss,) = [u for u in res["unattributed"] if u["source"] == "graph"]
    assert miss["kernels"] == 421 and "not found in order" in miss["reason"]
    assert run_cli("attribute", VLLM_REPLAY, wrong, "--min-coverage", "0.5")[0] == 1
    other = save(with_rank(rotated, 1), tmp_path / "wrong_capture_rank1.json.gz")
    rc, _, err = run_cli("attribute", VLLM_REPLAY, other, "--json", "--any-rank")
    assert (rc, err) == (0, head + "the replay is rank 0, the captures rank 1: wrong rank?\n")
    right_capture_other_rank = save(with_rank(real["capture"], 1), tmp_path / "capture_rank1.json.gz")
    rc, _, err = run_cli("attribute", VLLM_REPLAY, right_capture_other_rank, "--json", "--any-rank")
    assert (rc, err) == (0, "")  # coverage is fine: no word about ranks


# -- "written to" lines -------------------------------------------------------------------------------


def test_csv_and_annotate_say_where_they_wrote(run_cli: Any, tmp_path: Path) -> None:
    rows, annotated = tmp_path / "ops.csv", tmp_path / "annotated.json.gz"
    rc, out, err = run_cli("attribute", VLLM_REPLAY, VLLM_CAPTURE, "--csv", rows, "--annotate", annotated)
    assert rc == 0 and "coverage:" in out
    n = len(rows.read_text().splitlines()) - 1
    assert err == (
        f"capture-trace: info: wrote {n} rows to {rows}\n"
        f"capture-trace: info: wrote the annotated replay (421 kernels annotated) to {annotated}\n"
    )
    rc, _, err = run_cli("attribute", VLLM_REPLAY, VLLM_CAPTURE, "--json", "--group-by", "module", "--csv", rows)
    assert (rc, err) == (0, f"capture-trace: info: wrote 3 rows to {rows}\n")


def _child(*argv: Any) -> subprocess.CompletedProcess[str]:
    """``capture-trace attribute ARGV`` in a real child process, its stdout and stderr pipes."""
    command = [sys.executable, "-m", "mixins", "attribute", *map(str, argv)]
    return subprocess.run(command, capture_output=True, text=True, env=_CHILD_ENV, timeout=300)


def test_nothing_said_when_the_output_is_stdout() -> None:
    """``-`` and ``/dev/stdout`` write to descriptor 1 itself: a real child process, its stdout a pipe."""
    for extra in (["--csv", "-"], ["--csv", "/dev/stdout"], ["--annotate", "/dev/stdout"]):
        done = _child(VLLM_REPLAY, VLLM_CAPTURE, "--json", *extra)
        assert (done.returncode, done.stderr) == (0, ""), extra
        assert "vllm::moe_forward" in done.stdout


# -- --group-by views --------------------------------------------------------------------------------------


def test_default_json_is_byte_identical_to_mains(run_cli: Any, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.chdir(DATA)
    rc, out, _ = run_cli("attribute", VLLM_REPLAY.name, VLLM_CAPTURE.name, "--json")
    assert rc == 0 and out == GOLDEN.read_text()


@pytest.mark.parametrize("by", ["op", "module", "shape", "segment"])
def test_every_view_adds_up_to_the_attributed_time(run_cli: Any, by: str, tmp_path: Path) -> None:
    rows_csv = tmp_path / "rows.csv"
    res = _attribute(run_cli, VLLM_REPLAY, VLLM_CAPTURE, "--group-by", by, "--csv", rows_csv)
    base = {k: v for k, v in res.items() if k != "groups"}
    main = json.loads(GOLDEN.read_text())
    assert base == {**main, "replay": str(VLLM_REPLAY), "captures": [str(VLLM_CAPTURE)]}  # the rest as before
    assert res["groups"]["by"] == by
    rows = res["groups"]["rows"]
    cov = res["coverage"]
    assert sum(r["gpu_time_us"] for r in rows) == pytest.approx(cov["attributed_us"], abs=1e-3 * len(rows))
    assert sum(r["kernels"] for r in rows) == sum(op["kernels"] for op in res["ops"])
    assert sum(r["count"] for r in rows) == sum(op["count"] for op in res["ops"])
    assert [r["gpu_time_us"] for r in rows] == sorted((r["gpu_time_us"] for r in rows), reverse=True)
    with open(rows_csv, newline="") as f:
        got = list(csv.DictReader(f))
    assert len(got) == len(rows)
    for line, row in zip(got, rows, strict=True):
        assert line["replay"] == str(VLLM_REPLAY)
        for k, v in row.items():
            if k in ("input_dims", "input_types"):
                assert (json.loads(line[k]) if line[k] else None) == v
            elif isinstance(v, bool) or not isinstance(v, (int, float)):
                assert line[k] == ("" if v is None else str(v))
            else:
                assert float(line[k]) == v
    if by == "op":  # the op rows' CSV, as without --group-by: the header stable
        assert rows == res["ops"] and list(got[0])[:4] == ["replay", "name", "module", "input_dims"]
    else:
        assert sum(r["ops"] for r in rows) == len(res["ops"])


def test_views_of_the_real_pair(run_cli: Any) -> None:
    res = _attribute(run_cli, VLLM_REPLAY, VLLM_CAPTURE, "--group-by", "module")
    top = res["groups"]["rows"][0]
    assert (top["module"], top["ops"], top["kernels"]) == ("nn.Module: GraphModule", 14, 421)
    graph = sum(op["gpu_time_us"] for op in res["ops"] if op["module"] == "nn.Module: GraphModule")
    assert top["gpu_time_us"] == pytest.approx(graph, abs=0.01)
    res = _attribute(run_cli, VLLM_REPLAY, VLLM_CAPTURE, "--group-by", "shape")
    moe = next(r for r in res["groups"]["rows"] if r["name"] == "vllm::moe_forward")
    assert (moe["input_dims"][0], moe["count"], moe["kernels"]) == ([32, 3072], 24, 72)
    assert set(moe) == {"name", "input_dims", "input_types", "ops", "kernels", "count", "gpu_time_us", "mean_us"}
    rc, out, err = run_cli("attribute", VLLM_REPLAY, VLLM_CAPTURE, "--group-by", "module")
    assert (rc, err) == (0, "")
    assert f"{VLLM_REPLAY}: modules by GPU time" in out and "nn.Module: GraphModule" in out
    assert "vllm::moe_forward" not in out  # the view replaces the op rows
    assert "coverage: graph kernels 421/421 attributed" in out


# -- progress on a terminal only ---------------------------------------------------------------------


@pytest.fixture(scope="module")
def big_replay(real: dict[str, Any], tmp_path_factory: pytest.TempPathFactory) -> Path:
    """DERIVED: the real replay plus a top-level member of 6.7 MB of random base64 text, so its gzip
    passes the progress bar's size threshold (render.PROGRESS_MIN_BYTES); attribution is unchanged."""
    from mixins.analysis.render import PROGRESS_MIN_BYTES

    doc = {**real["replay"], "padding": base64.b64encode(os.urandom(5 << 20)).decode()}
    path = save(doc, tmp_path_factory.mktemp("big") / "big_replay_rank_0.json.gz")
    assert path.stat().st_size >= PROGRESS_MIN_BYTES
    return path


def _on_a_terminal(*argv: Any) -> tuple[int, str, str]:
    """``capture-trace attribute ARGV`` in a child whose stderr is a real pseudo-terminal and whose
    stdout is a pipe: (exit code, stdout, what the terminal received)."""
    command = [sys.executable, "-m", "mixins", "attribute", *argv]
    done = run_on_a_terminal(command, {**_CHILD_ENV, "COLUMNS": "120"}, on_terminal=("stderr",))
    return done.returncode, done.stdout.decode(), done.terminal.decode("utf-8", "replace")


@pytest.mark.parametrize("jobs", ["1", "2"], ids=["sequential", "overlapped"])
def test_progress_on_a_terminal_never_with_json(big_replay: Path, jobs: str) -> None:
    """-j 1 reads in turn; -j 2 reads the (≥ 1 MiB) replay here while the capture loads in a worker."""
    rc, out, term = _on_a_terminal(big_replay, VLLM_CAPTURE, "-j", jobs, "--top", "1")
    assert rc == 0 and "coverage: graph kernels 421/421 attributed" in out
    assert big_replay.name in term and "MB" in term, term  # the byte bar: its label and size
    assert "warning" not in term
    rc, out, term = _on_a_terminal(big_replay, VLLM_CAPTURE, "-j", jobs, "--json")
    assert rc == 0 and json.loads(out)["coverage"]["graph_kernels_attributed"] == 421
    assert term == ""


def test_no_progress_when_stderr_is_piped(big_replay: Path) -> None:
    done = _child(big_replay, VLLM_CAPTURE, "--top", "1")
    assert (done.returncode, done.stderr) == (0, "")
    assert io.StringIO(done.stdout).readline().startswith(f"{big_replay}: ops by GPU time")
    assert "vllm::moe_forward" in done.stdout and "coverage: graph kernels 421/421 attributed" in done.stdout
