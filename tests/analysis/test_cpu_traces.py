"""summary / diff / check / ls on real torch.profiler traces made on CPU (tests/data/cpu_traces: see conftest)."""

from __future__ import annotations

import json
import shutil
from collections import Counter
from pathlib import Path

import pytest

from mixins.analysis.model.records import Segment, TraceRecord, load_record, summarize
from tests.trace_files import load_trace


def _seg(rec: TraceRecord, label: str) -> Segment:
    seg = rec.segment(label)
    assert seg is not None, label
    return seg


TRUNCATED = "truncated gzip stream (file ends before the end-of-stream marker)"


def test_segments_identity_and_counts(cpu_traces, run_cli) -> None:  # type: ignore[no-untyped-def]
    rc, out, err = run_cli("summary", cpu_traces["r0"], "--json", "--top", "3")
    assert rc == 0 and err == ""
    (t,) = json.loads(out)["traces"]
    assert (t["runner"], t["tp_rank"], t["pp_rank"], t["capture_index"]) == ("DecodeCudaGraphRunner", 0, 0, 1)
    assert t["identity_source"] == "metadata"
    assert [s["label"] for s in t["segments"]] == ["bs=1", "bs=4", "(outside)"]
    assert [s["bs"] for s in t["segments"]] == [1, 4, None]
    raw = load_trace(cpu_traces["r0"])
    events = raw["traceEvents"]
    assert next(iter(raw)) == "capture_trace"
    assert t["events"] == len(events)
    assert sum(s["events"] for s in t["segments"]) == len(events)
    assert sum(s["cpu_ops"] for s in t["segments"]) == sum(e.get("cat") == "cpu_op" for e in events)
    bs1, bs4, outside = t["segments"]
    # the same model at two batch sizes: same ops, other shapes
    assert bs1["cpu_ops"] == bs4["cpu_ops"] > 0
    rec = load_record(str(cpu_traces["r0"]))
    for bs in (1, 4):
        assert {o.sig.dims for o in _seg(rec, f"bs={bs}").ops if o.sig.name == "aten::linear"} == {
            f"[[{bs},16],[8,16],[]]"
        }
    assert outside["cpu_ops"] >= 2  # torch.zeros + add_ outside any capture range
    assert all(s["launches"] == s["kernels"] == 0 for s in t["segments"])  # CPU: nothing launched
    assert len(bs1["top"]) == 3


def _without_capture_ranges(src: Path, dst: Path, header: bool = True) -> None:
    doc = load_trace(src)
    for e in doc["traceEvents"]:
        if e.get("cat") == "user_annotation":
            e["name"] = "forward"
    if not header:
        del doc["capture_trace"]
    dst.write_text(json.dumps(doc))


@pytest.mark.parametrize(
    ("trace", "name", "ranges", "identity", "labels"),
    [
        # our file name (no metadata): runner, TP, PP and capture index; the capture:: ranges cut segments
        ("nometa", None, True, ("filename", "EAGLEDraftCudaGraphRunner", 3, 1, 2), ["bs=2", "(outside)"]),
        # upstream's per-bs name: metadata still names the runner and rank; the file name the batch size
        ("r0", "bs_16_rank3.json", False, ("metadata", "DecodeCudaGraphRunner", 0, 0, 1), ["bs=16"]),
        ("r0", "DecodeCudaGraphRunner_bs_8_rank5.json", None, ("filename", "DecodeCudaGraphRunner", 5, 0, 1),
         ["bs=8"]),
        # no capture range, no name: one segment
        ("nometa", "whatever.json", False, ("none", None, None, None, 1), ["all"]),
    ],
)
def test_identity_and_segments_from_the_file_name(  # type: ignore[no-untyped-def]
    cpu_traces, tmp_path: Path, trace: str, name: str | None, ranges: bool | None, identity: tuple, labels: list[str]
) -> None:
    """``ranges`` False: the capture ranges renamed; None: that and the metadata header dropped too."""
    path = cpu_traces[trace]
    if name is not None:
        path = tmp_path / name
        _without_capture_ranges(cpu_traces[trace], path, header=ranges is not None)
    rec = load_record(str(path))
    ident = rec.identity
    assert (ident.source, ident.runner, ident.tp_rank, ident.pp_rank, ident.capture_index) == identity
    assert [s.label for s in rec.segments] == labels
    assert sum(s.events for s in rec.segments) == rec.events


