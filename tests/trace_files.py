"""Trace files for the tests: reading back what the exporter wrote (tests/core, tests/sglang) and writing
small traces in the real format (tests/analysis, benchmarks). Imported as ``tests.trace_files``: the
repository root is on the path of every pytest run, whichever venv runs it. Standard library only, so it
imports under every sglang and torch version the suites run against, and where there is no torch at all.

The events are Kineto's complete events (``"ph": "X"``), one builder per kind. ``python -m
tests.trace_files tests/data`` remakes the committed real traces (tests/data/PROVENANCE.md): the only
part that needs torch, never run by a test.
"""

from __future__ import annotations

import gzip
import json
import shutil
import subprocess
import sys
from collections.abc import Iterable
from pathlib import Path
from typing import Any

Event = dict[str, Any]


def load_trace(path: Path) -> dict[str, Any]:
    """A trace as ``json.load`` gives it, gzip or not."""
    with (gzip.open(path, "rt") if str(path).endswith(".gz") else open(path)) as handle:
        return json.load(handle)


def range_names(trace: dict[str, Any]) -> list[str]:
    """The names of the trace's ``record_function`` ranges (``user_annotation``), in start order."""
    events = sorted((e for e in trace["traceEvents"] if e.get("cat") == "user_annotation"), key=lambda e: e["ts"])
    return [e["name"] for e in events]


# -- building ----------------------------------------------------------------------------------------------


def event(cat: str, name: str, ts: float | None, dur: float | None = 1.0, *, pid: int = 1, tid: int = 1,
          **args: Any) -> Event:
    """A complete event; ``ts=None`` writes one without a time (no ``ts``, no ``dur``). Keys with spaces
    go in as ``**{"External id": 1}``."""
    out: Event = {"ph": "X", "cat": cat, "name": name, "pid": pid, "tid": tid}
    if ts is not None:
        out["ts"], out["dur"] = ts, dur
    out["args"] = args
    return out


def op(name: str, ts: float | None, dur: float | None = 1.0, **kw: Any) -> Event:
    """A ``cpu_op`` (``record_shapes`` data as keyword arguments: ``**{"Input Dims": [[2, 2]]}``)."""
    return event("cpu_op", name, ts, dur, **kw)


def call(name: str, ts: float | None, dur: float | None = 1.0, **kw: Any) -> Event:
    """A CUDA/HIP runtime call (``cudaLaunchKernel``, ``cudaStreamBeginCapture``, ``hipGraphLaunch`` ...)."""
    return event("cuda_runtime", name, ts, dur, **kw)


def kernel(name: str, ts: float, dur: float = 1.0, *, pid: int = 0, tid: int = 7, **kw: Any) -> Event:
    """Device work, on the GPU's pid and a stream's tid."""
    return event("kernel", name, ts, dur, pid=pid, tid=tid, **kw)


def span(name: str, ts: float | None, dur: float | None = 1.0, **kw: Any) -> Event:
    """A ``record_function`` range (``user_annotation``): ``span("capture::bs=1", 0, 100)``."""
    return event("user_annotation", name, ts, dur, **kw)


def meta(rank: Any = 0, size: Any = None, runner: str = "DecodeCudaGraphRunner", **extra: Any) -> dict[str, Any]:
    """``capture_trace`` metadata as the exporter writes it (the keys the analyzer reads)."""
    out = {"runner": runner, "tp_rank": rank, "pp_rank": 0, "pp_size": 1, "capture_index": 1, **extra}
    return out if size is None else {**out, "tp_size": size}


def write_trace(path: Path, events: Iterable[Event | str], meta: dict[str, Any] | None = None, **top: Any) -> Path:
    """``events`` (streamed: any iterable; a ``str`` is written as it is) as a trace: ``capture_trace``
    metadata first when given, as the exporter writes it, then ``top``'s keys, then ``traceEvents``.
    Gzip (level 1: fast) when the name ends in ``.gz``."""
    head = json.dumps({**({"capture_trace": meta} if meta is not None else {}), **top})[:-1]
    with (gzip.open(path, "wt", compresslevel=1) if path.name.endswith(".gz") else open(path, "w")) as f:
        f.write(head + (", " if len(head) > 1 else "") + '"traceEvents": [\n')
        chunk: list[str] = []
        for n, e in enumerate(events):
            chunk.append(("" if n == 0 else ",\n") + (e if isinstance(e, str) else json.dumps(e)))
            if len(chunk) == 10_000:
                f.write("".join(chunk))
                chunk.clear()
        f.write("".join(chunk) + "\n]}\n")
    return path


