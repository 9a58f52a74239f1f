"""Attacks on the analyzer (it often runs as root over shared folders), each performed for real through the
CLI in a child process: output targets that are not files, unbounded ranks, a whitespace bomb, hostile side
files and metadata, an early-closed pipe, non-finite numbers, terminal escapes, FIFOs and links.
"""

from __future__ import annotations

import gzip
import json
import os
import shutil
import socket
import stat
import subprocess
import threading
from pathlib import Path
from typing import Any

import pytest
from analysis_child import REPO, bounded, broken_pipe, child_env, command, run_child
from hostile_shapes import gzip_members
from on_a_terminal import run_on_a_terminal

from tests.trace_files import meta, op, span, write_trace

DATA = Path(__file__).resolve().parents[1] / "data"
VLLM_CAPTURE = DATA / "vllm_decode_full_graph_capture_rank_0.json.gz"
VLLM_REPLAY = DATA / "vllm_decode_full_graph_replay_rank_0.json.gz"
MIB = 1 << 20

# What a hostile name or string carries: clear screen, a colour, an OSC window title, a C1 CSI, a newline.
PAYLOAD = "\x1b[2J\x1b[31mred\x1b]0;owned\x07\x9b1m\nx"
RAW_BITS = ("\x1b[2J", "\x1b[31m", "\x1b]0;", "\x07", "\x9b")


def cli(*argv: Any, timeout: float = 120) -> subprocess.CompletedProcess[str]:
    return run_child("analyzer_cli", *argv, timeout=timeout)


def one_error(proc: subprocess.CompletedProcess[str], path: Any, what: str) -> None:
    assert proc.returncode == 2, (proc.stdout, proc.stderr)
    assert "Traceback" not in proc.stderr
    assert proc.stderr.count("\n") == 1 and proc.stderr.startswith(f"capture-trace: error: {path}: {what}"), proc.stderr


# -- output targets -------------------------------------------------------------------------------------


def _attribute_to(target: Any, option: str) -> subprocess.CompletedProcess[str]:
    return cli("attribute", VLLM_REPLAY, VLLM_CAPTURE, option, target, "-j", "1")


class FifoReader:
    """A FIFO's read end opened before the writer runs (the handshake), plus a write end of our own so that
    EOF comes only when we close it; a thread drains it meanwhile, or takes one byte and closes it (``leave``)."""

    def __init__(self, path: Path, leave: bool = False) -> None:
        self.fd = os.open(path, os.O_RDONLY | os.O_NONBLOCK)
        os.set_blocking(self.fd, True)
        self.keep = os.open(path, os.O_WRONLY)
        self.chunks: list[bytes] = []
        self.thread = threading.Thread(target=self._one_byte_then_leave if leave else self._drain)
        self.thread.start()

    def _drain(self) -> None:
        while chunk := os.read(self.fd, 1 << 16):
            self.chunks.append(chunk)
        os.close(self.fd)

    def _one_byte_then_leave(self) -> None:
        os.read(self.fd, 1)
        os.close(self.fd)

    def finish(self) -> bytes:
        os.close(self.keep)
        self.thread.join()
        return b"".join(self.chunks)


def _make(target: str, path: Path) -> FifoReader | None:
    """``target`` made at ``path``; a FIFO's reader, started, unless nobody reads it."""
    if target == "device":  # a /dev/null-like node (root may mknod)
        try:
            os.mknod(path, stat.S_IFCHR | 0o666, os.makedev(1, 3))
        except PermissionError:
            pytest.skip("mknod needs CAP_MKNOD")
    elif target == "socket":
        with socket.socket(socket.AF_UNIX) as sock:
            sock.bind(str(path))  # the socket file stays after the socket is closed
    elif target == "directory":
        path.mkdir()
    else:
        os.mkfifo(path)
        return None if target == "FIFO nobody reads" else FifoReader(path, leave=target == "FIFO left early")
    return None


