"""Helpers shared by the core tests: a real CPU profile (``core_child.mm_profile``), trace loading
(tests/trace_files.py, shared with tests/sglang), the Python calls a path makes, subprocess environment."""

from __future__ import annotations

import logging
import os
import subprocess
import sys
from collections.abc import Callable
from pathlib import Path
from typing import Any

from core_child import kineto_profile as kineto_profile  # re-exported: one real CPU profile for every test
from core_child import mm_profile as mm_profile

from tests.trace_files import load_trace as load_trace  # re-exported: the core tests' one import
from tests.trace_files import range_names as range_names

HERE = Path(__file__).resolve().parent
REPO = HERE.parents[1]


def export_mm(runner_name: str, rows: int = 2, tp_rank: int | None = 0, **kwargs: Any) -> Path | None:
    """The export (switch and directory from the environment) of a real profile of one (rows x 8) @ (8 x 3)
    matmul; what ``export_cuda_graph_capture_trace`` returns."""
    from mixins import export_cuda_graph_capture_trace

    return export_cuda_graph_capture_trace(mm_profile(1, rows), runner_name=runner_name, tp_rank=tp_rank, **kwargs)


def exported_trace(runner_name: str, rows: int = 2, tp_rank: int = 0) -> Path:
    """``export_mm`` that must succeed, waited for: the saved trace's path."""
    from mixins import wait_for_exports

    path = export_mm(runner_name, rows, tp_rank)
    assert path is not None and wait_for_exports(60)
    return path


def warnings_of(caplog: Any) -> list[str]:
    """The messages of the WARNING records ``caplog`` holds."""
    return [r.getMessage() for r in caplog.records if r.levelno == logging.WARNING]


def python_calls(work: Callable[[], Any]) -> set[str]:
    """``file:function`` of every Python function called while ``work()`` runs (``sys.setprofile``)."""
    called: set[str] = set()

    def tracer(frame: Any, event: str, arg: Any) -> None:
        if event == "call":
            called.add(f"{frame.f_code.co_filename}:{frame.f_code.co_name}")

    sys.setprofile(tracer)
    try:
        work()
    finally:
        sys.setprofile(None)
    return called


def exported(directory: Path) -> dict[str, Any]:
    """Every trace in ``directory`` by file name, once the background exports are done."""
    from mixins import wait_for_exports

    assert wait_for_exports(60)
    return {p.name: load_trace(p) for p in sorted(directory.iterdir())} if directory.exists() else {}


def trace_name(cls: type, rank: int = 0) -> str:
    return f"cuda_graph_capture-{cls.__name__}-TP-{rank}.json.gz"


def op_shapes(trace: dict[str, Any], op: str = "aten::mm") -> list[Any]:
    return [e["args"]["Input Dims"] for e in trace["traceEvents"] if e.get("cat") == "cpu_op" and e["name"] == op]


def subprocess_env(**extra: str) -> dict[str, str]:
    env = dict(os.environ)
    env["PYTHONPATH"] = os.pathsep.join([str(REPO), env.get("PYTHONPATH", "")]).rstrip(os.pathsep)
    env.update(extra)
    return env


def capture_trace(*args: Any, env: dict[str, str] | None = None,
                  timeout: float = 300) -> subprocess.CompletedProcess[str]:
    """``capture-trace ARGS`` (``python -m mixins``) run to its end in a fresh interpreter, output as text."""
    return subprocess.run([PYTHON, "-m", "mixins", *args], env=subprocess_env() if env is None else env,
                          capture_output=True, text=True, timeout=timeout)


def child_env(**extra: str) -> dict[str, str]:
    """``subprocess_env`` with this directory first on the path, for ``python -m core_child``."""
    env = subprocess_env(**extra)
    env["PYTHONPATH"] = os.pathsep.join([str(HERE), env["PYTHONPATH"]])
    return env


PYTHON = sys.executable


def child(case: str, *args: str) -> list[str]:
    """The command running one case of core_child.py in a fresh interpreter (with ``child_env``)."""
    return [PYTHON, "-m", "core_child", case, *args]


def export_env(profiler_dir: Path, **extra: str) -> dict[str, str]:
    """``child_env`` with the switch on and traces under ``profiler_dir``, plus ``extra``."""
    return child_env(SGLANG_ENABLE_CUDA_GRAPH_CAPTURE_TRACE="1", SGLANG_TORCH_PROFILER_DIR=str(profiler_dir), **extra)


def run_case(case: str, *args: str, env: dict[str, str] | None = None,
             timeout: float = 300) -> subprocess.CompletedProcess[str]:
    """One core_child case run to its end; fails with its stderr's tail unless it exits 0."""
    done = subprocess.run(child(case, *args), env=child_env() if env is None else env, capture_output=True,
                          text=True, timeout=timeout)
    assert done.returncode == 0, (done.returncode, done.stderr[-3000:])
    return done


def run_ranks(world_size: int, case: str, *args: str, env: dict[str, str] | None = None) -> list[Any]:
    """One child per rank (core_child ``case`` with its rank and ``args``), all waited for (a generous
    deadline: torch import and gloo set-up are slow on a loaded machine) and none left behind; each one's
    ``RANK-RESULT {json}`` line (torch may print a Gloo banner on stdout too)."""
    import json
    import time

    from core_child import RANK_RESULT

    procs = [
        subprocess.Popen(child(case, str(rank), *args), stdout=subprocess.PIPE, stderr=subprocess.PIPE,
                         text=True, env=child_env() if env is None else env)
        for rank in range(world_size)
    ]
    deadline = time.monotonic() + 600
    try:
        outputs = [p.communicate(timeout=max(1.0, deadline - time.monotonic())) for p in procs]
    finally:
        for p in procs:
            if p.poll() is None:
                p.kill()
                p.wait()
    for p, (_, err) in zip(procs, outputs, strict=True):
        assert p.returncode == 0, err[-3000:]
    results = []
    for out, err in outputs:
        lines = [line for line in out.splitlines() if line.startswith(RANK_RESULT)]
        assert len(lines) == 1, f"no single {RANK_RESULT!r} line in stdout:\n{out}\n{err[-2000:]}"
        results.append(json.loads(lines[0].removeprefix(RANK_RESULT)))
    return results


def strace_log(command: list[str], env: dict[str, str], calls: str, tmp: Path) -> list[str]:
    """System calls ``calls`` (strace -e trace=...) made by a real ``command``; skips where strace or
    ptrace is not available."""
    import shutil

    import pytest

    strace = shutil.which("strace")
    if strace is None:
        pytest.skip("strace is not installed")
    log = tmp / "strace.log"
    done = subprocess.run([strace, "-f", "-qq", "-e", f"trace={calls}", "-o", str(log), *command],
                          env=env, capture_output=True, text=True)
    if done.returncode != 0 and ("ptrace" in done.stderr or not log.exists()):
        pytest.skip(f"strace cannot trace here: {done.stderr.strip()[:200]}")
    assert done.returncode == 0, done.stderr
    return log.read_text().splitlines()
