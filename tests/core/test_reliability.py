"""Reliability of the export: parallel exports in one process, killed processes, failures, names, log lines.

Every case runs the real export (real torch profiler, real files); multi-process cases are real
subprocesses, and a kill is a real signal.
"""

from __future__ import annotations

import logging
import os
import re
import signal
import subprocess
from pathlib import Path
from typing import Any

import pytest
from core_helpers import (
    capture_trace,
    child,
    export_env,
    export_mm,
    exported_trace,
    load_trace,
    mm_profile,
    op_shapes,
    run_case,
    strace_log,
    warnings_of,
)

from mixins import output_dir, wait_for_exports
from mixins.output_dir import MAX_REMOVALS, STAGING_PREFIX, StagingName


@pytest.mark.parametrize("rounds", [3, pytest.param(12, marks=pytest.mark.exhaustive)], ids=lambda n: f"{n}-rounds")
def test_parallel_exports_in_one_process_are_all_waited_for(tmp_path: Path, rounds: int) -> None:
    """16 threads export at once, round after round: wait_for_exports() and the exit hook see every
    compression (before the fix 12 rounds lost 12 of 176 traces; 3 rounds by default, 12 in the full run)."""
    threads = 16
    env = export_env(tmp_path)
    out = tmp_path / "graph_capture_profile"
    done = run_case("parallel_exports", str(threads), str(rounds), str(out), env=env, timeout=900)
    assert "missing after wait_for_exports: []" in done.stdout, done.stdout
    expected = {f"cuda_graph_capture-R{r}-TP-{i}.json.gz" for r in range(rounds) for i in range(threads)}
    assert set(os.listdir(out)) == expected  # the last round too (exit hook), and no staging left
    for i in (0, threads - 1):
        trace = load_trace(out / f"cuda_graph_capture-R{rounds - 1}-TP-{i}.json.gz")
        assert op_shapes(trace) == [[[1 + i, 8], [8, 3]]] * 300


# -- temporaries: named after their process, swept when it is gone -----------------------------------

def _staging_dirs(directory: Path) -> list[str]:
    return sorted(n for n in os.listdir(directory) if n.startswith(STAGING_PREFIX)) if directory.exists() else []


def test_sigterm_during_export_leaves_a_temp_that_the_next_export_removes(trace_env: Path) -> None:
    env = export_env(trace_env.parent, SGLANG_CAPTURE_TRACE_GZIP_LEVEL="9")
    proc = subprocess.Popen(child("export_then_hold"), env=env, stdout=subprocess.PIPE, text=True)
    terminated = False
    try:
        assert proc.stdout is not None and proc.stdout.readline().strip() == "profiled"
        assert proc.stdout.readline().strip() == "kineto wrote"  # the export is held there, mid-way
        assert len(_staging_dirs(trace_env)) == 1
        proc.send_signal(signal.SIGTERM)  # how a server is normally stopped
        terminated = True
    finally:
        if not terminated:
            proc.kill()  # the child holds its export until a signal: never leave it behind
        proc.wait(60)
    assert proc.returncode == -signal.SIGTERM
    [left] = _staging_dirs(trace_env)  # what SIGTERM leaves: up to the whole raw JSON
    parsed = StagingName.parse(left)
    assert parsed is not None and parsed.pid == proc.pid and parsed.process_gone()
    assert not (trace_env / "cuda_graph_capture-Killed-TP-0.json.gz").exists()

    path = exported_trace("Next")
    assert os.listdir(trace_env) == [path.name]


def _dead_process_staging(directory: Path) -> str:
    directory.mkdir(parents=True, exist_ok=True)
    done = run_case("leave_staging", str(directory))
    return done.stdout.strip()


