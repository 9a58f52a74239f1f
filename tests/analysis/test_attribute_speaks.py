"""``attribute`` speaks up: the low-coverage warning and its cause, progress on a
terminal only, "written to" lines, and the ``--group-by`` views — on the real vLLM pair, the real H100
trace given as a (wrong) capture, and pairs DERIVED from them (pairs.py; each test says so)."""

from __future__ import annotations

import base64
import csv
import io
import json
import os
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest
from on_a_terminal import run_on_a_terminal
from pairs import DATA, H100, VLLM_CAPTURE, VLLM_REPLAY, load, rotate_names, save, with_rank

REPO = Path(__file__).resolve().parents[2]
GOLDEN = DATA / "vllm_decode_full_attribute_main.json"


@pytest.fixture(scope="module")
def real() -> dict[str, Any]:
    return {"capture": load(VLLM_CAPTURE), "replay": load(VLLM_REPLAY)}


# -- (a) the low-coverage warning -------------------------------------------------------------------


def test_a_plain_profile_given_as_the_capture_is_refused_by_its_role(run_cli: Any) -> None:
    """The replay against a trace with no CUDA-graph content (the real H100 inference trace) attributed no
    graph kernel, warned, and exited 0 (or 1 under --min-coverage): a confident answer about the wrong
    file. Its role is read first now: one line naming it, exit 2, nothing on stdout."""
    for extra in ((), ("--json",), ("--min-coverage", "0.02")):
        rc, out, err = run_cli("attribute", VLLM_REPLAY, H100, *extra)
        assert (rc, out) == (2, "")
        assert err == (
            f"capture-trace: error: {H100}: holds no CUDA-graph content (no capture window, no graph launch): "
            "it is a plain profile; CAPTURE takes the traces taken at start-up, with CUDA-graph capture\n"
        )


def test_a_fully_attributed_replay_meets_min_coverage_1(run_cli: Any) -> None:
    """The two totals are float sums of the same kernels in different orders (10717.708000000004 and
    …008 µs): compared as shown, to the ns, 421/421 kernels and all GPU time attributed meets 1.0."""
    rc, out, err = run_cli("attribute", VLLM_REPLAY, VLLM_CAPTURE, "--json", "--min-coverage", "1")
    cov = json.loads(out)["coverage"]
    assert cov["attributed_us"] == cov["gpu_time_us"] and cov["graph_kernels_attributed"] == cov["graph_kernels"]
    assert (rc, err) == (0, "")


def test_the_replay_given_as_the_capture_is_named_as_such(run_cli: Any) -> None:
    rc, _, err = run_cli("attribute", VLLM_REPLAY, VLLM_REPLAY)
    assert (rc, err) == (
        2,
        f"capture-trace: error: {VLLM_REPLAY}: holds graph launches and no capture windows: it is a replay "
        "(serving) trace; it is REPLAY already: give its captures after it\n",
    )


@pytest.mark.parametrize(("option", "value", "expected"), [
    *((option, "", "a file name ('-' for stdout), got an empty one") for option in ("--csv", "--annotate")),
    ("--min-coverage", "1.5", "a fraction between 0 and 1, got 1.5"),
])
def test_a_bad_option_value_is_one_line(run_cli: Any, option: str, value: str, expected: str) -> None:
    """``--csv "$OUT"`` with OUT unset wrote nothing and said nothing (exit 0); a coverage above 1."""
    rc, out, err = run_cli("attribute", VLLM_REPLAY, VLLM_CAPTURE, option, value)
    assert (rc, out, err) == (2, "", f"capture-trace: error: {option}: expected {expected}\n")


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


# -- (c) "written to" lines ----------------------------------------------------------------------------


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


def test_nothing_said_when_the_output_is_stdout(tmp_path: Path) -> None:
    """``-`` and ``/dev/stdout`` write to descriptor 1 itself: a real child process, its stdout a pipe."""
    env = {**os.environ, "PYTHONPATH": str(REPO)}
    argv = [sys.executable, "-m", "mixins", "attribute", str(VLLM_REPLAY), str(VLLM_CAPTURE), "--json"]
    for extra in (["--csv", "-"], ["--csv", "/dev/stdout"], ["--annotate", "/dev/stdout"]):
        done = subprocess.run(argv + extra, capture_output=True, text=True, env=env, timeout=300)
        assert (done.returncode, done.stderr) == (0, ""), extra
        assert "vllm::moe_forward" in done.stdout


