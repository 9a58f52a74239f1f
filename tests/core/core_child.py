"""What each fresh interpreter of the core tests runs: ``python -m core_child CASE [ARG...]`` (the command
from ``core_helpers.child``). Standard library at the top only: some cases check what a child imported.
"""

from __future__ import annotations

import json
import logging
import os
import sys
from typing import Any

RANK_RESULT = "RANK-RESULT "


def kineto_profile(*, record_shapes: bool = False) -> Any:
    """A real Kineto CPU profile: the profiler ``torch.profiler.profile`` drives, same export, without the
    wrapper's ``start()`` importing ``torch._inductor`` (3.3 s of CPU a process, paid already on a server)."""
    from torch.autograd import profiler

    return profiler.profile(use_kineto=True, record_shapes=record_shapes)


def mm_profile(repeats: int, rows: int = 4, *, record_shapes: bool = True) -> Any:
    """A real CPU profile around ``repeats`` (rows x 8) @ (8 x 3) matmuls: op shapes that identify it in a trace."""
    import torch

    with kineto_profile(record_shapes=record_shapes) as prof:
        for _ in range(repeats):
            torch.mm(torch.ones(rows, 8), torch.ones(8, 3))
    return prof


def _log_to_stderr() -> None:
    logging.basicConfig(level=logging.INFO, format="%(levelname)s %(message)s")


# -- test_export.py ------------------------------------------------------------------------------------


def switched_off_imports() -> None:
    """``import mixins`` and a switched-off export (unset, then "0"); prints which heavy modules got imported."""
    import mixins

    for _ in ("unset", "0"):
        assert mixins.export_cuda_graph_capture_trace(object(), runner_name="R", tp_rank=0) is None
        os.environ["SGLANG_ENABLE_CUDA_GRAPH_CAPTURE_TRACE"] = "0"
    print(sorted(m for m in ("torch", "sglang", "numpy") if m in sys.modules))


def efbig(directory: str) -> None:
    """The export under RLIMIT_FSIZE (a full disk, for this process's files) with SIGXFSZ ignored: EFBIG."""
    import resource
    import signal

    signal.signal(signal.SIGXFSZ, signal.SIG_IGN)
    _log_to_stderr()
    from mixins import export_cuda_graph_capture_trace, wait_for_exports

    prof = mm_profile(300)
    os.makedirs(directory + "/graph_capture_profile")
    resource.setrlimit(resource.RLIMIT_FSIZE, (20_000, 20_000))
    path = export_cuda_graph_capture_trace(prof, runner_name="Big", tp_rank=0)
    print("returned", path)
    print("waited", wait_for_exports(60))


def export_then_exit() -> None:
    """Exports and returns at once: the exit hook must wait for the compression thread."""
    from mixins import export_cuda_graph_capture_trace

    print(export_cuda_graph_capture_trace(mm_profile(2000), runner_name="Quick", tp_rank=0))


CONCURRENT_RUNNERS = ("Decode", "Draft", "DraftExtend")


def concurrent_exports(ranks_arg: str, go_fd: str) -> None:
    """Three runners on ``ranks_arg`` TP ranks each, one forked process each (torch imported once). Each
    profiles, prints ``ready``, blocks on ``go_fd`` until the test closes its write end (all wake at once),
    then exports into one directory. Exits 1 as soon as one fails, stopping the others."""
    import signal
    import traceback

    import torch  # noqa: F401 - imported before forking: what the children share

    from mixins import export_cuda_graph_capture_trace, wait_for_exports

    pids = []
    for runner in CONCURRENT_RUNNERS:
        for rank in range(int(ranks_arg)):
            pid = os.fork()
            if pid == 0:
                code = 1
                try:
                    prof = mm_profile(200, 1 + rank + 10 * CONCURRENT_RUNNERS.index(runner))
                    os.write(1, b"ready\n")  # one write, atomic on a pipe: lines of 24 writers never mix
                    assert os.read(int(go_fd), 1) == b""  # end of file: the go
                    export_cuda_graph_capture_trace(prof, runner_name=runner, tp_rank=rank)
                    assert wait_for_exports(120)
                    code = 0
                except BaseException:  # noqa: BLE001 - any failure is this child's exit status
                    traceback.print_exc()
                finally:
                    sys.stdout.flush()
                    sys.stderr.flush()
                    os._exit(code)  # never back into the parent's loop
            pids.append(pid)
    while pids:
        pid, status = os.wait()
        pids.remove(pid)
        if status != 0:
            for other in pids:
                os.kill(other, signal.SIGKILL)
            sys.exit(f"an exporting process failed (wait status {status})")


