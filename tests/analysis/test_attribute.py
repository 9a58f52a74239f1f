"""``capture-trace attribute`` on the real ROCm vLLM pair and on pairs DERIVED from real traces.

The acceptance test reproduces TraceLens's own ``ops_summary.csv`` for the real pair. Every other
pair here is derived (see pairs.py and tests/data/PROVENANCE.md) and says so in its test name.
"""

from __future__ import annotations

import csv
import gzip
import json
import os
import select
import shutil
from collections import defaultdict
from pathlib import Path
from typing import Any

import pytest
from inprocess import run_analyzer
from pairs import (
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
from mixins.analysis.model.windows import load_capture
from tests.interop import import_hta


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
def real(tmp_path_factory: pytest.TempPathFactory) -> dict[str, Any]:
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


def test_derived_capture_with_extra_launches_still_verifies(
    run_cli: Any, real: dict[str, Any], full: dict[str, Any], tmp_path: Path
) -> None:
    extra = save(extra_launches(real["capture"]), tmp_path / "extra_capture.json.gz")
    assert len(load_capture(str(extra)).windows[0].nodes) == 421 + 11
    res = _attribute(run_cli, VLLM_REPLAY, extra)
    assert res["coverage"]["graph_kernels_attributed"] == 421
    assert _by_name_module(res) == pytest.approx(_by_name_module(full))


def test_derived_piecewise_pair_matches_window_by_window(
    run_cli: Any, real: dict[str, Any], full: dict[str, Any], tmp_path: Path
) -> None:
    cap, rep = piecewise(real["capture"], real["replay"], cut=200)
    cap_p, rep_p = save(cap, tmp_path / "pw_capture.json.gz"), save(rep, tmp_path / "pw_replay.json.gz")
    windows = load_capture(str(cap_p)).windows
    assert [len(w.nodes) for w in windows] == [200, 221]
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


def _innermost(events: list[dict[str, Any]], t: float, tid: Any) -> dict[str, Any] | None:
    best = None
    for e in events:
        if e["tid"] == tid and e["ts"] <= t <= e["ts"] + e["dur"] and (best is None or e["ts"] >= best["ts"]):
            best = e
    return best


def test_derived_nvidia_pair_named_by_warmup_pass(h100: dict[str, Any], tmp_path: Path) -> None:
    cap, rep = nvidia_pair(h100)
    cap_p, rep_p = save(cap, tmp_path / "nv_capture.json.gz"), save(rep, tmp_path / "nv_replay.json.gz")
    (window,) = load_capture(str(cap_p)).windows
    assert window.naming == "warm-up" and window.unnamed == 0
    res = attribute_replay(str(rep_p), [window], [str(cap_p)], annotate=True)
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
    cap, rep = nvidia_pair(h100)
    for e in rep["traceEvents"]:
        if e.get("cat") == "gpu_memset":
            del e["name"]
    cap_p, rep_p = save(cap, tmp_path / "nv_capture.json.gz"), save(rep, tmp_path / "nv_replay.json.gz")
    res = attribute_replay(str(rep_p), load_capture(str(cap_p)).windows, [str(cap_p)])
    graph = {r.name for r in res.rows if r.source == "graph"}
    assert "memset" in graph and "memcpy" not in graph and not any(n.startswith("Memset") for n in graph)


def test_derived_nvidia_pair_without_warmup_is_not_guessed(h100: dict[str, Any], tmp_path: Path) -> None:
    cap, rep = nvidia_pair(h100, warmup=False)
    cap_p, rep_p = save(cap, tmp_path / "nv_capture.json.gz"), save(rep, tmp_path / "nv_replay.json.gz")
    res = attribute_replay(str(rep_p), load_capture(str(cap_p)).windows, [str(cap_p)])
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
    cap, rep = nvidia_pair(h100, node_ids=True)
    cap_p, rep_p = save(cap, tmp_path / "nv_capture.json.gz"), save(rep, tmp_path / "nv_replay.json.gz")
    windows = load_capture(str(cap_p)).windows
    res = attribute_replay(str(rep_p), windows, [str(cap_p)])
    assert res.graph_kernels_attributed == res.graph_kernels > 1000
    for e in rep["traceEvents"]:
        e.get("args", {}).pop("graph node id", None)
    no_ids = attribute_replay(str(save(rep, tmp_path / "nv_replay_no_ids.json.gz")), windows, [str(cap_p)])
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