def test_diff_identical_ranks_is_clean(cpu_traces, run_cli) -> None:  # type: ignore[no-untyped-def]
    rc, out, _ = run_cli("diff", cpu_traces["r0"], cpu_traces["r1"], "--json")
    assert rc == 0
    res = json.loads(out)
    assert res["same"] is True
    assert {s["status"] for s in res["segments"]} == {"same"}


def test_diff_finds_the_extra_op(cpu_traces, run_cli) -> None:  # type: ignore[no-untyped-def]
    rc, out, _ = run_cli("diff", cpu_traces["r0"], cpu_traces["r1_bad"], "--json")
    assert rc == 1
    segs = {s["label"]: s for s in json.loads(out)["segments"]}
    assert segs["bs=1"]["status"] == "same" and segs["(outside)"]["status"] == "same"
    bs4 = segs["bs=4"]
    assert bs4["status"] == "changed"
    ops_a, ops_b = (_range_ops(cpu_traces[t], "capture::bs=4") for t in ("r0", "r1_bad"))
    assert (bs4["ops_a"], bs4["ops_b"]) == (len(ops_a), len(ops_b))
    extra = Counter(e["name"] for e in ops_b) - Counter(e["name"] for e in ops_a)
    assert "aten::mul" in extra
    assert bs4["added"] == sum(extra.values()) == len(ops_b) - len(ops_a)
    assert bs4["removed"] == 0 and bs4["changed"] == 0
    assert {ex["op"] for ex in bs4["examples"]["added"]} <= set(extra)
    # the first differing position is where B's first aten::mul sits in the bs=4 sequence
    rec = load_record(str(cpu_traces["r1_bad"]))
    seq = [o.sig.name for o in _seg(rec, "bs=4").ops]
    assert bs4["first_diff"] == seq.index("aten::mul")
    assert bs4["at_b"]["op"] == "aten::mul"
    rc, text, _ = run_cli("diff", cpu_traces["r0"], cpu_traces["r1_bad"])
    assert rc == 1 and "first difference at op #" in text and "aten::mul" in text


def _range_ops(path: Path, name: str) -> list[dict]:
    """cpu_ops inside the record_function range ``name``, straight from the JSON."""
    ev = load_trace(path)["traceEvents"]
    (r,) = [e for e in ev if e.get("name") == name]
    return [e for e in ev if e.get("cat") == "cpu_op" and r["ts"] <= e["ts"] <= r["ts"] + r["dur"]]


def test_check_consistent_directory(cpu_traces, run_cli) -> None:  # type: ignore[no-untyped-def]
    # temp files of the exporter are dotfiles and must be ignored, even when broken
    (cpu_traces["same"] / ".cuda_graph_capture-DecodeCudaGraphRunner-TP-0.json.gz.tmp123").write_bytes(b"junk")
    rc, out, err = run_cli("check", cpu_traces["same"], "--json")
    assert rc == 0, err
    res = json.loads(out)
    assert res["ok"] is True and res["bad_files"] == []
    (g,) = res["groups"]
    assert g["ranks"] == [0, 1] and g["runner"] == "DecodeCudaGraphRunner"


def test_check_names_first_divergent_op(cpu_traces, run_cli) -> None:  # type: ignore[no-untyped-def]
    rc, out, _ = run_cli("check", cpu_traces["diverged"], "--json")
    assert rc == 1
    (g,) = json.loads(out)["groups"]
    assert g["ok"] is False
    (d,) = g["divergences"]
    assert d["segment"] == "bs=4" and d["rank"] == 1
    assert d["other"]["op"] == "aten::mul"
    assert d["reference"]["op"] != "aten::mul"
    rc, text, _ = run_cli("check", cpu_traces["diverged"], "-j", "1")
    assert rc == 1 and "TP 1 diverges from TP 0 in 'bs=4'" in text and "aten::mul" in text