def slow_export_then_exit() -> None:
    """A trace still compressing at exit (exit timeout 0). Fault injected: the compression signals that it
    started and never finishes, so the process exits mid-export every run."""
    _log_to_stderr()
    from mixins import export_cuda_graph_capture_trace

    started, _ = _held_compression()  # never released
    export_cuda_graph_capture_trace(mm_profile(3), runner_name="Slow", tp_rank=0)
    started.wait()


def _held_compression() -> tuple[Any, Any]:
    """Fault injected: the next export's compression sets ``started`` and waits for ``release``; returns
    both events."""
    import threading

    from mixins import export

    started, release = threading.Event(), threading.Event()
    real_compress = export.compress_trace

    def held(*args: Any) -> None:
        started.set()
        release.wait()
        real_compress(*args)

    export.compress_trace = held  # type: ignore[assignment]
    return started, release


def _exit_at_once() -> None:
    """A multiprocessing child that does nothing: its exit runs the inherited exit hooks."""


def fork_while_compressing() -> None:
    """A multiprocessing child forked while this process's export compresses (exit timeout an hour: a child
    waiting for it would hang): prints the child's exit code (None: still waiting) and the path."""
    import multiprocessing

    _log_to_stderr()
    from mixins import export_cuda_graph_capture_trace, wait_for_exports

    started, release = _held_compression()
    path = export_cuda_graph_capture_trace(mm_profile(3), runner_name="Forked", tp_rank=0)
    started.wait()
    worker = multiprocessing.get_context("fork").Process(target=_exit_at_once)
    worker.start()
    worker.join(120)
    if worker.exitcode is None:
        worker.kill()
    release.set()
    assert wait_for_exports(), "the export is still running"
    print(worker.exitcode, path, flush=True)


def no_thread_to_be_had() -> None:
    """Thread.start fails as under a pids limit (fault injected): the export and a lazy runner's publisher
    run inline; prints each path."""
    import threading

    _log_to_stderr()
    from mixins import export_cuda_graph_capture_trace
    from mixins.lazy_trace import trace_for

    def cannot_start(self: threading.Thread) -> None:
        raise RuntimeError("can't start new thread")

    threading.Thread.start = cannot_start  # type: ignore[method-assign]
    print(export_cuda_graph_capture_trace(mm_profile(3), runner_name="NoThread", tp_rank=0), flush=True)
    lazy = trace_for(None, "LazyNoThread")
    for _ in range(2):
        if lazy.admit():
            lazy.add(mm_profile(2), None)
    print(lazy.final, flush=True)


def _lazy_runner(hold: int | None = None, *, own_profile: bool = False) -> tuple[Any, Any, Any]:
    """A lazy runner (one graph per new row count) wrapped as the ViT rows are; capturing ``hold`` rows sets
    the first event and waits for the second. ``own_profile``: each capture runs a profiler of its own."""
    import threading
    from contextlib import nullcontext

    import torch

    from mixins.capture_trace import profile_lazy_capture
    from mixins.patching import wrap_method

    inside, go_on = threading.Event(), threading.Event()

    class LazyRunner:
        def __init__(self) -> None:
            self.graphs: dict[int, Any] = {}

        def create_graph(self, x: Any) -> None:
            if x.shape[0] in self.graphs:
                return
            if x.shape[0] == hold:
                inside.set()
                go_on.wait()
            own = torch.profiler.profile(activities=[torch.profiler.ProfilerActivity.CPU]) if own_profile else None
            with own or nullcontext():
                self.graphs[x.shape[0]] = torch.mm(x, torch.ones(x.shape[1], 4))

    wrap_method(LazyRunner, "create_graph",
                profile_lazy_capture(lambda r: True, lambda a: (("tokens", a["x"].shape[0]),), "graphs"), tag="t")
    return LazyRunner(), inside, go_on


