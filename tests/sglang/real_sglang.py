"""Shared pieces of the real-sglang tests: which runner classes to try, how to build one without a GPU,
how to drive its real profiling path, and how to read what was written. Imported by the tests and by
their spawned and forked children; shims themselves live in ``cpu_shims.py``."""

from __future__ import annotations

import contextlib
import gzip
import importlib
import importlib.util
import json
import os
import sys
import traceback
import types
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import Any

import cpu_shims

OLD = "sglang.srt.model_executor.cuda_graph_runner"
DECODE = "sglang.srt.model_executor.runner.decode_cuda_graph_runner"
SPEC = "sglang.srt.speculative"

#: (module, class) of every runner that profiles graph capture in some version; tests skip the absent.
RUNNERS: tuple[tuple[str, str], ...] = (
    (OLD, "CudaGraphRunner"),
    (DECODE, "DecodeCudaGraphRunner"),
    (f"{SPEC}.eagle_draft_cuda_graph_runner", "EAGLEDraftCudaGraphRunner"),
    (f"{SPEC}.eagle_draft_extend_cuda_graph_runner", "EAGLEDraftExtendCudaGraphRunner"),
    (f"{SPEC}.multi_layer_eagle_draft_extend_cuda_graph_runner", "MultiLayerEagleDraftExtendCudaGraphRunner"),
    (f"{SPEC}.frozen_kv_mtp_cuda_graph_runner", "FrozenKVMTPCudaGraphRunner"),
    (f"{SPEC}.uno_cuda_graph_runner", "UnoDecodeCudaGraphRunner"),
    ("sglang.srt.hardware_backend.xpu.graph_runner.xpu_graph_runner", "XPUGraphRunner"),
)

HOOK = "_post_process_after_profile"
INIT = "_init_profile_context_and_memory_record"


class MissingDependency(ImportError):
    """An sglang module exists but cannot be imported because another package is missing from the venv:
    a broken test environment (fix the deps list), never a "not in this version" skip."""


def import_optional(module_name: str) -> types.ModuleType | None:
    """The module, or None when this sglang has no such module (it or a parent package is absent).
    Any other missing module, a third-party dependency such as xgrammar or sgl_kernel, raises
    MissingDependency naming it."""
    from mixins.doctor import import_cleanly

    try:
        return import_cleanly(module_name)
    except ModuleNotFoundError as exc:
        missing = exc.name or ""
        if missing and (module_name == missing or module_name.startswith(missing + ".")):
            return None
        raise MissingDependency(
            f"importing {module_name} needs {missing or exc}, which is not installed in this venv "
            "(add it to tests/sglang-envs/sglang-<version>-cpu-deps.txt or to cpu_shims.py)"
        ) from exc


def load_class(module_name: str, cls_name: str) -> type | None:
    """The class, or None when this sglang has no such module or class (see import_optional)."""
    module = import_optional(module_name)
    cls = vars(module).get(cls_name) if module is not None else None
    return cls if isinstance(cls, type) else None


def module_or_skip(name: str, *, optional_dependencies: bool = False) -> types.ModuleType:
    """The module, or a skip naming the sglang version that has none; a missing dependency fails (a broken
    venv) unless the module has ``optional_dependencies`` this venv may lack (the diffusion runtime's; the
    scheduler's stack, which DSpark's module imports): then it skips too."""
    from importlib import metadata

    import pytest

    try:
        module = import_optional(name)
    except MissingDependency as exc:
        if not optional_dependencies:
            raise
        pytest.skip(str(exc))
    if module is None:
        pytest.skip(f"{name} does not exist in sglang {metadata.version('sglang')}")
    return module


def class_or_skip(module_name: str, cls_name: str) -> type:
    """:func:`load_class`, or a skip naming the sglang version that has no such class."""
    from importlib import metadata

    import pytest

    cls = load_class(module_name, cls_name)
    if cls is None:
        pytest.skip(f"no {module_name}.{cls_name} in sglang {metadata.version('sglang')}")
    return cls


def base_runner() -> tuple[str, type]:
    """The decode runner the others derive from, and its module: ``DecodeCudaGraphRunner`` (0.5.14+), else
    ``CudaGraphRunner``."""
    for module, name in ((DECODE, "DecodeCudaGraphRunner"), (OLD, "CudaGraphRunner")):
        cls = load_class(module, name)
        if cls is not None:
            return module, cls
    raise AssertionError("no base CUDA-graph runner in this sglang")


