"""Export speed: torch's ``export_chrome_trace("….json.gz")`` vs ours, side by side, same workload.

For each size a fresh profile of the same workload (record_shapes=True) is exported by torch and by
us; printed: events, seconds torch blocks, seconds ours blocks the caller and until the file is final,
file sizes, and the blocking ratio (torch / ours). Usage: python benchmarks/bench_export.py [--sizes 10k,100k,500k]
"""

from __future__ import annotations

import argparse
import gc
import gzip
import json
import os
import sys
import tempfile
import time
from pathlib import Path

import torch

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from mixins import export_cuda_graph_capture_trace, wait_for_exports  # noqa: E402


def _profile(target_events: int) -> torch.profiler.profile:
    """A capture-like workload: small matmuls/adds with shapes, in per-batch-size annotated ranges."""
    a, w = torch.ones(4, 16), torch.ones(16, 16)
    iterations = max(1, target_events // 10)  # ~10 events per iteration (annotation, ops, their children)
    with torch.profiler.profile(activities=[torch.profiler.ProfilerActivity.CPU], record_shapes=True) as prof:
        for i in range(iterations):
            with torch.profiler.record_function(f"capture::bs={1 + i % 8}"):
                torch.add(torch.mm(a, w), 1)
    return prof


def _events(path: Path) -> int:
    with gzip.open(path, "rt") as handle:
        return len(json.load(handle)["traceEvents"])


def _size(text: str) -> int:
    text = text.strip().lower()
    return int(float(text[:-1]) * 1000) if text.endswith("k") else int(text)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--sizes", default="10k,100k,500k")
    args = parser.parse_args()
    os.environ["SGLANG_ENABLE_CUDA_GRAPH_CAPTURE_TRACE"] = "1"
    os.environ.setdefault("SGLANG_CAPTURE_TRACE_GZIP_LEVEL", "6")
    header = (f"{'events':>8} | {'torch .json.gz s':>16} | {'ours blocking s':>15} | {'ours total s':>12} | "
              f"{'torch MB':>8} | {'ours MB':>7} | {'blocking ratio':>14}")
    level = os.environ["SGLANG_CAPTURE_TRACE_GZIP_LEVEL"]
    print(f"torch {torch.__version__}, {os.cpu_count()} CPUs, gzip level {level}")
    print(header)
    print("-" * len(header))
    with tempfile.TemporaryDirectory() as tmp:
        for target in (_size(s) for s in args.sizes.split(",")):
            prof = _profile(target)
            theirs = Path(tmp) / f"torch-{target}.json.gz"
            start = time.perf_counter()
            prof.export_chrome_trace(str(theirs))
            torch_s = time.perf_counter() - start
            del prof
            gc.collect()

            prof = _profile(target)
            os.environ["SGLANG_TORCH_PROFILER_DIR"] = str(Path(tmp) / f"ours-{target}")
            start = time.perf_counter()
            ours = export_cuda_graph_capture_trace(prof, runner_name="Bench", tp_rank=0)
            blocking_s = time.perf_counter() - start
            assert wait_for_exports() and ours is not None and ours.exists()
            total_s = time.perf_counter() - start
            del prof
            gc.collect()

            events = _events(ours)
            assert abs(events - _events(theirs)) <= 2, "ours and torch's hold different events"
            print(f"{events:>8} | {torch_s:>16.2f} | {blocking_s:>15.2f} | {total_s:>12.2f} | "
                  f"{theirs.stat().st_size / 1e6:>8.2f} | {ours.stat().st_size / 1e6:>7.2f} | "
                  f"{torch_s / blocking_s:>13.1f}x")
            theirs.unlink()


if __name__ == "__main__":
    main()