def two_threads_capture_at_once() -> None:
    """Two threads of one lazy runner capture new shapes at once (a handshake: the other arrives while this
    one is inside our profiler; torch 2.7's Kineto profiles on its first thread only). Prints the shapes."""
    import threading

    import torch

    from mixins import wait_for_exports

    runner, inside, go_on = _lazy_runner(hold=3)

    def second() -> None:
        inside.wait()
        try:
            runner.create_graph(torch.ones(5, 8))
        finally:
            go_on.set()

    other = threading.Thread(target=second)
    other.start()
    runner.create_graph(torch.ones(3, 8))  # held until the other thread's capture is done
    other.join()
    assert wait_for_exports(120)
    print(*sorted(runner.graphs), flush=True)


def capture_while_another_thread_profiles(out: str) -> None:
    """A user's profiler runs while a serving thread captures a new shape: ours starts no second one.
    Prints the shapes captured; the user's trace goes to ``out``."""
    import threading

    import torch

    from mixins import wait_for_exports

    runner, _, _ = _lazy_runner()
    user = torch.profiler.profile(activities=[torch.profiler.ProfilerActivity.CPU])
    user.start()
    serving = threading.Thread(target=runner.create_graph, args=(torch.ones(3, 8),))
    serving.start()
    serving.join()
    torch.mm(torch.ones(8, 8), torch.ones(8, 8))
    user.stop()
    user.export_chrome_trace(out)
    assert wait_for_exports(120)
    print(*sorted(runner.graphs), flush=True)


def lazy_write_held_at_exit() -> None:
    """A lazy shape's Kineto write still running at exit (timeout 0). Fault injected: once Kineto wrote the
    JSON into our staging directory the write never returns. Prints ``held``."""
    import threading

    import torch

    from mixins import kineto

    _log_to_stderr()
    written = threading.Event()
    real_write = kineto.write_json

    def held(prof: Any, path: str) -> None:
        real_write(prof, path)
        written.set()
        threading.Event().wait()

    kineto.write_json = held  # type: ignore[assignment]
    runner, _, _ = _lazy_runner()
    runner.create_graph(torch.ones(3, 8))
    written.wait()
    print("held", flush=True)


def capture_runs_its_own_profiler() -> None:
    """Profile-mode and lazy runners whose capture runs its own profiler in our thread (ending or taking over
    our Kineto session): the process lives, nothing is exported from a session not ours. Prints the paths."""
    import torch

    from mixins import wait_for_exports, with_capture_trace

    _log_to_stderr()

    def own_profile() -> Any:
        return torch.profiler.profile(activities=[torch.profiler.ProfilerActivity.CPU])

    @with_capture_trace(profile="capture")
    class EndsOurs:
        def capture(self) -> str:
            with own_profile():
                torch.mm(torch.ones(2, 2), torch.ones(2, 2))
            return "captured"

    @with_capture_trace(profile="capture")
    class TakesOver:
        def capture(self) -> str:
            own_profile().start()  # left running: ours stops it
            torch.mm(torch.ones(2, 2), torch.ones(2, 2))
            return "captured"

    assert EndsOurs().capture() == "captured"
    assert TakesOver().capture() == "captured"
    runner, _, _ = _lazy_runner(own_profile=True)
    runner.create_graph(torch.ones(3, 8))
    assert sorted(runner.graphs) == [3]
    assert wait_for_exports(120)
    out = os.environ["SGLANG_TORCH_PROFILER_DIR"] + "/graph_capture_profile"
    print(*(sorted(os.listdir(out)) if os.path.isdir(out) else []), "alive", flush=True)


# -- test_reliability.py -------------------------------------------------------------------------------


def _export_at_once(profs: list[Any], runner_name: str) -> None:
    """One thread per profile; every thread calls the export at the same moment (tp_rank = its index)."""
    import threading

    from mixins import export_cuda_graph_capture_trace

    barrier = threading.Barrier(len(profs))

    def export(i: int) -> None:
        barrier.wait()
        export_cuda_graph_capture_trace(profs[i], runner_name=runner_name, tp_rank=i)

    callers = [threading.Thread(target=export, args=(i,)) for i in range(len(profs))]
    for t in callers:
        t.start()
    for t in callers:
        t.join()


