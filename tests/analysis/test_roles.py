"""Roles, runs and units (docs/DESIGN.md §7.4): each command reads the kind of trace it is about and says
so in one line when given another; ranks are checked within one server start; vLLM's sizes are tokens.

All on the real traces of tests/data (a vLLM capture, its replay, the H100 plain profile) and copies of
them into folders (before/ after/): nothing here is generated except where a test says DERIVED.
"""

from __future__ import annotations

import itertools
import json
import re
import shutil
from pathlib import Path
from typing import Any

import pytest
from pairs import DATA, H100, VLLM_CAPTURE, VLLM_REPLAY, as_ours, load, save, with_rank

from mixins.analysis.model.roles import CAPTURE, PROFILE, REPLAY

Run = Any
REAL = {"capture": VLLM_CAPTURE, "replay": VLLM_REPLAY, "profile": H100}
ROLE_LINE = re.compile(r"it is a (capture|replay \(serving\) trace|plain profile|foreign trace);")


def test_swapped_attribute_arguments_are_refused_by_role(run_cli: Run) -> None:
    """The issue's case: the capture given as REPLAY and the replay as CAPTURE printed "graph kernels 0/0
    attributed, GPU time … (100.0 %)" and exit 0, even under --min-coverage 0.95."""
    rc, out, err = run_cli("attribute", "--min-coverage", "0.95", VLLM_CAPTURE, VLLM_REPLAY)
    assert (rc, out) == (2, "")
    assert err == (
        f"capture-trace: error: {VLLM_REPLAY}: holds graph launches and no capture windows: it is a replay "
        "(serving) trace; give it as REPLAY, the first argument, and its captures after it\n"
    )


def test_a_capture_given_as_the_replay_says_give_it_as_capture(run_cli: Run, tmp_path: Path) -> None:
    """The issue's line, for upstream's per-batch-size file given as REPLAY (and the capture again)."""
    cap = shutil.copy(VLLM_CAPTURE, tmp_path / "bs_32_rank0.json.gz")
    rc, out, err = run_cli("attribute", cap, cap)
    assert (rc, out) == (2, "")
    assert err == (
        f"capture-trace: error: {cap}: holds capture windows and no graph launches: it is a capture; "
        "give it as CAPTURE, the replay first\n"
    )


def test_time_on_a_replay_refuses_instead_of_reporting_warm_up(run_cli: Run) -> None:
    """`time REPLAY` said "warmup 463.44 (100%)", windows 0."""
    for extra in ((), ("--json",)):
        rc, out, err = run_cli("time", VLLM_REPLAY, *extra)
        assert (rc, out) == (2, "")
        assert "it is a replay (serving) trace; time reads captures" in err and len(err.splitlines()) == 1
        assert "warm" not in err
    rc, out, _ = run_cli("time", H100)  # a plain profile: its eager passes are what time shows
    assert rc == 0 and "warmup" in out


def test_check_of_a_folder_with_a_capture_its_replay_and_a_profile_invents_no_rank_conflict(
    run_cli: Run, tmp_path: Path
) -> None:
    """`check` on the shared data folder said "3 traces claim TP rank 0", "TP 0 diverges from TP 0",
    exit 1: the replay and a serving trace were compared as ranks of the capture."""
    for p in REAL.values():
        shutil.copy(p, tmp_path / p.name)
    rc, out, err = run_cli("check", tmp_path, "--json")
    assert rc == 0, err
    doc = json.loads(out)
    assert doc["ok"] and [g["paths"] for g in doc["groups"]] == [[str(tmp_path / VLLM_CAPTURE.name)]]
    assert not any(g["problems"] or g["divergences"] for g in doc["groups"])
    skipped = [line for line in err.splitlines() if ": skipped: " in line]
    assert len(skipped) == 2 and all(line.startswith("capture-trace: info: ") for line in skipped)
    assert {ROLE_LINE.search(line)[1] for line in skipped} == {"replay (serving) trace", "plain profile"}  # type: ignore[index]


def test_a_folder_of_only_replays_is_an_error_for_check(run_cli: Run, tmp_path: Path) -> None:
    shutil.copy(VLLM_REPLAY, tmp_path / VLLM_REPLAY.name)
    rc, out, err = run_cli("check", tmp_path)
    assert (rc, out) == (2, "")
    assert err.splitlines()[-1] == (
        f"capture-trace: error: {tmp_path}: no capture traces in this directory (1 replay (serving) trace skipped)"
    )