# -- (d) --group-by ------------------------------------------------------------------------------------


def _json(run_cli: Any, *argv: Any) -> dict[str, Any]:
    rc, out, err = run_cli("attribute", *argv, "--json")
    assert rc == 0, err
    result: dict[str, Any] = json.loads(out)
    return result


def test_default_json_is_byte_identical_to_mains(run_cli: Any, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.chdir(DATA)
    rc, out, _ = run_cli("attribute", VLLM_REPLAY.name, VLLM_CAPTURE.name, "--json")
    assert rc == 0 and out == GOLDEN.read_text()


@pytest.mark.parametrize("by", ["op", "module", "shape", "segment"])
def test_every_view_adds_up_to_the_attributed_time(run_cli: Any, by: str, tmp_path: Path) -> None:
    rows_csv = tmp_path / "rows.csv"
    res = _json(run_cli, VLLM_REPLAY, VLLM_CAPTURE, "--group-by", by, "--csv", rows_csv)
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
    res = _json(run_cli, VLLM_REPLAY, VLLM_CAPTURE, "--group-by", "module")
    top = res["groups"]["rows"][0]
    assert (top["module"], top["ops"], top["kernels"]) == ("nn.Module: GraphModule", 14, 421)
    graph = sum(op["gpu_time_us"] for op in res["ops"] if op["module"] == "nn.Module: GraphModule")
    assert top["gpu_time_us"] == pytest.approx(graph, abs=0.01)
    res = _json(run_cli, VLLM_REPLAY, VLLM_CAPTURE, "--group-by", "shape")
    moe = next(r for r in res["groups"]["rows"] if r["name"] == "vllm::moe_forward")
    assert (moe["input_dims"][0], moe["count"], moe["kernels"]) == ([32, 3072], 24, 72)
    assert set(moe) == {"name", "input_dims", "input_types", "ops", "kernels", "count", "gpu_time_us", "mean_us"}
    rc, out, err = run_cli("attribute", VLLM_REPLAY, VLLM_CAPTURE, "--group-by", "module")
    assert (rc, err) == (0, "")
    assert f"{VLLM_REPLAY}: modules by GPU time" in out and "nn.Module: GraphModule" in out
    assert "vllm::moe_forward" not in out  # the view replaces the op rows
    assert "coverage: graph kernels 421/421 attributed" in out


# -- (b) progress on a terminal only ------------------------------------------------------------------


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
    env = {**os.environ, "PYTHONPATH": str(REPO), "TERM": "xterm-256color", "COLUMNS": "120"}
    done = run_on_a_terminal([sys.executable, "-m", "mixins", "attribute", *argv], env, on_terminal=("stderr",))
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
    env = {**os.environ, "PYTHONPATH": str(REPO), "TERM": "xterm-256color"}
    done = subprocess.run(
        [sys.executable, "-m", "mixins", "attribute", str(big_replay), str(VLLM_CAPTURE), "--top", "1"],
        capture_output=True, text=True, env=env, timeout=300,
    )
    assert (done.returncode, done.stderr) == (0, "")
    assert io.StringIO(done.stdout).readline().startswith(f"{big_replay}: ops by GPU time")
    assert "vllm::moe_forward" in done.stdout and "coverage: graph kernels 421/421 attributed" in done.stdout


def test_readme_examples_are_the_real_output(run_cli: Any, monkeypatch: pytest.MonkeyPatch) -> None:
    """The README's ``--group-by module`` table and warning line, re-run from tests/data."""
    text = (REPO / "README.md").read_text()
    start = text.index("$ capture-trace attribute vllm_decode_full_graph_replay_rank_0.json.gz vllm_decode_full_"
                       "graph_capture_rank_0.json.gz --group-by module\n")
    block = text[start:text.index("```", start)].splitlines()
    (second,) = [n for n, line in enumerate(block) if n and line.startswith("$ ")]
    monkeypatch.chdir(DATA)
    rc, out, err = run_cli(*block[0].split()[2:])
    assert (rc, err) == (0, "") and out.splitlines() == block[1:second]
    rc, _, err = run_cli(*block[second].split(">")[0].split()[2:])
    assert rc == 2 and err.splitlines() == block[second + 1:]  # a plain profile is no capture