def parallel_exports(threads_arg: str, rounds_arg: str, out: str) -> None:
    """``threads`` threads export at once, ``rounds`` times, the last left to the exit hook. Prints the
    traces missing after each wait_for_exports()."""
    from mixins import wait_for_exports

    threads, rounds = int(threads_arg), int(rounds_arg)
    missing: list[str] = []
    for round_ in range(rounds):
        _export_at_once([mm_profile(300, 1 + i) for i in range(threads)], f"R{round_}")
        if round_ == rounds - 1:
            break  # the last round is left to the exit hook
        assert wait_for_exports(120)
        names = [f"cuda_graph_capture-R{round_}-TP-{i}.json.gz" for i in range(threads)]
        missing += [n for n in names if not os.path.exists(os.path.join(out, n))]
    print("missing after wait_for_exports:", missing)


class _HoldAfterKinetoWrites:
    """The real profile; once Kineto wrote into our staging directory, says ``kineto wrote`` and blocks
    there until the test's signal ends the process."""

    def __init__(self, prof: Any) -> None:
        self.prof = prof

    def export_chrome_trace(self, path: str) -> None:
        import signal

        self.prof.export_chrome_trace(path)
        print("kineto wrote", flush=True)
        while True:
            signal.pause()


def export_then_hold() -> None:
    """Prints ``profiled``, then holds an export after Kineto's write: the test SIGTERMs it."""
    from mixins import export_cuda_graph_capture_trace

    prof = mm_profile(2000)
    print("profiled", flush=True)
    export_cuda_graph_capture_trace(_HoldAfterKinetoWrites(prof), runner_name="Killed", tp_rank=0)


def leave_staging(directory: str) -> None:
    """A staging directory with a raw trace in it; prints its name and exits without clean-up."""
    from mixins.output_dir import make_staging

    fd = os.open(directory, os.O_RDONLY | os.O_DIRECTORY)
    name, stage = make_staging(fd)
    with open(os.open("trace.json", os.O_WRONLY | os.O_CREAT, 0o644, dir_fd=stage), "w") as raw:
        raw.write("{" * 1000)
    print(name, flush=True)
    os._exit(0)


def synchronous_export() -> None:
    """One small export (the test sets SGLANG_CAPTURE_TRACE_BACKGROUND=0 and traces it with strace)."""
    from mixins import export_cuda_graph_capture_trace

    assert export_cuda_graph_capture_trace(mm_profile(1), runner_name="Synced", tp_rank=0)


def export_and_hold(runner: str, rank_arg: str) -> None:
    """A live process of a run: exports synchronously, prints the path, then stays alive until stdin closes."""
    from mixins import export_cuda_graph_capture_trace

    print(export_cuda_graph_capture_trace(mm_profile(1), runner_name=runner, tp_rank=int(rank_arg)), flush=True)
    sys.stdin.read()


def export_with_endless_sweep() -> None:
    """Test synchronisation only: the sweep after publishing never returns; exit must not wait for it."""
    import threading

    from mixins import export_cuda_graph_capture_trace, output_dir

    def endless_sweep(*_args: Any, **_kwargs: Any) -> list[Any]:
        threading.Event().wait()
        return []

    output_dir.sweep = endless_sweep  # type: ignore[assignment]
    print(export_cuda_graph_capture_trace(mm_profile(1), runner_name="Swept", tp_rank=0), flush=True)


# -- test_kineto.py ------------------------------------------------------------------------------------


def kineto_export(path: str) -> None:
    """Torch's own export_chrome_trace, nothing of ours (the test traces it with strace)."""
    mm_profile(1).export_chrome_trace(path)


# -- test_naming.py / test_sizes.py: real gloo ranks ---------------------------------------------------


class _Runner:
    """A runner without any rank attribute of its own."""

    tp_rank = None