@pytest.fixture
def before_after(tmp_path: Path) -> tuple[Path, Path]:
    """The same capture copied into before/ and after/ (two runs), run from their parent."""
    before, after = tmp_path / "before", tmp_path / "after"
    for d in (before, after):
        d.mkdir()
        shutil.copy(VLLM_CAPTURE, d / VLLM_CAPTURE.name)
    return before, after


def test_before_and_after_copies_are_two_runs_each_fine(run_cli: Run, before_after: tuple[Path, Path]) -> None:
    """`check before after` said "2 traces claim TP rank 0" and failed."""
    before, after = before_after
    rc, out, err = run_cli("check", before, after, "--json")
    assert (rc, err) == (0, "")
    doc = json.loads(out)
    assert doc["ok"] and [(g["run"], g["problems"]) for g in doc["groups"]] == [(str(before), []), (str(after), [])]
    rc, out, _ = run_cli("check", before, after)
    assert rc == 0 and "claim" not in out and str(before) in out and str(after) in out


def test_time_sets_two_runs_side_by_side(run_cli: Run, before_after: tuple[Path, Path]) -> None:
    before, after = before_after
    rc, out, err = run_cli("time", before, after, "--json")
    assert (rc, err) == (0, "")
    doc = json.loads(out)
    assert [(t["run"], t["role"]) for t in doc["traces"]] == [(str(before), CAPTURE), (str(after), CAPTURE)]
    assert doc["runs"] == [str(before), str(after)]
    (row,) = doc["comparison"]
    wall = doc["traces"][0]["segments"][0]["wall_us"]
    assert (row["label"], row["unit"], row["size"], row["wall_us"], row["change"]) == (
        "tokens=32,variant=FULL", "tokens", 32, [wall, wall], [0.0, 0.0]
    )
    rc, out, _ = run_cli("time", before, after)
    assert rc == 0 and f"run {before} vs run {after}" in out and "+0.0%" in out


def test_one_run_keeps_time_json_as_it_was_plus_run_and_role(run_cli: Run) -> None:
    rc, out, _ = run_cli("time", VLLM_CAPTURE, "--json")
    doc = json.loads(out)
    assert rc == 0 and set(doc) == {"note", "traces"}  # no "runs" / "comparison" with one run
    (t,) = doc["traces"]
    assert (t["role"], t["run"]) == (CAPTURE, str(DATA))


def test_diff_of_two_folders_pairs_by_runner_and_rank(run_cli: Run, before_after: tuple[Path, Path]) -> None:
    before, after = before_after
    rc, out, err = run_cli("diff", before, after, "--json")
    assert (rc, err) == (0, "")
    doc = json.loads(out)
    (pair,) = doc["pairs"]
    assert doc["same"] and (pair["a"], pair["b"], pair["tp_rank"]) == (
        str(before / VLLM_CAPTURE.name), str(after / VLLM_CAPTURE.name), 0
    )
    (after / VLLM_CAPTURE.name).unlink()
    save(with_rank(load(VLLM_CAPTURE), 1), after / "rank_1.json.gz")  # DERIVED: the same capture as rank 1
    rc, out, _ = run_cli("diff", before, after, "--json")
    doc = json.loads(out)
    assert rc == 1 and [(p["a"] is None, p["b"] is None) for p in doc["pairs"]] == [(False, True), (True, False)]


def test_summary_json_says_role_and_run(run_cli: Run) -> None:
    rc, out, _ = run_cli("summary", *REAL.values(), "--json", "--top", "0")
    got = [(t["role"], t["run"]) for t in json.loads(out)["traces"]]
    assert rc == 0 and got == [(CAPTURE, str(DATA)), (REPLAY, str(DATA)), (PROFILE, str(DATA))]


def test_vllm_sizes_are_tokens_everywhere(run_cli: Run) -> None:
    """vLLM V1 keys its graphs by num_tokens: `capture_32_FULL` was shown as bs=32, "unit": "bs"."""
    rc, out, _ = run_cli("summary", VLLM_CAPTURE, "--json")
    seg = json.loads(out)["traces"][0]["segments"][0]
    want = ("tokens=32,variant=FULL", None, "tokens", 32)
    assert rc == 0 and (seg["label"], seg["bs"], seg["unit"], seg["size"]) == want
    rc, out, _ = run_cli("time", VLLM_CAPTURE, "--json")
    seg = json.loads(out)["traces"][0]["segments"][0]
    assert rc == 0 and (seg["label"], seg["bs"], seg["unit"]) == ("tokens=32,variant=FULL", None, "tokens")
    rc, out, _ = run_cli("attribute", VLLM_REPLAY, VLLM_CAPTURE, "--json")
    assert rc == 0 and {op["segment"] for op in json.loads(out)["ops"] if op["source"] == "graph"} == {
        "tokens=32,variant=FULL"
    }
    rc, out, _ = run_cli("summary", VLLM_CAPTURE)
    assert "bs=32" not in out and "tokens=32" in out