def test_check_parallel_reports_bad_file_and_continues(cpu_traces, run_cli, tmp_path: Path) -> None:  # type: ignore[no-untyped-def]
    for f in cpu_traces["diverged"].iterdir():
        shutil.copy(f, tmp_path / f.name)
    broken = tmp_path / "cuda_graph_capture-DecodeCudaGraphRunner-TP-2.json.gz"
    data = cpu_traces["r0"].read_bytes()
    broken.write_bytes(data[: len(data) // 2])
    rc, out, err = run_cli("check", tmp_path, "--json", "-j", "2")
    assert rc == 2  # trouble wins over a difference, like GNU diff
    assert err == f"capture-trace: error: {broken}: {TRUNCATED}\n"
    res = json.loads(out)
    assert res["bad_files"] == [str(broken)]
    assert res["groups"][0]["divergences"][0]["rank"] == 1  # the rest was still checked


def test_files_without_rank_never_collapse(cpu_traces, run_cli, tmp_path: Path) -> None:  # type: ignore[no-untyped-def]
    for name in ("a.json.gz", "b.json.gz"):  # captures (their capture:: ranges) with no rank anywhere
        shutil.copy(cpu_traces["nometa"], tmp_path / name)
    rc, out, _ = run_cli("check", tmp_path, "--json")
    groups = json.loads(out)["groups"]
    assert rc == 0 and len(groups) == 2
    assert all(g["ranks"] == [None] and g["notes"] for g in groups)


def test_duplicate_rank_is_a_problem(cpu_traces, run_cli, tmp_path: Path) -> None:  # type: ignore[no-untyped-def]
    shutil.copy(cpu_traces["r0"], tmp_path / "cuda_graph_capture-DecodeCudaGraphRunner-TP-0.json.gz")
    shutil.copy(cpu_traces["r0"], tmp_path / "copy.json.gz")  # metadata says TP 0 too
    rc, out, _ = run_cli("check", tmp_path, "--json")
    assert rc == 1
    assert "2 traces claim TP rank 0" in json.loads(out)["groups"][0]["problems"][0]


def test_ls_lists_identity_and_segments(cpu_traces, run_cli) -> None:  # type: ignore[no-untyped-def]
    rc, out, _ = run_cli("ls", cpu_traces["same"], "--json")
    assert rc == 0
    rows = json.loads(out)["traces"]
    assert [Path(r["path"]).name for r in rows] == sorted(p.name for p in cpu_traces["same"].glob("c*.json.gz"))
    assert rows[0]["segments"] == ["bs=1", "bs=4", "(outside)"]
    assert rows[1]["tp_rank"] == 1 and rows[0]["events"] > 0
    rc, text, _ = run_cli("ls", cpu_traces["same"])
    assert rc == 0 and "DecodeCudaGraphRunner" in text and "bs=1, bs=4" in text


def test_summary_human_output(cpu_traces, run_cli) -> None:  # type: ignore[no-untyped-def]
    rc, text, _ = run_cli("summary", cpu_traces["r0"], "--top", "2")
    assert rc == 0
    assert "DecodeCudaGraphRunner TP 0" in text and "bs=4: top 2 signatures" in text
    assert summarize(load_record(str(cpu_traces["r0"])))["totals"]["cpu_ops"] > 0


@pytest.mark.parametrize(
    ("name", "expected"),
    [
        ("capture::bs=8,variant=decode", ("bs=8,variant=decode", 8, True)),
        ("capture_32_FULL", ("tokens=32,variant=FULL", None, False)),
        ("capture_16_FULL_DECODE_ONLY", ("tokens=16,variant=FULL_DECODE_ONLY", None, False)),
        ("capture_4_FULL_AND_PIECEWISE", ("tokens=4,variant=FULL_AND_PIECEWISE", None, False)),
        ("capture_8", ("tokens=8", None, False)),
        ("capture_8_", None),
        ("capture_x_FULL", None),
    ],
)
def test_segment_markers_of_every_writer(name: str, expected: object) -> None:
    """Ours and vLLM's annotations, including vLLM modes that contain underscores."""
    from mixins.analysis.model.events import segment_marker, segment_variant

    assert segment_marker(name) == expected
    if expected is not None and "variant=" in expected[0]:  # type: ignore[index]
        assert segment_variant(expected[0]) == expected[0].split("variant=")[1]  # type: ignore[index]
