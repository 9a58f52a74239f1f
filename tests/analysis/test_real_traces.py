"""Counts on the two real traces in tests/data, recomputed here independently with json.load."""

from __future__ import annotations

import gzip
import json
from collections import Counter
from pathlib import Path
from typing import Any

import msgspec
import pytest
from pairs import load

from mixins.analysis.model.records import compact, load_record, summarize
from tests.analysis.conftest import H100, VLLM


def _independent(path: Path) -> dict[str, Any]:
    """The issue's definitions, computed the obvious (slow, memory-hungry) way."""
    events = json.load(gzip.open(path))["traceEvents"]
    rt = [e for e in events if "runtime" in e.get("cat", "") or "driver" in e.get("cat", "")]
    launches = [e for e in rt if "LaunchKernel" in e["name"]]
    kernels = [e for e in events if e.get("cat") == "kernel"]
    ops = [e for e in events if e.get("cat") == "cpu_op"]
    kernel_corr = {k["args"]["correlation"] for k in kernels if "correlation" in k.get("args", {})}
    named = [x for x in launches if "kernel" in x["args"] or x["args"].get("correlation") in kernel_corr]
    op_ext = {o["args"]["External id"] for o in ops if "External id" in o["args"]}
    launch_ext = {x["args"]["correlation"]: x["args"].get("External id") for x in launches}
    linked = [
        k
        for k in kernels
        if launch_ext.get(k["args"].get("correlation")) in op_ext or k["args"].get("External id") in op_ext
    ]
    sigs = {
        (o["name"], json.dumps(o["args"].get("Input Dims")), json.dumps(o["args"].get("Input type")))
        for o in ops
    }
    return {
        "events": len(events),
        "cats": Counter(e.get("cat") for e in events),
        "cpu_ops": len(ops),
        "launches": len(launches),
        "graph_launches": sum("GraphLaunch" in e["name"] for e in rt),
        "kernels": len(kernels),
        "unnamed_launches": len(launches) - len(named),
        "linked_kernels": len(linked),
        "ops_without_shapes": sum("Input Dims" not in o["args"] for o in ops),
        "signatures": len(sigs),
    }


TOTALS = ("cpu_ops", "launches", "graph_launches", "kernels", "unnamed_launches", "linked_kernels",
          "ops_without_shapes", "signatures")


@pytest.mark.parametrize(("path", "known", "labels", "first"), [
    # anchors from tests/data/PROVENANCE.md and a hand count (no capture ranges: one segment 'all');
    # launches: 860 cudaLaunchKernel + 168 cudaLaunchKernelExC + 1 cuLaunchKernel
    (H100, {"events": 18221, "kernels": 1465, "cpu_ops": 4186, "launches": 1029, "identity_source": "none",
            "tp_rank": None}, ["all"], {}),
    # vLLM captures by token count; ROCm launches carry args.kernel: all 428 are named although only 7 kernels ran
    (VLLM, {"identity_source": "distributedInfo", "tp_rank": 0, "segment_source": "foreign"},
     ["tokens=32,variant=FULL", "(outside)"],
     {"bs": None, "unit": "tokens", "size": 32, "launches": 428, "unnamed_launches": 0, "kernels": 7}),
], ids=["h100", "vllm"])
def test_totals_match_independent_count_and_known_figures(path: Path, known: dict, labels: list, first: dict) -> None:
    want = _independent(path)
    got = summarize(load_record(str(path)))
    assert got["events"] == want["events"]
    assert {k: got["totals"][k] for k in TOTALS} == {k: want[k] for k in TOTALS}
    # per-segment counts add up to the trace's totals: every event is in exactly one segment
    assert sum(s["events"] for s in got["segments"]) == want["events"]
    assert sum(s["kernels"] for s in got["segments"]) == want["cats"]["kernel"]
    flat = {**got, **got["totals"]}
    assert {k: flat[k] for k in known} == known
    assert [s["label"] for s in got["segments"]] == labels
    assert {k: got["segments"][0][k] for k in first} == first


@pytest.fixture(scope="module")
def vllm() -> tuple[dict[str, Any], Any]:
    """The vLLM trace's document (msgspec: the same values as json.load, faster) and its record, read once."""
    return load(VLLM), load_record(str(VLLM))


def _rewrite(doc: dict[str, Any], dst: Path, layout: str) -> None:
    if layout == "compact":
        text = msgspec.json.encode(doc)
    elif layout == "kineto":  # one event per line, traceEvents first
        rest = {k: v for k, v in doc.items() if k != "traceEvents"}
        body = b",\n".join(msgspec.json.encode(e) for e in doc["traceEvents"])
        text = b'{\n"traceEvents": [\n' + body + b"\n]," + msgspec.json.encode(rest)[1:-1] + b"}"
    else:
        text = msgspec.json.format(msgspec.json.encode(doc), indent=4)
    dst.write_bytes(text if layout != "kineto" else gzip.compress(text, compresslevel=1))


@pytest.mark.parametrize("layout", ["compact", "kineto", "indent"])
def test_layout_does_not_change_the_result(tmp_path: Path, layout: str, vllm: tuple[dict[str, Any], Any]) -> None:
    """Same data in another layout (and plain vs gzip) gives the same summary and sequences."""
    dst = tmp_path / ("t.json.gz" if layout == "kineto" else "t.json")
    _rewrite(vllm[0], dst, layout)
    a, b = vllm[1], load_record(str(dst))
    sa, sb = summarize(a), summarize(b)
    for s in (sa, sb):
        s.pop("path"), s.pop("size")
    assert sa == sb
    assert [[o.key for o in s.ops] for s in a.segments] == [[o.key for o in s.ops] for s in b.segments]


def test_columns_and_op_views_agree(vllm: tuple[dict[str, Any], Any]) -> None:
    """The record keeps ops as columns; ``Segment.ops`` builds objects from them. ``diff``/``check``'s
    sequences and ``summary``'s counts (read from the columns) equal what the objects say."""
    rec = vllm[1]
    seqs = compact(rec)
    ops = [s.ops for s in rec.segments]
    assert any(o.kernels for seg in ops for o in seg)  # a capture: ops with kernels, not only plain ones
    assert [[seqs.table[j] for j in seq] for seq in seqs.seqs] == [[o.key for o in seg] for seg in ops]
    assert [s.signatures for s in rec.segments] == [len({o.sig.shape_key for o in seg}) for seg in ops]
    assert [s.cpu_ops for s in rec.segments] == [len(seg) for seg in ops]
    assert all(seg == sorted(seg, key=lambda o: o.ts) for seg in ops)


def test_top_signatures_are_the_ops_that_launch_work() -> None:
    """Ranked by count alone, the top signatures would be ``aten::empty`` / ``aten::view`` (they
    launch nothing) on every real trace; ranked by kernels launched, the capture's top is its MoE."""
    seg = summarize(load_record(str(VLLM)), 5)["segments"][0]
    ops = [row["op"] for row in seg["top"]]
    assert ops[:2] == ["vllm::moe_forward", "SortTokens"], ops
    launched = [sum(k["count"] for k in row["kernels"]) for row in seg["top"]]
    assert launched == sorted(launched, reverse=True) and launched[-1] > 0, launched