def test_the_sweep_removes_our_dead_processes_staging_only_and_a_bounded_number_per_export(trace_env: Path) -> None:
    """Only this host's, this pid namespace's, a dead pid's and this user's; at most MAX_REMOVALS per export, and
    an unparseable name (pid > 2**31) stops nothing; the next export removes the rest."""
    parsed = StagingName.parse(_dead_process_staging(trace_env))
    assert parsed is not None
    prefix, host = f"{STAGING_PREFIX}{parsed.pid}.{parsed.pid_namespace}", parsed.host
    kept = [
        f"{STAGING_PREFIX}{os.getppid()}.{parsed.pid_namespace}.0a1b2c3d.{host}",  # alive
        f"{prefix}.0a1b2c3d.elsewhere.example",
        f"{STAGING_PREFIX}{parsed.pid}.{parsed.pid_namespace + 1}.0a1b2c3d.{host}",
        f"{STAGING_PREFIX}99999999999.{parsed.pid_namespace}.0a1b2c3d.{host}",
        _dead_process_staging(trace_env),  # made another user's below
    ]
    os.chown(trace_env / kept[-1], 65534, 65534)
    for name in [*kept[:-1], *(f"{prefix}.{i:08x}.{host}" for i in range(MAX_REMOVALS + 3))]:
        (trace_env / name).mkdir(mode=0o700)
    first = exported_trace("Sweeper")
    assert load_trace(first)
    assert len(_staging_dirs(trace_env)) == len(kept) + 3 + 1  # the leave_staging one counts among the dead
    second = exported_trace("Sweeper", tp_rank=1)
    assert sorted(os.listdir(trace_env)) == sorted([first.name, second.name, *kept])


@pytest.mark.parametrize("name", [
    f"{STAGING_PREFIX}99999999999.{{ns}}.ab.{{host}}",  # the issue's: pid > 2**31 (os.kill: OverflowError)
    f"{STAGING_PREFIX}99999999999.{{ns}}.0a1b2c3d.{{host}}",
    f"{STAGING_PREFIX}2147483648.{{ns}}.0a1b2c3d.{{host}}",
    f"{STAGING_PREFIX}{output_dir.PID_MAX + 1}.{{ns}}.0a1b2c3d.{{host}}",
    f"{STAGING_PREFIX}0.{{ns}}.0a1b2c3d.{{host}}",
    f"{STAGING_PREFIX}-1.{{ns}}.0a1b2c3d.{{host}}",
    f"{STAGING_PREFIX}1{'0' * 200}.{{ns}}.0a1b2c3d.{{host}}",
    f"{STAGING_PREFIX}12.{'9' * 30}.0a1b2c3d.{{host}}",
    f"{STAGING_PREFIX}12.{{ns}}.0a1b2c3d.h\x1b[2Jst",
    f"{STAGING_PREFIX}12.{{ns}}.0a1b2c3d.",
])
def test_staging_names_out_of_range_are_not_ours(name: str) -> None:
    """Every field of a staging name is bounded; a name we could not have written is no staging name."""
    here = output_dir.Here.now()
    assert StagingName.parse(name.format(ns=here.pid_namespace, host=here.host)) is None


