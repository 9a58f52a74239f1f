"""GENERATED inputs for the memory and work bounds (``test_bounds.py``, ``benchmarks/bench_bounds.py``).

Why generated: the bounds are about event *shapes* (what Kineto writes for a kernel, a launch, a
``record_shapes`` cpu_op …) and about adversarial structure (many similar capture windows), not about
any real workload; each generator is the one definition both the test and the benchmark use.
Values vary per event the way real traces vary (ids, timestamps) and repeat the way they repeat (names,
shapes, grids from small pools), so interning is measured as it would work on a real trace.
"""

from __future__ import annotations

import itertools
import json
import os
from collections.abc import Callable
from pathlib import Path

from tests.trace_files import write_trace

KERNEL_NAMES = [
    f"void at::native::vectorized_elementwise_kernel<4, at::native::CUDAFunctor_add<c10::BFloat16>, "
    f"at::detail::Array<char*, 3> >(int, at::native::CUDAFunctor_add<c10::BFloat16>, variant_{n})"
    for n in range(40)
]
OPS = [f"aten::op_{n}" for n in range(30)]
DIMS = [[[8 * (n + 1), 4096], [4096, 4096 + n], []] for n in range(20)]


def _kernel(i: int) -> str:
    """A CUDA kernel as Kineto writes it (args: correlation, grid, block, stream … and more)."""
    name = json.dumps(KERNEL_NAMES[i % len(KERNEL_NAMES)])
    grid = [128 + i % 16, 1, 1]
    return (
        f'{{"ph": "X", "cat": "kernel", "name": {name}, "pid": 0, "tid": 7, "ts": {1000 + i * 2.5}, "dur": 1.9, '
        f'"args": {{"External id": {i}, "device": 0, "stream": 7, "correlation": {i + 1}, '
        f'"registers per thread": 64, "shared memory": 0, "blocks per SM": 0.8, "warps per SM": 3.5, '
        f'"grid": {grid}, "block": [256, 1, 1], "est. achieved occupancy %": 50}}}}'
    )


def _launch(i: int) -> str:
    """A runtime kernel launch (cudaLaunchKernel): correlation and External id."""
    return (
        f'{{"ph": "X", "cat": "cuda_runtime", "name": "cudaLaunchKernel", "pid": 1, "tid": 1, '
        f'"ts": {1000 + i * 2.5}, "dur": 2.1, "args": {{"External id": {i}, "cbid": 211, "correlation": {i + 1}}}}}'
    )


def _cpu_op(i: int) -> str:
    """A ``record_shapes=True`` cpu_op: Input Dims, Input type, Input Strides, Concrete Inputs, ids."""
    dims = DIMS[i % len(DIMS)]
    return (
        f'{{"ph": "X", "cat": "cpu_op", "name": "{OPS[i % len(OPS)]}", "pid": 1, "tid": 1, '
        f'"ts": {1000 + i * 2.5}, "dur": 2.0, "args": {{"External id": {i}, "Record function id": {i}, '
        f'"Ev Idx": {i}, "Input Dims": {json.dumps(dims)}, '
        f'"Input type": ["c10::BFloat16", "c10::BFloat16", "Scalar"], '
        f'"Input Strides": [[4096, 1], [4096, 1], []], "Concrete Inputs": ["", "", "1"], '
        f'"Sequence number": {i}, "Fwd thread id": 0}}}}'
    )


def _annotation(i: int) -> str:
    """A ``record_function`` range (user_annotation)."""
    return (
        f'{{"ph": "X", "cat": "user_annotation", "name": "step_{i % 50}", "pid": 1, "tid": 1, '
        f'"ts": {1000 + i * 2.5}, "dur": 2.0, "args": {{"External id": {i}, "Record function id": {i}}}}}'
    )


def _flow(i: int) -> str:
    """One end of an ac2g flow (start on even events, finish on odd ones)."""
    ph = "s" if i % 2 == 0 else "f"
    extra = ', "bp": "e"' if ph == "f" else ""
    return (
        f'{{"ph": "{ph}", "id": {i // 2}, "pid": {i % 2}, "tid": 7, "ts": {1000 + i * 2.5}, '
        f'"cat": "ac2g", "name": "ac2g"{extra}}}'
    )


def _memcpy(i: int) -> str:
    """Device memcpy (gpu_memcpy)."""
    return (
        f'{{"ph": "X", "cat": "gpu_memcpy", "name": "Memcpy HtoD (Pageable -> Device)", "pid": 0, "tid": 7, '
        f'"ts": {1000 + i * 2.5}, "dur": 1.0, "args": {{"device": 0, "stream": 7, "correlation": {i + 1}, '
        f'"bytes": 4096, "memory bandwidth (GB/s)": 2.5}}}}'
    )


_PAD = ", ".join(f'"unread_key_{k}": "{"v" * 20}"' for k in range(40))


def _args_heavy(i: int) -> str:
    """A python_function call with 40 args nobody reads (~1.3 KB of JSON)."""
    return (
        f'{{"ph": "X", "cat": "python_function", "name": "model.py(12): forward", "pid": 1, "tid": 1, '
        f'"ts": {1000 + i * 2.5}, "dur": 2.0, "args": {{"Python id": {i}, "Python parent id": {i - 1}, {_PAD}}}}}'
    )


