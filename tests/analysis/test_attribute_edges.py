"""``attribute`` on hand-built NVIDIA-style pairs (named fakes: no GPU here) at the edges that were once
mishandled: graphs of several batch sizes in one capture file, nested captures (two streams from one
thread), a piecewise capture's later pieces, and ``--annotate`` with two same-named kernels starting
together. Each test fails on the code before its fix."""

from __future__ import annotations

import contextlib
import json
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

from tests.trace_files import event, write_trace

Run = Callable[..., tuple[int, str, str]]
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


def _attribute(run_cli: Run, replay: Path, capture: Path, *extra: str) -> dict[str, Any]:
    rc, out, err = run_cli("attribute", replay, capture, "--json", *extra)
    assert rc == 0, err
    doc: dict[str, Any] = json.loads(out)
    return doc


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