def test_the_sweep_runs_after_the_trace_is_published(trace_env: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """Planted staging names can cost the sweep time, never the caller or the trace: it runs last, once
    per process and directory."""
    seen: list[bool] = []
    real_sweep = output_dir.sweep

    def sweep(dir_fd: int, **kwargs: Any) -> list[output_dir.StaleTemp]:
        seen.append(final.exists())
        return real_sweep(dir_fd, **kwargs)

    monkeypatch.setattr(output_dir, "sweep", sweep)
    final = trace_env / "cuda_graph_capture-Last-TP-0.json.gz"
    assert export_mm("Last") == final
    assert wait_for_exports(60) and seen == [True]
    # one complete sweep per process and directory: the next export does not list it again
    assert export_mm("Last", tp_rank=1) is not None
    assert wait_for_exports(60) and seen == [True]


def test_exit_waits_for_the_export_not_for_its_sweep(tmp_path: Path) -> None:
    """A sweep of a directory full of planted names must not hold up interpreter exit once the trace is
    saved (the child's sweep never returns: exit completes, the trace is there, no "not saved")."""
    done = run_case("export_with_endless_sweep", env=export_env(tmp_path))
    assert "not saved" not in done.stderr, done.stderr
    path = Path(done.stdout.strip())
    assert load_trace(path)["capture_trace"]["runner"] == "Swept"


def test_capture_trace_ls_lists_temps_and_clean_removes_dead_ones(trace_env: Path) -> None:
    path = exported_trace("Listed")
    dead = _dead_process_staging(trace_env)
    parsed = StagingName.parse(dead)
    assert parsed is not None
    running = f"{STAGING_PREFIX}{os.getpid()}.{parsed.pid_namespace}.0a1b2c3d.{parsed.host}"
    (trace_env / running).mkdir(mode=0o700)
    before = sorted(os.listdir(trace_env))
    done = capture_trace("ls", str(trace_env))
    assert done.returncode == 0, done.stderr
    assert f"temporary {dead}: 1,000 B, its process is gone: stale (capture-trace clean removes it)" in done.stdout
    assert f"temporary {running}: 0 B, pid {os.getpid()} on" in done.stdout and "kept" in done.stdout
    assert "Listed" in done.stdout
    assert sorted(os.listdir(trace_env)) == before  # ls lists; it never deletes
    done = capture_trace("clean", str(trace_env))
    assert done.returncode == 0, done.stderr
    assert f"temporary {dead}: 1,000 B, its process is gone: removed" in done.stdout
    assert f"temporary {running}: 0 B, pid {os.getpid()} on" in done.stdout and "kept" in done.stdout
    assert sorted(os.listdir(trace_env)) == sorted([path.name, running])


# -- failures: None when known, names that fit, one line whatever the name ----------------------------


def test_runner_names_up_to_the_final_name_limit_work(trace_env: Path) -> None:
    """The longest name that fits (the one over it: ``test_export::test_bad_input_is_one_warning_line``)."""
    fits = "R" * 223  # cuda_graph_capture-{223}-TP-0.json.gz is exactly 255 bytes
    path = export_mm(fits)
    assert path is not None and len(path.name.encode()) == 255
    assert wait_for_exports(60) and load_trace(path)["capture_trace"]["runner"] == fits


def test_newline_in_the_profiler_directory_stays_on_one_line(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, caplog: pytest.LogCaptureFixture
) -> None:
    monkeypatch.setenv("SGLANG_ENABLE_CUDA_GRAPH_CAPTURE_TRACE", "1")
    monkeypatch.delenv("SGLANG_CAPTURE_TRACE_STRICT", raising=False)
    blocker = tmp_path / "a\nfile"
    blocker.write_text("x")
    monkeypatch.setenv("SGLANG_TORCH_PROFILER_DIR", str(blocker))
    with caplog.at_level(logging.WARNING, logger="mixins"):
        assert export_mm("Ok") is None
    [message] = warnings_of(caplog)
    assert "\n" not in message and "a\\nfile/graph_capture_profile/cuda_graph_capture-Ok-TP-0.json.gz" in message
    assert message.startswith("CUDA graph capture trace of Ok not saved") and "NotADirectoryError" in message
    monkeypatch.setenv("SGLANG_CAPTURE_TRACE_STRICT", "1")
    with pytest.raises(NotADirectoryError):
        export_mm("Ok")


def test_a_profiler_directory_that_is_not_utf8_gives_traces_the_analyzer_reads(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """SGLANG_TORCH_PROFILER_DIR with byte 0xff: the trace's traceName held a lone surrogate (``\\udcff``)
    and every analyzer command refused the file ("invalid utf-16 surrogate pair"). What we write names the
    byte as ``\\xff``; ``capture-trace summary`` finds and reads both the eager and the lazy trace."""
    from mixins import lazy_trace

    directory = os.fsdecode(os.fsencode(tmp_path) + b"/dir\xffname")
    monkeypatch.setenv("SGLANG_ENABLE_CUDA_GRAPH_CAPTURE_TRACE", "1")
    monkeypatch.setenv("SGLANG_TORCH_PROFILER_DIR", directory)
    monkeypatch.setenv("SGLANG_CAPTURE_TRACE_BACKGROUND", "0")
    monkeypatch.delenv("SGLANG_CAPTURE_TRACE_STRICT", raising=False)
    eager = export_mm("Bytes")
    lazy = lazy_trace.trace_for(None, "LazyBytes")
    assert lazy.admit()
    lazy.add(mm_profile(1, 3), None)
    assert eager is not None and eager.parent == lazy.final.parent
    shown = str(tmp_path) + "/dir\\xffname/graph_capture_profile/"
    for path in (eager, lazy.final):
        assert load_trace(path)["traceName"] == shown + path.name
    done = capture_trace("summary", os.fsencode(eager.parent))
    assert done.returncode == 0, done.stderr
    assert "Bytes" in done.stdout and "LazyBytes" in done.stdout


@pytest.mark.parametrize(("umask", "trace_mode", "dir_mode"), [(0o077, 0o600, 0o700), (0o022, 0o644, 0o755),
                                                            (0o000, 0o644, 0o755)])
def test_the_umask_narrows_what_we_create_and_never_widens_it(
    tmp_path: Path, umask: int, trace_mode: int, dir_mode: int
) -> None:
    """The trace (0644) and every directory we create (0755) lose the umask's bits: 077 gives a private
    trace; under 000 no other user can write a directory (they were 0777, then refused, also under 022)."""
    profiler_dir = tmp_path / "new" / "deeper"
    env = export_env(profiler_dir, SGLANG_CAPTURE_TRACE_BACKGROUND="0")
    final = profiler_dir / "graph_capture_profile" / "cuda_graph_capture-Synced-TP-0.json.gz"
    done = subprocess.run(child("synchronous_export"), env=env, capture_output=True, text=True, umask=umask)
    assert done.returncode == 0 and "refusing" not in done.stderr, done.stderr  # the child asserts a path
    assert load_trace(final)["capture_trace"]["runner"] == "Synced"
    assert os.stat(final).st_mode & 0o777 == trace_mode
    for directory in (tmp_path / "new", profiler_dir, final.parent):
        assert os.stat(directory).st_mode & 0o777 == dir_mode, directory


def test_own_world_writable_directory_is_refused_with_the_fix_named(
    trace_env: Path, caplog: pytest.LogCaptureFixture
) -> None:
    """A 0777 directory of ours (an earlier version under umask 000 made one) is not trusted silently: the
    WARNING names the fix; after it exports resume."""
    trace_env.mkdir()
    os.chmod(trace_env, 0o777)
    with caplog.at_level(logging.WARNING, logger="mixins"):
        assert export_mm("Fixed") is None
    assert f"(mode 0777); if nobody else uses it, `chmod o-w {trace_env}` (or remove it) lets exports resume" in (
        caplog.text)
    os.chmod(trace_env, 0o755)
    path = exported_trace("Fixed")
    assert load_trace(path)


def test_live_process_exporting_the_same_name_is_warned_about(
    trace_env: Path, caplog: pytest.LogCaptureFixture
) -> None:
    """Two live processes of a run exporting one runner x rank: one WARNING naming both pids. A file
    whose writer has exited (an earlier run) is replaced silently, as upstream does."""
    env = export_env(trace_env.parent, SGLANG_CAPTURE_TRACE_BACKGROUND="0")
    holder = subprocess.Popen(child("export_and_hold", "Twin", "0"), env=env, stdin=subprocess.PIPE,
                              stdout=subprocess.PIPE, text=True)
    try:
        assert holder.stdout is not None
        held = Path(holder.stdout.readline().strip())  # its trace is final: it exported synchronously
        with caplog.at_level(logging.WARNING, logger="mixins"):
            path = export_mm("Twin")
            assert path == held and wait_for_exports(60)
    finally:
        holder.communicate("")
    [message] = warnings_of(caplog)
    assert f"{held} of pid {holder.pid} (still running) is replaced by pid {os.getpid()}'s" in message
    assert "export runner Twin with the same ranks" in message
    assert load_trace(path)["capture_trace"]["pid"] == os.getpid()

    done = subprocess.run(child("export_and_hold", "Twin", "1"), env=env, input="", capture_output=True, text=True)
    assert done.returncode == 0, done.stderr
    caplog.clear()
    with caplog.at_level(logging.WARNING, logger="mixins"):
        path = exported_trace("Twin", tp_rank=1)
    assert warnings_of(caplog) == []


def test_directory_is_fsynced_after_the_rename(tmp_path: Path) -> None:
    env = export_env(tmp_path, SGLANG_CAPTURE_TRACE_BACKGROUND="0")
    lines = strace_log(child("synchronous_export"), env, "renameat,renameat2,fsync", tmp_path)
    renames = [i for i, line in enumerate(lines) if '"cuda_graph_capture-Synced-TP-0.json.gz"' in line]
    assert len(renames) == 1
    match = re.search(r'renameat2?\(\d+, "trace\.json\.gz", (\d+), ', lines[renames[0]])
    assert match is not None, lines[renames[0]]
    assert any(f"fsync({match[1]})" in line for line in lines[renames[0] + 1:])  # the directory, after the rename
    assert any("fsync(" in line for line in lines[:renames[0]])  # and the file, before it