@pytest.mark.parametrize(("target", "option", "error"), [
    ("FIFO", "--csv", None), ("FIFO", "--annotate", None),
    ("FIFO nobody reads", "--csv", "cannot write: a FIFO that nobody is reading"),
    # the reader takes one byte and leaves: the rest (over a pipe's 64 KiB) meets EPIPE, that output's error
    # line (exit 2), not the stdout rule's 141
    ("FIFO left early", "--annotate", "cannot write: its reader closed it (broken pipe)"),
    ("device", "--csv", None), ("device", "--annotate", None),
    ("socket", "--csv", "cannot write: a socket, not a regular file"),
    ("directory", "--annotate", "cannot write: a directory, not a regular file"),
])
def test_an_output_that_is_not_a_file_is_written_in_place_or_refused(
    tmp_path: Path, target: str, option: str, error: str | None
) -> None:
    """Written into, or refused in one line, never a hang: the node stays what it was (a device its device
    number), nothing is created beside it, nothing inside a directory."""
    out = tmp_path / "out"
    reader = _make(target, out)
    before = os.lstat(out)
    try:
        proc = _attribute_to(out, option)
    finally:
        data = reader.finish() if reader is not None else b""
    after = os.lstat(out)
    assert (stat.S_IFMT(after.st_mode), after.st_rdev) == (stat.S_IFMT(before.st_mode), before.st_rdev)
    assert [p.name for p in tmp_path.iterdir()] == ["out"]  # no temp file beside it
    assert target != "directory" or list(out.iterdir()) == []
    if error is not None:
        one_error(proc, out, error)
    elif target == "FIFO" and option == "--csv":
        assert data.startswith(b"replay,name,module,") and data.count(b"\n") > 10
    elif target == "FIFO":
        assert sum("capture_op" in e.get("args", {}) for e in json.loads(data)["traceEvents"]) == 421
    assert proc.returncode == (2 if error else 0), proc.stderr


@pytest.mark.parametrize("name", ["-", "/dev/stdout"])
def test_csv_to_stdout_goes_to_descriptor_1(tmp_path: Path, name: str) -> None:
    """``-`` and ``/dev/stdout`` are this process's stdout (a pipe here): written, nothing renamed."""
    proc = _attribute_to(name, "--csv")
    assert proc.returncode == 0, proc.stderr
    assert "replay,name,module,input_dims" in proc.stdout  # the CSV, then the table
    assert stat.S_ISCHR(os.stat("/dev/null").st_mode)


# -- ranks and sizes ------------------------------------------------------------------------------------


def test_check_with_huge_ranks_and_sizes_is_one_line_per_file_and_bounded(tmp_path: Path) -> None:
    """Each bad rank or size is one line (exit 2), the good pair is still checked (at tp_size 65,536 its missing
    ranks are listed as runs, not 65,534 numbers), and nothing builds a range of 10^9 (a 1 GiB address-space
    limit)."""
    e = [op("aten::mm", 1.0)]
    name = "cuda_graph_capture-DecodeCudaGraphRunner-TP-{}.json.gz"
    bad = {
        write_trace(tmp_path / name.format(999999999), e): "TP rank in the file name 999999999 out of range (0..65535)",
        write_trace(tmp_path / name.format("9" * 200), e): "TP rank in the file name has 200 digits (at most 65535)",
        write_trace(tmp_path / "a.json.gz", e, meta(0, 10**9)): "tp_size 1000000000 out of range (1..65536)",
        write_trace(tmp_path / "b.json.gz", e, meta(10**9)): "tp_rank 1000000000 out of range (0..65535)",
        write_trace(tmp_path / "c.json.gz", e, meta(10**4000)): "tp_rank a 4001-digit number out of range (0..65535)",
        write_trace(tmp_path / "d.json.gz", e, None, distributedInfo={"rank": 0, "world_size": 10**9}):
            "distributedInfo.world_size 1000000000 out of range (1..65536)",
    }
    for rank in (0, 5):
        write_trace(tmp_path / name.format(rank), e, meta(rank, 1 << 16))
    proc, peak = bounded(1 << 30, "check", tmp_path, "-j", "1")
    assert proc.returncode == 2 and "Traceback" not in proc.stderr
    lines = proc.stderr.splitlines()
    assert len(lines) == len(bad)
    for path, what in bad.items():
        assert f"capture-trace: error: {path}: {what}" in lines, proc.stderr
    assert "TP ranks 1-4, 6-65535 missing (tp_size 65536)" in proc.stdout
    assert peak < 300 * MIB, peak