def target_class(target: Any) -> type | None:
    """A row's class as load_class gives it, or None when the row's module needs an ``optional``
    dependency this venv lacks (torch_npu, the diffusion runtime's): as on a server without it."""
    try:
        return load_class(target.module, target.cls)
    except MissingDependency:
        if not target.optional:
            raise
        return None


def make_runner(cls: type, *, draft_worker: bool = False) -> Any:
    """An instance without ``__init__``: only the attributes the profiling path reads."""
    runner: Any = object.__new__(cls)
    runner.enable_profile_cuda_graph = True
    runner.model_runner = types.SimpleNamespace(
        is_draft_worker=draft_worker,
        tp_rank=0,
        pp_rank=0,
        pp_size=1,
        device="cpu",
        gpu_id=0,
        model=None,
        tp_group=None,
        server_args=types.SimpleNamespace(enable_cudagraph_gc=True),
    )
    # capture() of era A/B with nothing to capture: the profiler still starts and stops around the loop.
    runner.capture_bs = []
    runner.compile_bs = []
    runner.num_tokens_per_bs = 1
    runner.graphs = {}
    runner.output_buffers = {}
    runner.enable_pdmux = False
    return runner


@contextmanager
def patched_attributes(target: Any, values: dict[str, Any]) -> Iterator[None]:
    """Those of ``values`` that ``target`` has (a module of this release, or None: nothing) replaced for the block."""
    saved = {name: getattr(target, name) for name in values if hasattr(target, name)}
    for name in saved:
        setattr(target, name, values[name])
    try:
        yield
    finally:
        for name, value in saved.items():
            setattr(target, name, value)


@contextmanager
def rank_context() -> Iterator[None]:
    """TP rank 0 without a process group: sglang >= 0.5.16 reads it from its runtime context (which
    must be stated); 0.5.14/0.5.15's decode hook calls get_tensor_model_parallel_rank() (shimmed)."""
    decode = importlib.import_module(DECODE) if load_class(DECODE, "DecodeCudaGraphRunner") else None
    with patched_attributes(decode, cpu_shims.TP_RANK_0):
        try:
            from sglang.srt.runtime_context import get_parallel
        except ImportError:
            yield
            return
        with get_parallel().override(tp_rank=0):
            yield


def run_capture_path(runner: Any) -> None:
    """Drive the runner's real profiling path on CPU.

    Era A/B (the class's module has ``CudaGraphRunner``): the real ``capture()`` — for EAGLE runners
    their own ``capture()``, which calls ``CudaGraphRunner.capture(self)``. Era C: the real
    ``_init_profile_context_and_memory_record()`` profiler around some CPU work, then the real hook.
    """
    import torch

    cpu_shims.disable_cuda_memory_history()
    old = importlib.import_module(OLD) if load_class(OLD, "CudaGraphRunner") is not None else None
    with rank_context():
        if old is not None:
            with patched_attributes(old, cpu_shims.ERA_A_CAPTURE):
                runner.capture()
            return
        prof_context = getattr(runner, INIT)()
        with prof_context as prof:
            (torch.ones(4) * 2).sum()
        getattr(runner, HOOK)(prof)


def traces(directory: Path) -> list[Path]:
    return sorted((directory / "graph_capture_profile").glob("*.json.gz"))


def trace_names(directory: Path) -> list[str]:
    return [p.name for p in traces(directory)]


def is_ours(path: Path) -> bool:
    """Our exporter puts a ``capture_trace`` metadata key first; sglang's native export does not."""
    with gzip.open(path, "rt") as handle:
        return "capture_trace" in json.load(handle)


#: The cases of every never-profiled row's test: ours on; either switch off; our package not installed (the
#: control: sglang itself writes nothing).
CASES = ("on", "switch off", "--enable-profile-cuda-graph off", "package not installed")


@contextmanager
def activation(case: str, monkeypatch: Any) -> Iterator[bool]:
    """The patch installed for the block (not for the control), our switch off for "switch off"; yields
    whether sglang's --enable-profile-cuda-graph is to be on."""
    from mixins import sglang_patch

    if case == "switch off":
        monkeypatch.setenv("SGLANG_ENABLE_CUDA_GRAPH_CAPTURE_TRACE", "0")
    if case != "package not installed":
        sglang_patch.PATCH.install()
    try:
        yield case != "--enable-profile-cuda-graph off"
    finally:
        sglang_patch.PATCH.uninstall()


