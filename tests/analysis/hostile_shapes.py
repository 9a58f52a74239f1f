"""GENERATED hostile traces, one function per shape (``test_hostile_inputs.py``, ``benchmarks/bench_hostile.py``).

Why generated: each shape is a structure that once cost quadratic time or gigabytes (text without a length
bound, segments and capture windows that nest, many segments), not a workload; the test and the benchmark
share the one definition. ``n`` is the shape's size: the benchmark doubles it.
"""

from __future__ import annotations

import gzip
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

from tests.trace_files import call, event, op, span


def _range(label: str, ts: float, dur: float) -> dict[str, Any]:
    return span(f"capture::{label}", ts, dur)


def long_names(n: int, count: int = 30) -> Iterator[dict[str, Any]]:
    """``count`` cpu_ops, each named by ``n`` characters of its own, in one capture segment."""
    yield _range("bs=1", 0.0, 10.0 + count)
    for k in range(count):
        yield op(f"{k:04d}" + "n" * n, 10.0 + k, 1.0)


def long_labels(n: int, count: int = 30) -> Iterator[dict[str, Any]]:
    """``count`` segments, each labelled by ``n`` characters of its own, one op in each."""
    for k in range(count):
        yield _range(f"bs={k + 1},variant={k:04d}" + "v" * n, 100.0 * k, 50.0)
        yield op("aten::mm", 100.0 * k + 1, 1.0)


def distinct_ops(n: int) -> Iterator[dict[str, Any]]:
    """``n`` cpu_ops, every one a name and input shape of its own (the signature table grows with each)."""
    for k in range(n):
        shapes: dict[str, Any] = {"Input Dims": [[k, k + 1]], "Input type": ["float"]}
        yield op(f"aten::op_{k}", 10.0 + k, 0.5, **shapes)


def nested_segments(n: int) -> Iterator[dict[str, Any]]:
    """One long segment, ``n`` short ones at its start, then ``n`` ops inside the long one only: each op
    was placed by a walk back over every short segment (the running max end covers it)."""
    yield _range("bs=1", 0.0, 10.0 * n + 10)
    for k in range(n):
        yield _range(f"bs={k + 2}", 1.0 + k, 0.5)
    for k in range(n):
        yield op("aten::mm", 2.0 * n + k + 0.25, 0.5)


def nested_windows(n: int) -> Iterator[dict[str, Any]]:
    """``n`` capture windows on one thread, each inside the one before, one launch in each."""
    yield _range("bs=1", 0.0, 8.0 * n + 10)
    for k in range(n):
        yield op("aten::mm", 1.0 + k, 8.0 * n - 2 * k)
        yield call("cudaStreamBeginCapture", 1.1 + k, 0.1, correlation=3 * k)
        yield call("cudaLaunchKernel", 1.5 + k, 0.1, correlation=3 * k + 1)
        yield call("cudaStreamEndCapture", 8.0 * n - k, 0.1, correlation=3 * k + 2)


def sequential_windows(n: int) -> Iterator[dict[str, Any]]:
    """``n`` capture windows one after another on one thread, each after an eager launch of its own."""
    yield _range("bs=1", 0.0, 10.0 * n + 10)
    for k in range(n):
        t = 10.0 * k + 1
        yield op("aten::mm", t, 8.0)
        yield call("cudaLaunchKernel", t + 0.5, 0.1, correlation=4 * k)
        yield event("kernel", "kernel_a", t + 0.7, 0.2, correlation=4 * k)
        yield call("cudaStreamBeginCapture", t + 2, 0.1, correlation=4 * k + 1)
        yield call("cudaLaunchKernel", t + 3, 0.1, correlation=4 * k + 2)
        yield call("cudaStreamEndCapture", t + 4, 0.1, correlation=4 * k + 3)


def overlapping_windows(n: int) -> Iterator[dict[str, Any]]:
    """``n`` capture windows begun on one thread and ended on another (an end closes its process's oldest
    open capture): a staircase, each window overlapping the ``n - 1`` others without nesting."""
    yield _range("bs=1", 0.0, 3.0 * n + 10)
    for k in range(n):
        yield call("cudaStreamBeginCapture", 1.0 + k, 0.1, correlation=3 * k)
        yield call("cudaLaunchKernel", 1.5 + k, 0.1, correlation=3 * k + 1)
    for k in range(n):
        yield call("cudaStreamEndCapture", 2.0 * n + k, 0.1, tid=2, correlation=3 * k + 2)


def many_segments(n: int) -> Iterator[dict[str, Any]]:
    """``n`` segments one after another, one op in each (``diff`` of the trace against itself)."""
    for k in range(n):
        yield _range(f"bs={k + 1}", 10.0 * k, 5.0)
        yield op("aten::mm", 10.0 * k + 1, 1.0)


def gzip_members(path: Path, head: bytes, unit: bytes, total: int, tail: bytes) -> Path:
    """``head + unit * (total // len(unit)) + tail`` as gzip level 9, written one member at a time: a
    gigabyte in about a megabyte."""
    chunk_units = min(total, 64 << 20) // len(unit)
    chunk = gzip.compress(unit * chunk_units, 9)
    with open(path, "wb") as f:
        f.write(gzip.compress(head, 9))
        for _ in range(total // (chunk_units * len(unit))):
            f.write(chunk)
        f.write(gzip.compress(tail, 9))
    return path


SHAPES: dict[str, Callable[[int], Iterator[dict[str, Any]]]] = {shape.__name__: shape for shape in (
    long_names, long_labels, distinct_ops, nested_segments, nested_windows, sequential_windows, many_segments,
    overlapping_windows,
)}
