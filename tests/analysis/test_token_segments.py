"""``capture::tokens=`` segments (prefill / piecewise runners) are read like ``capture::bs=`` ones by
summary, time, check and diff; ``time`` puts a prefill and a decode runner side by side.

The traces are built (tests/trace_files.py) with the labels the decorator's profile mode writes (tests/core
checks that it writes them; the demo's real prefill trace, tests/data/demo, is read by test_time.py)."""

from __future__ import annotations

import json
from collections.abc import Callable
from pathlib import Path

import pytest

from mixins.analysis.model.segments import by_size, segment_size
from tests.trace_files import meta, op, span, write_trace

Run = Callable[..., tuple[int, str, str]]


def _write_traces(directory: Path, *, prefill_sizes: tuple[int, ...] = (512, 64, 1024)) -> Path:
    """A prefill runner's capture (token counts, then 64 tokens with two prefix chunks) and a decode
    runner's (batch sizes 8, 1, 16): one ``aten::mm`` of that size in each segment."""
    out = directory / "graph_capture_profile"
    out.mkdir()
    for runner, shapes in (("PrefillRunner", [*((n, 0) for n in prefill_sizes), (64, 2)]),
                           ("DecodeRunner", [(8, 0), (1, 0), (16, 0)])):
        events = []
        for k, (size, chunks) in enumerate(shapes):
            label = f"tokens={size}" + (f",prefix_num_chunks={chunks}" if chunks else "")
            events += [span(f"capture::{label if runner == 'PrefillRunner' else f'bs={size}'}", 100 * k, 50),
                       op("aten::mm", 100 * k + 10, 20, **{"Input Dims": [[size, 8], [8, 4 + chunks]]})]
        write_trace(out / f"cuda_graph_capture-{runner}-TP-0.json.gz", events, meta(runner=runner))
    return out


@pytest.fixture(scope="module")
def traces(tmp_path_factory: pytest.TempPathFactory) -> Path:
    return _write_traces(tmp_path_factory.mktemp("tokens"))


PREFILL = "cuda_graph_capture-PrefillRunner-TP-0.json.gz"
DECODE = "cuda_graph_capture-DecodeRunner-TP-0.json.gz"
PREFILL_LABELS = ["tokens=512", "tokens=64", "tokens=1024", "tokens=64,prefix_num_chunks=2"]


def test_segment_size_and_order() -> None:
    assert segment_size("bs=8,variant=lora") == ("bs", 8)
    assert segment_size("tokens=8192,prefix_num_chunks=2") == ("tokens", 8192)
    assert segment_size("tokens=64#2") == ("tokens", 64)
    assert segment_size("variant=x,bs=4") == ("bs", 4)
    assert segment_size("all") is None and segment_size("tokensx=4") is None
    labels = ["tokens=512", "bs=8", "all", "tokens=64,prefix_num_chunks=2", "tokens=64", "bs=1"]
    assert by_size(labels) == ["bs=1", "bs=8", "tokens=64,prefix_num_chunks=2", "tokens=64", "tokens=512", "all"]


def test_summary_labels_token_segments(traces: Path, run_cli: Run) -> None:
    rc, out, err = run_cli("summary", "--json", traces / PREFILL)
    assert rc == 0, err
    (trace,) = json.loads(out)["traces"]
    assert trace["segment_source"] == "capture::"
    labels = [s["label"] for s in trace["segments"] if s["label"] != "(outside)"]
    assert labels == PREFILL_LABELS
    assert all(s["cpu_ops"] > 0 for s in trace["segments"] if s["label"] != "(outside)")
    sizes = [(s["bs"], s["unit"], s["size"]) for s in trace["segments"] if s["label"] != "(outside)"]
    assert sizes == [(None, "tokens", 512), (None, "tokens", 64), (None, "tokens", 1024), (None, "tokens", 64)]


def test_time_puts_prefill_and_decode_side_by_side(traces: Path, run_cli: Run) -> None:
    rc, out, err = run_cli("time", traces)
    assert rc == 0, err
    side = out.split("runners side by side", 1)[1].splitlines()
    header = next(line for line in side if line.startswith("┃"))
    assert "DecodeRunner TP 0" in header and "PrefillRunner TP 0" in header
    rows = [line.split("│")[1].strip() for line in side if line.startswith("│")]
    assert rows == ["bs=1", "bs=8", "bs=16", "tokens=64", "tokens=64,prefix_num_chunks=2", "tokens=512",
                    "tokens=1024", "total"]
    rc, out, err = run_cli("time", "--json", traces / PREFILL)
    assert rc == 0, err
    (trace,) = json.loads(out)["traces"]
    assert [s["label"] for s in trace["segments"]] == PREFILL_LABELS
    assert all(s["wall_us"] > 0 for s in trace["segments"])
    assert [(s["unit"], s["size"]) for s in trace["segments"]] == [("tokens", 512), ("tokens", 64), ("tokens", 1024),
                                                                   ("tokens", 64)]


def test_check_reads_token_traces(traces: Path, run_cli: Run) -> None:
    rc, out, err = run_cli("check", "--json", traces)
    assert rc == 0, err
    result = json.loads(out)
    assert result["ok"] and sorted(g["runner"] for g in result["groups"]) == ["DecodeRunner", "PrefillRunner"]


def test_diff_pairs_token_segments_by_label(traces: Path, tmp_path: Path, run_cli: Run) -> None:
    """Another capture with a different token count: the shared labels pair, the new one is B's only."""
    other = _write_traces(tmp_path, prefill_sizes=(512, 64, 2048))
    rc, out, err = run_cli("diff", "--json", traces / PREFILL, other / PREFILL)
    assert rc in (0, 1), err
    segments = {s["label"]: s["status"] for s in json.loads(out)["segments"]}
    assert segments["tokens=512"] == "same" and segments["tokens=64,prefix_num_chunks=2"] == "same"
    assert segments["tokens=1024"] == "only_a" and segments["tokens=2048"] == "only_b"
