"""``check`` notices a rank that wrote nothing, from the sizes in the metadata (without them a missing
highest rank looks like a smaller group)."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

from tests.trace_files import load_trace, with_meta

NAME = "cuda_graph_capture-DecodeCudaGraphRunner-TP-{tp}{pp}.json.gz"


def _copy_with_meta(src: Path, directory: Path, **changes: Any) -> Path:
    """A real trace of the fixture with its ``capture_trace`` metadata changed (None removes a key), named
    as its ranks say."""
    fields = {**load_trace(src)["capture_trace"], **changes}
    pp = f"-PP-{fields['pp_rank']}" if (fields.get("pp_size") or 1) > 1 else ""
    return with_meta(src, directory / NAME.format(tp=fields["tp_rank"], pp=pp), **changes)


def test_missing_highest_rank_fails_naming_runner_and_rank(cpu_traces, run_cli, tmp_path: Path) -> None:  # type: ignore[no-untyped-def]
    """Before: TP-0 present, TP-1 deleted printed ok and exited 0."""
    _copy_with_meta(cpu_traces["r0"], tmp_path, tp_size=2)
    rc, text, _ = run_cli("check", tmp_path)
    assert rc == 1
    assert "DecodeCudaGraphRunner" in text and "TP rank 1 missing (tp_size 2)" in text
    rc, out, _ = run_cli("check", tmp_path, "--json")
    (group,) = json.loads(out)["groups"]
    assert rc == 1 and group["ok"] is False and group["complete"] is False and group["tp_size"] == 2


def test_complete_group_passes_and_says_so(cpu_traces, run_cli, tmp_path: Path) -> None:  # type: ignore[no-untyped-def]
    _copy_with_meta(cpu_traces["r0"], tmp_path, tp_size=2)
    _copy_with_meta(cpu_traces["r1"], tmp_path, tp_size=2)
    rc, out, _ = run_cli("check", tmp_path, "--json")
    (group,) = json.loads(out)["groups"]
    assert rc == 0 and group["complete"] is True and group["problems"] == [] and group["notes"] == []


def test_unknown_sizes_are_said_plainly(cpu_traces, run_cli, tmp_path: Path) -> None:  # type: ignore[no-untyped-def]
    _copy_with_meta(cpu_traces["r0"], tmp_path, tp_size=None)  # a trace written before sizes were recorded
    rc, text, _ = run_cli("check", tmp_path)
    assert rc == 0
    assert "TP size unknown" in text and "completeness not checked" in text
    rc, out, _ = run_cli("check", tmp_path, "--json")
    assert json.loads(out)["groups"][0]["complete"] is None


def test_a_gap_below_the_highest_rank_fails_even_without_sizes(cpu_traces, run_cli, tmp_path: Path) -> None:  # type: ignore[no-untyped-def]
    _copy_with_meta(cpu_traces["r0"], tmp_path)
    _copy_with_meta(cpu_traces["r1"], tmp_path, tp_rank=2)
    rc, text, _ = run_cli("check", tmp_path)
    assert rc == 1 and "TP rank 1 missing (below TP 2)" in text


def test_disagreeing_sizes_and_ranks_beyond_the_size_fail(cpu_traces, run_cli, tmp_path: Path) -> None:  # type: ignore[no-untyped-def]
    _copy_with_meta(cpu_traces["r0"], tmp_path, tp_size=2)
    _copy_with_meta(cpu_traces["r1"], tmp_path, tp_size=4)
    rc, out, _ = run_cli("check", tmp_path, "--json")
    groups = json.loads(out)["groups"]
    # a rank's size is its server's: ranks that disagree come from two server starts (two runs), each incomplete
    assert rc == 1 and len({g["run"] for g in groups}) == 2
    assert all(g["problems"] for g in groups)
    assert [p for g in groups for p in g["problems"] if "tp_size 2" in p] == ["TP rank 1 missing (tp_size 2)"]
    _copy_with_meta(cpu_traces["r1"], tmp_path, tp_size=1)
    rc, out, _ = run_cli("check", tmp_path, "--json")
    assert rc == 1


def test_a_whole_missing_pipeline_stage_fails(cpu_traces, run_cli, tmp_path: Path) -> None:  # type: ignore[no-untyped-def]
    for src in ("r0", "r1"):
        _copy_with_meta(cpu_traces[src], tmp_path, tp_size=2, pp_size=2, pp_rank=0)
    rc, text, _ = run_cli("check", tmp_path)
    assert rc == 1 and "PP rank 1 missing (pp_size 2): no trace of any TP rank" in text
    for src in ("r0", "r1"):
        _copy_with_meta(cpu_traces[src], tmp_path, tp_size=2, pp_size=2, pp_rank=1)
    rc, _, _ = run_cli("check", tmp_path)
    assert rc == 0


def _replica(src: Path, directory: Path, dp: int, **changes: Any) -> Path:
    """A real trace as data-parallel replica ``dp`` wrote it: the name and the metadata say so."""
    path = _copy_with_meta(src, directory, dp_rank=dp, dp_size=2, **changes)
    return path.rename(path.with_name(path.name.replace(".json.gz", f"-DP-{dp}.json.gz")))


def test_two_replicas_are_replicas_not_two_claims_to_one_rank(cpu_traces, run_cli, tmp_path: Path) -> None:  # type: ignore[no-untyped-def]
    """Before: two replicas' TP 0 failed as "2 traces claim TP rank 0" and TP 1 likewise."""
    for dp in (0, 1):
        _replica(cpu_traces["r0"], tmp_path, dp, tp_size=2)
        _replica(cpu_traces["r1"], tmp_path, dp, tp_size=2)
    rc, out, _ = run_cli("check", tmp_path, "--json")
    groups = json.loads(out)["groups"]
    assert rc == 0, out
    assert [(g["dp_rank"], g["ranks"], g["complete"], g["problems"]) for g in groups] == [
        (0, [0, 1], True, []), (1, [0, 1], True, [])
    ]
    rc, text, _ = run_cli("check", tmp_path)
    assert rc == 0 and "claim" not in text and "DP 1" in text


def test_a_replica_missing_a_rank_or_missing_whole_fails(cpu_traces, run_cli, tmp_path: Path) -> None:  # type: ignore[no-untyped-def]
    _replica(cpu_traces["r0"], tmp_path, 0, tp_size=2)
    _replica(cpu_traces["r1"], tmp_path, 0, tp_size=2)
    _replica(cpu_traces["r0"], tmp_path, 1, tp_size=2)
    rc, text, _ = run_cli("check", tmp_path)
    assert rc == 1 and "DP 1" in text and "TP rank 1 missing (tp_size 2)" in text
    for path in tmp_path.glob("*-DP-1.json.gz"):
        path.unlink()
    rc, text, _ = run_cli("check", tmp_path)
    assert rc == 1 and "DP rank 1 missing (dp_size 2): no trace of any TP rank" in text