def gloo_discovered_rank(rank_arg: str, store: str) -> None:
    """One of two gloo ranks: prints RANK-RESULT [tp_rank, source] from discover_ranks alone."""
    import torch.distributed as dist

    from mixins.naming import discover_ranks

    rank = int(rank_arg)
    dist.init_process_group("gloo", init_method="file://" + store, rank=rank, world_size=2)
    r = discover_ranks(_Runner())
    dist.barrier()  # neither rank leaves before both are fully connected
    print(RANK_RESULT + json.dumps([r.tp_rank, r.source]), flush=True)
    dist.destroy_process_group()


class _Bare:
    """No rank attributes at all: ranks and sizes come from torch.distributed."""


def gloo_export(rank_arg: str, store: str) -> None:
    """One of two gloo ranks exports the same capture, ranks and sizes from torch.distributed; prints the path."""
    import torch
    import torch.distributed as dist

    from mixins import export_cuda_graph_capture_trace, wait_for_exports

    rank = int(rank_arg)
    dist.init_process_group("gloo", init_method="file://" + store, rank=rank, world_size=2)
    # torch.profiler.profile itself: its export adds Kineto's distributedInfo, which the test reads
    with torch.profiler.profile(activities=[torch.profiler.ProfilerActivity.CPU], record_shapes=True) as prof:
        torch.mm(torch.ones(2, 4), torch.ones(4, 3))  # the same capture on both ranks
    path = export_cuda_graph_capture_trace(prof, runner_name="GlooRunner", runner=_Bare())
    assert wait_for_exports(60)
    dist.barrier()  # neither rank leaves before both are fully connected
    print(RANK_RESULT + json.dumps(str(path)), flush=True)
    dist.destroy_process_group()


def fork_numbering(directory: str) -> None:
    """Two captures, then a fork while another thread (as it were) holds the capture-number lock: prints the
    parent's numbers, then the child's first and the parent's next (a child stuck on the lock hangs)."""
    from pathlib import Path

    from mixins.naming import capture_numbers

    d = Path(directory)
    print(capture_numbers.reserve(d, "t")[1], capture_numbers.reserve(d, "t")[1], flush=True)
    read, write = os.pipe()
    capture_numbers._lock.acquire()  # as if another parent thread were reserving a name at the fork
    pid = os.fork()
    if pid == 0:
        os.write(write, str(capture_numbers.reserve(d, "t")[1]).encode())
        os._exit(0)
    capture_numbers._lock.release()
    os.waitpid(pid, 0)
    print(os.read(read, 16).decode(), capture_numbers.reserve(d, "t")[1], flush=True)


# -- test_lazy_imports.py ------------------------------------------------------------------------------


def lazy_imports() -> None:
    """The package, the analyzer and the CLI's parser; then the public names on first use. Prints JSON."""
    import mixins
    import mixins.analysis
    import mixins.cli

    mixins.cli.build_parser()
    heavy = ("wrapt", "torch", "mixins.capture_trace", "mixins.export", "mixins.sglang_patch")
    before = sorted(m for m in heavy if m in sys.modules)
    import mixins.capture_trace
    import mixins.export
    from mixins import wait_for_exports, with_capture_trace

    same = (with_capture_trace is mixins.capture_trace.with_capture_trace
            and wait_for_exports is mixins.export.wait_for_exports)
    try:
        mixins.no_such_name  # noqa: B018 - the module's __getattr__ is what is tested
        missing = "no error"
    except AttributeError as exc:
        missing = str(exc)
    print(json.dumps({"before": before, "wrapt_after": "wrapt" in sys.modules, "same": same, "missing": missing,
                      "all": sorted(mixins.__all__), "dir_has_all": set(mixins.__all__) <= set(dir(mixins))}))