def test_ls_long_with_mistyped_metadata(tmp_path: Path) -> None:
    """``capture_bs: 5`` (not a list), a pid string, a version number: shown as unknown, no TypeError."""
    m = meta(0, 1, capture_bs=5, pid="x", torch_version=2, hostname=["h"], time_utc={"a": 1})
    write_trace(tmp_path / "cuda_graph_capture-R-TP-0.json.gz", [op("aten::mm", 1.0)], m)
    proc = cli("ls", "--long", tmp_path)
    assert proc.returncode == 0, proc.stderr
    assert "capture   #1\n" in proc.stdout and "torch not installed" in proc.stdout
    assert "host      ?, pid ?, device ?" in proc.stdout
    proc = cli("ls", "--json", tmp_path)
    got = json.loads(proc.stdout)["traces"][0]["metadata"]
    assert proc.returncode == 0 and got["tp_size"] == 1
    assert not {"capture_bs", "pid", "torch_version", "hostname", "time_utc"} & set(got)


# -- --annotate streams from the one descriptor -----------------------------------------------------------


@pytest.mark.exhaustive  # half a minute on 2 cores: .ci/run runs it (pytest -m exhaustive)
def test_annotate_whitespace_bomb_is_bounded(tmp_path: Path) -> None:
    """1 MB of gzip holding 1 GiB of whitespace after the replay's events, the child's whole address space:
    both reads of the replay (attribution, the annotated copy) stream it."""
    head, _, tail = gzip.decompress(VLLM_REPLAY.read_bytes()).rpartition(b"}")
    assert tail.strip() == b""
    replay = gzip_members(tmp_path / "replay-TP-0.json.gz", head, b" ", 1 << 30, b"}")
    assert replay.stat().st_size < 2 * MIB
    out = tmp_path / "annotated.json.gz"
    proc, peak = bounded(1 << 30, "attribute", replay, VLLM_CAPTURE, "--annotate", out, "-j", "1", "--json")
    assert proc.returncode == 0, proc.stderr
    with gzip.open(out) as f:
        got = json.load(f)
    assert sum("capture_op" in e.get("args", {}) for e in got["traceEvents"]) == 421
    assert peak < 400 * MIB, peak