def the_one_trace(directory: Path, runner: str, case: str) -> Path | None:
    """With ``case`` "on", exactly one file of ours, named after ``runner``; any other case, no file (None)."""
    if case != "on":
        assert trace_names(directory) == []
        return None
    assert trace_names(directory) == [f"cuda_graph_capture-{runner}-TP-0.json.gz"]
    (path,) = traces(directory)
    assert is_ours(path)
    return path


def check_profiled_row(name: str, case: str) -> None:
    """What ``status()`` (and so doctor) says of the row that profiles runner ``name``: installed, applied (not
    deferred), profiled by us, and what its trace lacks (``Target.limits``); "not installed" for the control."""
    from mixins import sglang_patch
    from mixins.sglang_targets import Strategy

    profiling = (Strategy.PROFILE_CAPTURE, Strategy.PROFILE_LAZY_CAPTURE)
    (row,) = [s for s in sglang_patch.PATCH.status() if s.target.cls == name and s.target.strategy in profiling]
    profiled = "; ".join(filter(None, (sglang_patch.PROFILED_BY_US, row.target.limits)))
    installed = case != "package not installed"
    assert str(row).split(": ", 1)[1] == (f"applied ({profiled})" if installed else "not installed")


def segment_labels(directory: Path, runner: str, case: str) -> list[str] | None:
    """:func:`the_one_trace`'s segment labels (None: no file); its metadata names the runner."""
    from tests.trace_files import load_trace, range_names

    path = the_one_trace(directory, runner, case)
    if path is None:
        return None
    trace = load_trace(path)
    assert trace["capture_trace"]["runner"] == runner
    return range_names(trace)


# -- the patch matrix, run in fresh subprocesses ------------------------------------------------------


def describe(value: Any) -> str:
    """``wrapped*N[TAGS](what is inside)`` (N of our wrappers, each one's tag), or what the value is; comparable
    across processes."""
    from mixins.patching import is_wrapped

    tags = []
    while is_wrapped(value):
        tags.append(str(getattr(value, "_self_capture_trace_tag", "not ours")))
        value = value.__wrapped__
    if value is MISSING:
        inner = "absent"
    else:
        code = getattr(getattr(value, "__func__", value), "__code__", None)
        where = f"{code.co_filename}:{code.co_firstlineno}" if code is not None else repr(type(value))
        inner = f"{getattr(value, '__qualname__', type(value).__name__)}@{where}"
    return f"wrapped*{len(tags)}[{','.join(tags)}]({inner})" if tags else inner


MISSING = object()
#: What :func:`describe` says of a method wrapped once, by the sglang patch.
WRAPPED_ONCE = "wrapped*1[sglang_patch]("


def fingerprint() -> dict[str, str]:
    """What every target class holds in ``vars()`` for every patched or adopted name, and the module
    names we may replace; comparable across processes."""
    from mixins.sglang_targets import NATIVE_EXPORT, TARGETS

    out: dict[str, str] = {}
    for target in TARGETS:
        cls = target_class(target)
        if cls is None:
            continue
        for name in (target.method, *target.base_requires, "capture"):
            out[f"{target.module}.{target.cls}.{name}"] = describe(vars(cls).get(name, MISSING))
        namespace = vars(importlib.import_module(target.module))
        for name in (NATIVE_EXPORT, "profile"):
            out[f"{target.module}:{name}"] = describe(namespace.get(name, MISSING))
    return out


def import_targets() -> None:
    """Import every target module this sglang has; a row's module whose ``optional`` dependencies (the
    diffusion runtime's, torch_npu) this venv lacks stays unimported, as on a server without them."""
    from mixins.sglang_targets import TARGETS, modules

    optional = {t.module for t in TARGETS if t.optional}
    for name in modules():
        try:
            import_optional(name)
        except MissingDependency:
            if name not in optional:
                raise


def run_order(*steps: str) -> dict[str, Any]:
    """One fresh process of the real-sglang matrix: run the steps (``plugin`` is sglang's own
    ``load_plugins()``), reporting every row's status after each, then what the target classes hold, then
    uninstall and what they hold after."""
    cpu_shims.prepare()
    from orders import run_steps

    from mixins import sglang_patch

    def load_plugins() -> None:
        from sglang.srt.plugins import load_plugins

        load_plugins()

    after_each = run_steps(steps, do_import=import_targets, load_plugins=load_plugins)
    import_targets()
    result = {"after_each": after_each, "end": fingerprint(), "applied": sglang_patch.PATCH.applied()}
    sglang_patch.PATCH.uninstall()
    result["final"] = fingerprint()
    return result