def _empty(i: int) -> str:
    return "{}"


SHAPES: dict[str, Callable[[int], str]] = {
    "kernel": _kernel,
    "launch": _launch,
    "cpu_op": _cpu_op,
    "annotation": _annotation,
    "flow": _flow,
    "memcpy": _memcpy,
    "args_heavy": _args_heavy,
    "empty": _empty,
}


# What makes a trace both a replay (a graph launch) and a capture (our header): ``attribute`` reads one
# file as both (``cli_args``).
_AS_BOTH_HEADER = {"runner": "R", "tp_rank": 0, "pp_rank": 0, "capture_index": 1}
_AS_BOTH_EVENT = (
    '{"ph": "X", "cat": "cuda_runtime", "name": "cudaGraphLaunch", "pid": 1, "tid": 1, "ts": 999.0, '
    '"dur": 1.0, "args": {"correlation": 0}}'
)


def write_shape(path: Path, shape: str, n: int, replay_and_capture: bool = False) -> Path:
    """A trace of ``n`` events of one shape (gzip level 1: written fast, read as any trace); with
    ``replay_and_capture``, also our header and one graph launch, so that it is read as either role."""
    make = SHAPES[shape]
    events = (make(i) for i in range(n - replay_and_capture))  # the graph launch is one of the n
    if replay_and_capture:
        return write_trace(path, itertools.chain([_AS_BOTH_EVENT], events), _AS_BOTH_HEADER, schemaVersion=1)
    return write_trace(path, events, schemaVersion=1)


COMMANDS = ("summary", "diff", "check", "time", "attribute")


def cli_args(command: str, trace: Path) -> list[str]:
    """``capture-trace`` arguments running ``command`` on one trace in one process (``-j 1``); for
    ``attribute`` the trace is both the replay and (hard-linked under another directory) the capture."""
    simple: dict[str, list[Path | str]] = {
        "summary": [trace], "diff": [trace, trace], "check": [trace.parent, "-j", "1"], "time": [trace, "-j", "1"],
    }
    if command in simple:
        return [command, *map(str, simple[command])]
    capture = trace.parent / "capture" / trace.name  # a replay is never its own capture: another name
    if not capture.exists():
        capture.parent.mkdir()
        os.link(trace, capture)
    return ["attribute", str(trace), str(capture.parent), "-j", "1"]


# -- attribute: many similar capture windows -------------------------------------------------------------

POOL = 1009  # distinct kernel names (a prime): window w launches names (7 w + i) % POOL, all distinct


def window_names(w: int, launches: int) -> list[str]:
    return [f"kernel_{(7 * w + i) % POOL}" for i in range(launches)]


REPLAY_MODES = ("found", "absent", "out_of_order")


def replay_sequences(windows: int, launches: int, replays: int, mode: str) -> list[list[str]]:
    """``replays`` distinct sequences, each window ``3 r``'s own kernels: as they are (``found``: one
    window verifies), with the last one renamed (``absent``: a kernel no window has), or with the last
    one replaced by the first (``out_of_order``: every kernel is in many windows, the sequence in none,
    and it shares long runs with hundreds of windows: the worst case for an in-order search)."""
    out = []
    for r in range(replays):
        names = window_names((3 * r) % windows, launches)
        if mode == "absent":
            names[-1] = f"missing_{r}"
        elif mode == "out_of_order":
            names[-1] = names[0]
        out.append(names)
    return out


def adversarial_pair(dest: Path, windows: int, launches: int, replays: int, mode: str) -> tuple[Path, Path]:
    """A ROCm-style capture (named launches) of ``windows`` windows x ``launches`` launches, and a replay
    of ``replays`` graph launches, each a distinct sequence (see :func:`replay_sequences`)."""
    ev = []
    ts = 0.0

    def call(name: str, args: str = "") -> None:
        nonlocal ts
        ts += 1.0
        extra = f', "args": {{{args}}}' if args else ""
        ev.append(
            f'{{"ph": "X", "cat": "cuda_runtime", "name": "{name}", "pid": 1, "tid": 1, "ts": {ts}, "dur": 0.5{extra}}}'
        )

    corr = 0
    for w in range(windows):
        call("hipStreamBeginCapture")
        for name in window_names(w, launches):
            corr += 1
            call(
                "hipExtModuleLaunchKernel",
                f'"kernel": "{name}", "grid": [4, 1, 1], "block": [64, 1, 1], "correlation": {corr}',
            )
        call("hipStreamEndCapture")
    capture = write_trace(dest / "adversarial_capture.json.gz", ev)
    ev, ts = [], 0.0
    for r, names in enumerate(replay_sequences(windows, launches, replays, mode)):
        call("hipGraphLaunch", f'"correlation": {r + 1}')
        for name in names:
            ts += 1.0
            ev.append(
                f'{{"ph": "X", "cat": "kernel", "name": "{name}", "pid": 0, "tid": 7, "ts": {ts}, "dur": 0.5, '
                f'"args": {{"correlation": {r + 1}, "grid": [4, 1, 1], "block": [64, 1, 1]}}}}'
            )
    return capture, write_trace(dest / "adversarial_replay.json.gz", ev)