def exporter_imports() -> None:
    """Notes which module first asks for numpy (the frame that ran ``import numpy``), then runs the bootstrap,
    the patch and a real CPU capture through the decorator's profile mode. Prints JSON."""
    import importlib.machinery

    importers: list[str | None] = []

    class Watch(importlib.machinery.PathFinder):
        """Records who imports numpy; finds nothing itself (the real finders still do)."""

        @classmethod
        def find_spec(cls, name: str, path: Any = None, target: Any = None) -> None:
            if name == "numpy":
                frame = sys._getframe(1)
                while frame is not None and frame.f_code.co_filename.startswith("<frozen"):
                    frame = frame.f_back  # type: ignore[assignment]
                importers.append(frame.f_globals.get("__name__") if frame is not None else None)
            return None

    sys.meta_path.insert(0, Watch)  # type: ignore[arg-type]
    import _sglang_capture_trace_bootstrap  # noqa: F401
    import mixins.lazy_trace  # noqa: F401
    import mixins.memory_snapshot  # noqa: F401
    from mixins import sglang_patch, with_capture_trace

    sglang_patch.PATCH.install()
    sglang_patch.PATCH.uninstall()
    before_torch = sorted(m for m in ("numpy", "torch") if m in sys.modules)
    import torch

    @with_capture_trace(profile="capture", shape_method="capture_one_shape", shape_unit="tokens")
    class PrefillCudaGraphRunner:
        def capture(self) -> None:
            for size in (4, 2):
                self.capture_one_shape(size)

        def capture_one_shape(self, size: int) -> Any:
            return torch.mm(torch.ones(size, 8), torch.ones(8, 3))

    PrefillCudaGraphRunner().capture()
    print(json.dumps({"before_torch": before_torch, "importers": importers}))


# -- test_demo.py --------------------------------------------------------------------------------------


def kineto_filter() -> None:
    """Writes to descriptor 2 inside ``kineto_info_filtered`` (as Kineto's C++ does) around a real profile,
    then profiles outside it."""
    import warnings

    # torch without numpy warns at import through sys.stderr, before the filter: not this test's subject
    warnings.filterwarnings("ignore", message="Failed to initialize NumPy")
    import torch

    from mixins.demo import kineto_info_filtered

    def profile() -> None:
        with kineto_profile():
            torch.mm(torch.ones(2, 2), torch.ones(2, 2))

    with kineto_info_filtered():
        os.write(2, b"USDT:2026-12-01 19:13:47 4920:4920 SyncActivityProfilerHandler.cpp:52] profiler_start\n")
        os.write(2, b"STAGE:2024-01-02 03:04:05 17:17 ActivityProfilerController.cpp:312] Completed Stage: Warm Up\n")
        os.write(2, b"WARNING:2026-12-01 19:13:47 4920:4920 CuptiActivityApi.cpp:1] kept: a Kineto warning\n")
        os.write(2, b"kept: not Kineto's\nkept: USDT:not at the start of a line\n")
        profile()
        sys.stderr.write("kept: through sys.stderr\n")
        os.write(2, b"kept: unterminated")
    os.write(2, b"\n--- outside ---\n")
    profile()


# What sglang's ``configure_logger`` does (sgl-project/sglang, python/sglang/srt/utils/common.py, 0.4-0.5):
# ``logging.basicConfig(level=<--log-level>, format="[%(asctime)s<prefix>] %(message)s", force=True)``, or,
# when SGLANG_LOGGING_CONFIG_PATH is set, ``logging.config.dictConfig`` of that JSON file instead.
def sglang_logging_export(mode: str, config: str = "") -> None:
    """An export after sglang configured logging (``default``: its basicConfig; ``dict``: a user's
    SGLANG_LOGGING_CONFIG_PATH file), with sglang's own capture-progress line logged first."""
    import json
    import logging.config

    from mixins import export_cuda_graph_capture_trace

    if mode == "default":
        logging.basicConfig(level=logging.INFO, format="[%(asctime)s TP0] %(message)s", force=True,
                            stream=sys.stdout)
    else:
        with open(config) as f:
            logging.config.dictConfig(json.load(f))
    logging.getLogger("sglang.srt.model_executor.cuda_graph_runner").info("Capture cuda graph begin.")
    assert export_cuda_graph_capture_trace(mm_profile(1), runner_name="Logged", tp_rank=0)
    sys.stdout.flush()


def main(argv: list[str] | None = None) -> None:
    """Runs the case named first (every public function above is one), with the rest as its arguments."""
    case, *args = sys.argv[1:] if argv is None else argv
    if case.startswith("_") or not callable(run := globals().get(case)):
        sys.exit(f"core_child: no case {case!r}")
    run(*args)


if __name__ == "__main__":
    main()

