"""``check`` notices a rank that wrote nothing, from the sizes in the metadata (without them a missing
highest rank looks like a smaller group)."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest

from mixins.formats import TRACE_PREFIX, TRACE_SUFFIX, rank_tag
from tests.trace_files import load_trace, with_meta

ONE = "only one rank: nothing to compare"
UNKNOWN = "TP size unknown (trace written without it: an older or foreign trace): completeness not checked"
TP2, PP2, DP2 = {"tp_size": 2}, {"tp_size": 2, "pp_size": 2}, {"tp_size": 2, "dp_size": 2}


def _copy_with_meta(src: Path, directory: Path, **changes: Any) -> Path:
    """A real trace of the fixture with its ``capture_trace`` metadata changed (None removes a key), named
    as the exporter names it for those ranks (a data-parallel replica's name and metadata both say so)."""
    f = {**load_trace(src)["capture_trace"], **changes}
    tag = rank_tag(f["tp_rank"], f["pp_rank"], f.get("pp_size") or 1, f.get("dp_rank"))
    return with_meta(src, directory / f"{TRACE_PREFIX}DecodeCudaGraphRunner{tag}{TRACE_SUFFIX}", **changes)


# (copies: fixture trace and metadata changes; exit code; what the text says; per group: run suffix, dp_rank,
# ranks, tp_size, ok, complete, problems, notes)
CASES: dict[str, Any] = {
    # before: TP-0 present, TP-1 deleted printed ok and exited 0
    "missing highest rank": ([("r0", TP2)], 1, ["DecodeCudaGraphRunner", "TP rank 1 missing (tp_size 2)"],
                             [("", None, [0], 2, False, False, ["TP rank 1 missing (tp_size 2)"], [ONE])]),
    "complete group": ([("r0", TP2), ("r1", TP2)], 0, [], [("", None, [0, 1], 2, True, True, [], [])]),
    "unknown sizes said plainly": ([("r0", {"tp_size": None})], 0, ["TP size unknown", "completeness not checked"],
                                   [("", None, [0], None, True, None, [], [UNKNOWN, ONE])]),
    "gap below the highest rank": ([("r0", {}), ("r1", {"tp_rank": 2})], 1, ["TP rank 1 missing (below TP 2)"],
                                   [("", None, [0, 2], None, False, False, ["TP rank 1 missing (below TP 2)"],
                                     [UNKNOWN])]),
    # a rank's size is its server's: ranks that disagree come from two server starts (two runs), each incomplete
    "disagreeing sizes": ([("r0", TP2), ("r1", {"tp_size": 4})], 1, [], [
        (" #1", None, [0], 2, False, False, ["TP rank 1 missing (tp_size 2)"], [ONE]),
        (" #2", None, [1], 4, False, False, ["TP ranks 0, 2, 3 missing (tp_size 4)"], [ONE]),
    ]),
    "a rank beyond the size": ([("r0", TP2), ("r1", {"tp_size": 1})], 1, ["TP rank 1 outside tp_size 1"], [
        (" #1", None, [0], 2, False, False, ["TP rank 1 missing (tp_size 2)"], [ONE]),
        (" #2", None, [1], 1, False, False, ["TP rank 0 missing (tp_size 1)", "TP rank 1 outside tp_size 1"], [ONE]),
    ]),
    "a whole missing pipeline stage": (
        [(r, {**PP2, "pp_rank": 0}) for r in ("r0", "r1")], 1,
        ["PP rank 1 missing (pp_size 2): no trace of any TP rank"],
        [("", None, [0, 1], 2, False, False, ["PP rank 1 missing (pp_size 2): no trace of any TP rank"], [])],
    ),
    # a rank's pp_size 2, the other's 3: either way a stage is missing (it said ok)
    "disagreeing pp sizes": ([("r0", PP2), ("r1", {**PP2, "pp_size": 3})], 1, ["traces disagree on pp_size (2, 3)"],
                             [("", None, [0, 1], 2, False, False, ["traces disagree on pp_size (2, 3): completeness "
                                                                   "not checked"], [])]),
    "both pipeline stages": ([(r, {**PP2, "pp_rank": p}) for p in (0, 1) for r in ("r0", "r1")], 0, [],
                             [("", None, [0, 1], 2, True, True, [], [])] * 2),
    # before: two replicas' TP 0 failed as "2 traces claim TP rank 0" and TP 1 likewise
    "two replicas": ([(r, {**DP2, "dp_rank": d}) for d in (0, 1) for r in ("r0", "r1")], 0, ["DP 1"],
                     [("", d, [0, 1], 2, True, True, [], []) for d in (0, 1)]),
    "a replica missing a rank": ([("r0", {**DP2, "dp_rank": 0}), ("r1", {**DP2, "dp_rank": 0}),
                                  ("r0", {**DP2, "dp_rank": 1})], 1, ["DP 1", "TP rank 1 missing (tp_size 2)"], [
        ("", 0, [0, 1], 2, True, True, [], []),
        ("", 1, [0], 2, False, False, ["TP rank 1 missing (tp_size 2)"], [ONE]),
    ]),
    "a whole missing replica": ([(r, {**DP2, "dp_rank": 0}) for r in ("r0", "r1")], 1,
                                ["DP rank 1 missing (dp_size 2): no trace of any TP rank"],
                                [("", 0, [0, 1], 2, False, False,
                                  ["DP rank 1 missing (dp_size 2): no trace of any TP rank"], [])]),
}


@pytest.mark.parametrize("case", CASES)
def test_check_says_which_rank_is_missing(cpu_traces, run_cli, tmp_path: Path, case: str) -> None:  # type: ignore[no-untyped-def]
    copies, rc, said, want = CASES[case]
    for src, changes in copies:
        _copy_with_meta(cpu_traces[src], tmp_path, **changes)
    code, text, _ = run_cli("check", tmp_path)
    assert code == rc and all(s in text for s in said), text
    code, out, _ = run_cli("check", tmp_path, "--json")
    got = [(g["run"].removeprefix(str(tmp_path)), g["dp_rank"], g["ranks"], g["tp_size"], g["ok"], g["complete"],
            g["problems"], g["notes"]) for g in json.loads(out)["groups"]]
    assert (code, got) == (rc, want)