def test_annotate_reads_the_file_attributed_even_if_swapped(
    run_cli: Any, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Right after attribution another file is renamed over the replay (a handshake): the annotated output
    is still the replay that was attributed."""
    from mixins.analysis.commands import attribute as attribute_cmd

    replay = tmp_path / "replay-TP-0.json.gz"
    shutil.copy(VLLM_REPLAY, replay)
    decoy = write_trace(tmp_path / "decoy.json.gz", [op("decoy", 1.0)])
    real = attribute_cmd.write_annotated

    def swap_then_annotate(*a: Any) -> Any:  # attribution is done; the annotated copy is next
        os.replace(decoy, replay)
        return real(*a)

    monkeypatch.setattr(attribute_cmd, "write_annotated", swap_then_annotate)
    out = tmp_path / "out.json"
    rc, _, err = run_cli("attribute", replay, VLLM_CAPTURE, "--annotate", out, "-j", "1", "--json")
    assert rc == 0, err
    got = json.loads(out.read_text())
    assert sum("capture_op" in e.get("args", {}) for e in got["traceEvents"]) == 421
    assert not any(e.get("name") == "decoy" for e in got["traceEvents"])


# -- execution_details.json -------------------------------------------------------------------------------


@pytest.mark.parametrize(("kind", "what"), [
    ("deep", "cannot read execution details: invalid JSON: nested too deeply"),
    ("huge", "cannot read execution details: larger than 16 MiB (the limit)"),
    ("fifo", "not a regular file (a FIFO)"),
])
def test_hostile_execution_details(tmp_path: Path, kind: str, what: str) -> None:
    caps = tmp_path / "caps"
    caps.mkdir()
    shutil.copy(VLLM_CAPTURE, caps / VLLM_CAPTURE.name)
    details = caps / "execution_details.json"
    if kind == "deep":
        details.write_text("[" * 100_000 + "]" * 100_000)
    elif kind == "huge":
        with open(details, "wb") as f:  # 180 MB, sparse: the cap is what is tested, not the disk
            f.truncate(180 * 1000 * 1000)
    else:
        os.mkfifo(details)
    proc, peak = bounded(1 << 30, "attribute", VLLM_REPLAY, caps, "-j", "1")
    one_error(proc, details, what)
    assert peak < 300 * MIB, peak


# -- EPIPE, non-finite numbers ----------------------------------------------------------------------------


@pytest.mark.parametrize("argv", [
    ["summary", "--json", "--top", "50", "DIR"], ["check", "DIR"], ["ls", "--long", "DIR"],
    ["--version"], ["--help"], ["summary", "--help"], ["doctor", "--no-import"],  # argparse's, and not ours
], ids=" ".join)
def test_reader_gone_exits_141_quietly(tmp_path: Path, argv: list[str]) -> None:
    """stdout is a pipe whose read end is closed before the command runs: exit 141, stderr empty."""
    shutil.copy(VLLM_CAPTURE, tmp_path / VLLM_CAPTURE.name)
    assert broken_pipe(*(tmp_path if a == "DIR" else a for a in argv)) == (141, "")


def test_huge_batch_sizes_in_labels_are_plain_text(tmp_path: Path) -> None:
    """5,000-digit sizes in capture labels (ours and vLLM's) and a replay's hints: never int() of them (past
    4,300 digits it raises); kept as text."""
    big = "9" * 5000
    events = [span(f"capture::bs={big}", 0.0, 10.0), op("aten::mm", 1.0),
              span(f"capture_{big}", 20.0, 10.0), op("aten::mm", 21.0),
              span(f"capture::tokens={big}", 40.0, 10.0), op("aten::mm", 41.0)]
    p = write_trace(tmp_path / "cuda_graph_capture-R-TP-0.json", events, meta(0, 1, runner="R"))
    for argv in (["summary", "--json", p], ["time", "--json", p]):
        proc = cli(*argv)
        assert proc.returncode == 0, proc.stderr
        # kept as text, cut where read like every text past reader.MAX_TEXT (4,096) characters
        assert f"bs={big[:4000]}" in proc.stdout and f"tokens={big[:4000]}" in proc.stdout
    # two runners: ``time`` sorts the rows of its side-by-side table by size (``segments.by_size``)
    write_trace(tmp_path / "cuda_graph_capture-S-TP-0.json",
          [span("capture::tokens=8", 0.0, 10.0), op("aten::mm", 1.0)], meta(0, 1, runner="S"))
    proc = cli("time", tmp_path)
    assert proc.returncode == 0, proc.stderr
    hinted = tmp_path / "replay.json.gz"
    doc = json.loads(gzip.decompress(VLLM_REPLAY.read_bytes()))
    doc["traceEvents"].append(span(f"replay::bs={big}", 0.0, 1e12))
    doc["traceEvents"].append(span(f"replay::tokens={big}", 0.0, 1e12))
    hinted.write_bytes(gzip.compress(json.dumps(doc).encode()))
    proc = cli("attribute", "--json", hinted, VLLM_CAPTURE, "-j", "1")
    assert proc.returncode == 0, proc.stderr
    assert json.loads(proc.stdout)["coverage"]["graph_kernels_attributed"] == 421


def test_json_output_is_strict(capsys: pytest.CaptureFixture[str]) -> None:
    """Whatever reaches ``print_json`` non-finite is written as null with one warning, never Infinity."""
    from mixins.analysis.render import print_json

    print_json({"gpu_time_us": float("inf"), "rows": [1.5, float("nan"), {"x": -float("inf")}]})
    out, err = capsys.readouterr()
    assert json.loads(out) == {"gpu_time_us": None, "rows": [1.5, None, {"x": None}]}
    assert err == "capture-trace: warning: 3 non-finite number(s) (an overflowing total?) written as null\n"


# -- terminal escapes -------------------------------------------------------------------------------------


@pytest.fixture(scope="module")
def hostile_dir(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """Two ranks whose file name, runner, op names, segment label and metadata carry PAYLOAD."""
    d = tmp_path_factory.mktemp("hostile")
    for rank in (0, 1):
        events = [
            span(f"capture::bs=1{PAYLOAD}", 0.0, 100.0),
            op(f"aten::mm{PAYLOAD}", 1.0), op("aten::add" if rank else f"aten::relu{PAYLOAD}", 3.0),
        ]
        m = meta(rank, 3, runner=f"R{PAYLOAD}", hostname=PAYLOAD, device=PAYLOAD, sglang_version=PAYLOAD)
        write_trace(d / f"cuda_graph_capture-R{PAYLOAD}-TP-{rank}.json.gz", events, m)
    return d


COMMANDS = [["ls"], ["ls", "--long"], ["summary"], ["check"], ["time"]]


def _assert_escaped(text: str) -> None:
    for bit in RAW_BITS:
        assert bit not in text, (bit, text)
    assert "\\x1b[2J" in text  # shown as text
    assert "\x1b" not in text and not any("\x80" <= c <= "\x9f" for c in text)
    assert not any(line.startswith("x") for line in text.splitlines()), "a newline from a name split a line"


@pytest.mark.parametrize("argv", [*COMMANDS, ["diff"], ["attribute"]], ids=" ".join)
def test_escapes_never_reach_a_pipe(hostile_dir: Path, tmp_path: Path, argv: list[str]) -> None:
    """Every renderer over ``hostile_dir``; ``diff`` of its two ranks (they differ); ``attribute`` of a replay
    whose file name carries the payload."""
    args: dict[str, list[Any]] = {"diff": sorted(hostile_dir.iterdir()), "check": [hostile_dir, "-j", "1"],
                                  "time": [hostile_dir, "-j", "1"]}
    if argv == ["attribute"]:
        args["attribute"] = [shutil.copy(VLLM_REPLAY, tmp_path / f"replay{PAYLOAD}.json.gz"), VLLM_CAPTURE, "-j", "1"]
    proc = cli(*argv, *args.get(argv[0], [hostile_dir]))
    assert proc.returncode in {"diff": {1}, "attribute": {0}}.get(argv[0], {0, 1}), proc.stderr
    _assert_escaped(proc.stdout + proc.stderr)


@pytest.mark.parametrize("argv", COMMANDS, ids=" ".join)
def test_escapes_never_reach_a_terminal(hostile_dir: Path, argv: list[str]) -> None:
    """On a tty rich draws colours of its own (ESC[…m); none of the payload's sequences arrive raw."""
    proc = run_on_a_terminal(
        command("analyzer_cli", *argv, hostile_dir, *(["-j", "1"] if argv[0] in ("check", "time") else [])),
        {**child_env(PYTHONPATH=str(REPO)), "TERM": "xterm-256color", "COLUMNS": "400"}, timeout=120,
    )
    text = proc.terminal.decode("utf-8", "surrogateescape")
    assert proc.returncode in (0, 1), text
    assert "\x1b[" in text, "expected rich's own styling on a terminal"
    for bit in ("\x1b[2J", "\x1b[31mred", "\x1b]0;", "\x9b"):
        assert bit not in text
    assert "\\x1b[2J" in text


# -- every input opened once, never a FIFO or a link ------------------------------------------------------


@pytest.mark.parametrize("argv", [["ls"], ["summary"], ["check", "-j", "1"], ["time", "-j", "1"]], ids=" ".join)
def test_fifo_or_link_at_a_trace_name_is_one_line_not_a_hang(tmp_path: Path, argv: list[str]) -> None:
    """A FIFO and a link at trace names, and a trace that becomes a FIFO right after the listing saw a
    regular file (the race, its timing forced): one line each, the rest read; a hang would be the timeout."""
    good, fifo, link, victim = (tmp_path / f"cuda_graph_capture-R-TP-{rank}.json.gz" for rank in range(4))
    for rank, path in ((0, good), (3, victim)):
        write_trace(path, [op("aten::mm", 1.0)], meta(rank, 4, runner="R"))
    os.mkfifo(fifo)
    os.symlink(good, link)
    proc = run_child("flip_after_listing", victim, argv[0], tmp_path, *argv[1:])
    assert proc.returncode == 2, proc.stderr
    assert proc.stderr.splitlines() == [
        f"capture-trace: error: {fifo}: not a regular file (a FIFO)",
        f"capture-trace: error: {link}: a symbolic link (not followed: name the file it points to)",
        f"capture-trace: error: {victim}: not a regular file (a FIFO)",
    ]
    assert stat.S_ISFIFO(os.lstat(fifo).st_mode)