def test_no_graph_kernel_is_never_a_pass_nor_100_percent(run_cli: Run, tmp_path: Path) -> None:
    """DERIVED: the real replay with its graph kernels' records removed (graph launches whose kernels were
    not recorded): eager work alone is no coverage of the graphs."""
    rep = load(VLLM_REPLAY)
    launch = next(e for e in rep["traceEvents"] if "GraphLaunch" in e.get("name", ""))
    corr = launch["args"]["correlation"]
    rep["traceEvents"] = [
        e for e in rep["traceEvents"]
        if not (e.get("cat") == "kernel" and e.get("args", {}).get("correlation") == corr)
    ]
    path = save(rep, tmp_path / "replay_no_graph_kernels.json.gz")
    rc, out, err = run_cli("attribute", "--min-coverage", "0.5", path, VLLM_CAPTURE)
    assert rc == 1 and "100.0 %" not in out and "no graph kernel in this replay" in out
    assert "no graph kernel recorded" in err


# -- the property: every command, every pair of real traces --------------------------------------------

# (command, how it is given one or two files) -> the roles of each position it reads
_COMMANDS: dict[str, tuple[Any, tuple[set[str], ...]]] = {
    "time": (lambda a, b: ["time", a], ({CAPTURE, PROFILE},)),
    "check": (lambda a, b: ["check", a], ({CAPTURE},)),
    "diff": (lambda a, b: ["diff", a, b], ({CAPTURE}, {CAPTURE})),
    "attribute": (lambda a, b: ["attribute", a, b], ({REPLAY}, {CAPTURE})),
    "summary": (lambda a, b: ["summary", a, b], ({CAPTURE, REPLAY, PROFILE}, {CAPTURE, REPLAY, PROFILE})),
}


@pytest.mark.parametrize("command", sorted(_COMMANDS))
def test_every_command_refuses_every_wrong_role_in_one_line(run_cli: Run, command: str) -> None:
    """For every ordered pair of the real traces: a file of a role the command does not read in its place
    is exit 2 and one stderr line naming that role per wrong file — never exit 0 with a number."""
    argv_of, reads = _COMMANDS[command]
    for (ra, a), (rb, b) in itertools.product(REAL.items(), repeat=2):
        argv = argv_of(a, b)
        given = [ra, rb][: len(reads)]
        wrong = [r for r, ok in zip(given, reads, strict=True) if r not in ok]
        rc, out, err = run_cli(*argv)
        if not wrong:
            assert rc in (0, 1), (argv, err)
            continue
        lines = err.splitlines()
        assert (rc, out) == (2, ""), argv
        assert 1 <= len(lines) <= len(wrong) and all(ROLE_LINE.search(line) for line in lines), (argv, err)
        if command == "diff" and len(set(wrong)) == 1 and a == b:
            continue
        assert any(
            {"capture": "capture", "replay": "replay (serving) trace", "profile": "plain profile"}[w] in err
            for w in wrong
        ), (argv, err)


def test_ranks_of_one_server_on_two_hosts_are_one_run(run_cli: Run, tmp_path: Path) -> None:
    """A multi-node server's ranks, collected into one folder, differ in host only: one run, checked
    together (a run keyed by host made each node a run of its own, with its other ranks 'missing')."""
    doc = load(VLLM_CAPTURE)
    for rank, host in ((0, "node-a"), (1, "node-b")):
        ours = as_ours(doc, "DecodeCudaGraphRunner", rank)
        ours["capture_trace"] |= {"hostname": host, "tp_size": 2, "world_size": 2}
        save(ours, tmp_path / f"cuda_graph_capture-DecodeCudaGraphRunner-TP-{rank}.json.gz")
    rc, out, err = run_cli("check", tmp_path, "--json")
    assert (rc, err) == (0, "")
    (group,) = json.loads(out)["groups"]
    assert group["problems"] == []
    traces = json.loads(run_cli("summary", tmp_path, "--json")[1])["traces"]
    assert len({t["run"] for t in traces}) == 1