def capture_in_child(module: str, cls_name: str, report: str, load_plugins: bool) -> None:
    """A spawned child of the activation tests: a runner's real profiling path, with nothing here calling
    ``install()`` (only the .pth start-up hook or sglang's own plugin loader may have patched sglang)."""
    cpu_shims.prepare()
    if load_plugins:
        from sglang.srt.plugins import load_plugins as sglang_load_plugins

        sglang_load_plugins()
    cls = load_class(module, cls_name)
    assert cls is not None, f"{module}.{cls_name} missing"
    run_capture_path(make_runner(cls))
    from mixins import sglang_patch, wait_for_exports

    wait_for_exports()
    Path(report).write_text(json.dumps({"installed": sglang_patch.PATCH.installed}))


def order_in_child(steps: tuple[str, ...], environ: dict[str, str], conn: Any) -> None:
    """A fresh process's target: this environment, then :func:`run_order`'s result (or the traceback) and the
    modules the process ended with, sent on ``conn``."""
    os.environ.clear()
    os.environ.update(environ)
    try:
        conn.send((run_order(*steps), list(sys.modules)))
    except BaseException:
        conn.send((traceback.format_exc(), []))


# Fresh processes of the matrix fork from a server (``fork_preload.py``) that has imported the third-party
# modules (torch, transformers, openai, triton, ...) an order ended with, learnt once per environment (kept in
# ``sys.prefix``: CI's cached venv per sglang version). Never sglang's own modules, nor this project's: their
# import order against ``install()`` is what the matrix tests, so each order still imports them, and only them,
# in a process that has never seen them. A child then costs what importing sglang itself costs (~6 s instead of
# ~18 s); a stale or unwritable list only costs that time again, never a result.
LEARNT = os.path.join(sys.prefix, ".capture-trace-fork-server-modules.json")
#: top-level names whose import order the tests are about, and the processes' own main modules
NOT_PRELOADED = ("sglang", "mixins", "_sglang_capture_trace_bootstrap", "_sglang_capture_trace_switches", "__main__",
                 "__mp_main__")


def learnt_modules() -> list[str]:
    try:
        with open(LEARNT) as f:
            modules = json.load(f)
    except (OSError, ValueError):
        return []
    return [m for m in modules if isinstance(m, str)] if isinstance(modules, list) else []


def remember_modules(modules: list[str]) -> None:
    """Keep the third-party ones of ``modules`` (in the order they were first imported) for :func:`learnt_modules`."""
    tmp = f"{LEARNT}.{os.getpid()}"
    try:
        with open(tmp, "w") as f:
            json.dump([name for name in modules if name.split(".")[0] not in NOT_PRELOADED], f)
        os.replace(tmp, LEARNT)
    except OSError:  # a read-only environment: learnt again next time
        with contextlib.suppress(OSError):
            os.unlink(tmp)


# -- runners sglang never profiles (PROFILE_CAPTURE rows) ----------------------------------------------

PIECEWISE = "sglang.srt.model_executor.piecewise_cuda_graph_runner"
PREFILL = "sglang.srt.model_executor.runner.prefill_cuda_graph_runner"


@contextmanager
def sglang_config(tp_group: Any = None, **fields: Any) -> Iterator[None]:
    """A published sglang config with these server-args fields, for releases that have one (0.5.16+), restored
    afterwards: ``use_context`` where it exists (0.5.22+), else sglang's own scoped test override
    (``override_server_args``), which puts back all that publishing changes (the parallel bag too, or a later
    test reads this config's sizes). Also rank 0, and ``tp_group`` where given (``get_parallel().override``)."""
    runtime_context: Any = import_optional("sglang.srt.runtime_context")  # 0.5.14+
    if runtime_context is None:
        yield
        return
    from sglang.srt.server_args import ServerArgs

    if hasattr(runtime_context, "use_context"):
        args = ServerArgs(model_path="dummy", device="cpu", **fields)  # no download: nothing reads the model
        published = runtime_context.use_context(runtime_context.create_context(args, role="test"))
    else:
        published = runtime_context.get_context().override_server_args(device="cpu", **fields)
    group = {} if tp_group is None else {"tp_group": tp_group}
    with published, runtime_context.get_parallel().override(tp_rank=0, **group):
        yield


BREAKABLE = "sglang.srt.model_executor.breakable_cuda_graph_runner"
MULTI_LAYER = f"{SPEC}.multi_layer_eagle_draft_extend_cuda_graph_runner"