def with_meta(src: Path, dst: Path, **changes: Any) -> Path:
    """A copy of the trace ``src`` at ``dst`` with its ``capture_trace`` metadata changed (None removes a key)."""
    doc = load_trace(src)
    fields = {k: v for k, v in {**doc.pop("capture_trace", {}), **changes}.items() if v is not None}
    return write_trace(dst, doc.pop("traceEvents"), fields, **doc)


# -- the committed real traces (tests/data), made once with torch ------------------------------------------

CPU_TRACE = "cuda_graph_capture-DecodeCudaGraphRunner-TP-{}.json.gz"
NO_META = "cuda_graph_capture-EAGLEDraftCudaGraphRunner-TP-3-PP-1-2.json.gz"


def profile_tiny_model(path: Path, sizes: tuple[int, ...], diverge_bs: int | None = None,
                       fields: dict[str, Any] | None = None) -> Path:
    """A real torch.profiler CPU trace (record_shapes on) of a tiny model run twice per batch size under
    ``capture::bs=N`` (with one more op, ``aten::mul``, at ``diverge_bs``), one op pair outside any range,
    and ``fields`` as its ``capture_trace`` metadata (first key, as the exporter writes it)."""
    import torch
    from torch.profiler import ProfilerActivity, profile, record_function

    with torch.no_grad(), profile(activities=[ProfilerActivity.CPU], record_shapes=True) as prof:
        for bs in sizes:
            with record_function(f"capture::bs={bs}"):
                x = torch.ones(bs, 16)
                for _ in range(2):
                    y = torch.relu(torch.nn.functional.linear(x, torch.ones(8, x.shape[1])))
                    torch.softmax(y * 2.0 if bs == diverge_bs else y, dim=-1)
        torch.zeros(3).add_(1)
    raw = path.with_suffix(".raw")
    prof.export_chrome_trace(str(raw))
    doc = json.loads(raw.read_text())
    raw.unlink()
    with gzip.open(path, "wt") as f:
        json.dump({"capture_trace": fields, **doc} if fields else doc, f, indent=1)
    return path


def make_data(data: Path) -> None:
    """tests/data/cpu_traces (TP 0 and 1 of one runner, a TP 1 with one more op at bs=4, a trace without
    metadata) and tests/data/demo (``capture-trace demo --device cpu --batch-sizes 1,2,4``)."""
    runner = "DecodeCudaGraphRunner"
    fields = {"runner": runner, "runner_class": f"sglang.srt.model_executor.runner.{runner}", "tp_rank": 0,
              "pp_rank": 0, "pp_size": 1, "capture_index": 1, "capture_bs": [1, 4],
              "sglang_version": None, "torch_version": "2.13.0", "package_version": "0.1.0", "pid": 1,
              "hostname": "test", "device": "cpu", "time_utc": "2026-01-01T00:00:00Z"}
    cpu = data / "cpu_traces"
    for folder in ("same", "diverged"):
        (cpu / folder).mkdir(parents=True, exist_ok=True)
    for rank in (0, 1):
        profile_tiny_model(cpu / "same" / CPU_TRACE.format(rank), (1, 4), fields={**fields, "tp_rank": rank})
    profile_tiny_model(cpu / "diverged" / CPU_TRACE.format(1), (1, 4), diverge_bs=4, fields={**fields, "tp_rank": 1})
    profile_tiny_model(cpu / NO_META, (2,))
    out = data / "demo-run"
    subprocess.run([sys.executable, "-m", "mixins", "demo", "--out", str(out), "--device", "cpu", "--batch-sizes",
                    "1,2,4"], check=True)
    shutil.rmtree(data / "demo", ignore_errors=True)
    shutil.move(out / "graph_capture_profile", data / "demo")
    shutil.rmtree(out)


if __name__ == "__main__":
    make_data(Path(sys.argv[1]))
