"""Reliability of the export: parallel exports in one process, killed processes, failures, names, log lines.

Every case runs the real export (real torch profiler, real files); multi-process cases are real
subprocesses, and a kill is a real signal.
"""

from __future__ import annotations

import logging
import os
import signal
import subprocess
import textwrap
import time
from pathlib import Path

import pytest
from core_helpers import PYTHON, load_trace, matmul_work, op_shapes, profile_of, subprocess_env

from mixins import export_cuda_graph_capture_trace, wait_for_exports
from mixins.output_dir import STAGING_PREFIX, StagingName

_PARALLEL_SCRIPT = textwrap.dedent(
    """
    import os, sys, threading
    import torch
    from mixins import export_cuda_graph_capture_trace, wait_for_exports
    threads, rounds, out = int(sys.argv[1]), int(sys.argv[2]), sys.argv[3]

    def profile(rows):
        with torch.profiler.profile(record_shapes=True) as prof:
            for _ in range(300):
                torch.mm(torch.ones(rows, 8), torch.ones(8, 3))
        return prof

    missing = []
    for round_ in range(rounds):
        profs = [profile(1 + i) for i in range(threads)]
        barrier = threading.Barrier(threads)

        def export(i):
            barrier.wait()  # every thread calls the export at the same moment
            export_cuda_graph_capture_trace(profs[i], runner_name=f"R{round_}", tp_rank=i)

        callers = [threading.Thread(target=export, args=(i,)) for i in range(threads)]
        for t in callers:
            t.start()
        for t in callers:
            t.join()
        if round_ == rounds - 1:
            break  # the last round is left to the exit hook
        assert wait_for_exports(120)
        names = [f"cuda_graph_capture-R{round_}-TP-{i}.json.gz" for i in range(threads)]
        missing += [n for n in names if not os.path.exists(os.path.join(out, n))]
    print("missing after wait_for_exports:", missing)
    """
)


def test_parallel_exports_in_one_process_are_all_waited_for(tmp_path: Path) -> None:
    """16 threads export at once, 12 rounds: wait_for_exports() and the exit hook see every compression."""
    threads, rounds = 16, 12
    env = subprocess_env(SGLANG_ENABLE_CUDA_GRAPH_CAPTURE_TRACE="1", SGLANG_TORCH_PROFILER_DIR=str(tmp_path))
    out = tmp_path / "graph_capture_profile"
    done = subprocess.run([PYTHON, "-c", _PARALLEL_SCRIPT, str(threads), str(rounds), str(out)], env=env,
                          capture_output=True, text=True, timeout=900)
    assert done.returncode == 0, done.stderr
    assert "missing after wait_for_exports: []" in done.stdout, done.stdout
    expected = {f"cuda_graph_capture-R{r}-TP-{i}.json.gz" for r in range(rounds) for i in range(threads)}
    assert set(os.listdir(out)) == expected  # the last round too (exit hook), and no staging left
    for i in (0, threads - 1):
        trace = load_trace(out / f"cuda_graph_capture-R{rounds - 1}-TP-{i}.json.gz")
        assert op_shapes(trace) == [[[1 + i, 8], [8, 3]]] * 300
