"""The sglang patch against the real, installed sglang (run inside each venv built by .ci/sglang_venvs.sh).

Skipped as a whole where sglang is not importable (the main venv). Every test drives sglang's own code:
real classes (instances from ``object.__new__``), real hooks or real ``capture()``, real CPU profilers.
"""

from __future__ import annotations

import importlib
import importlib.util
import itertools
import json
import multiprocessing
import multiprocessing.forkserver
import os
import re
import site
from importlib import metadata
from pathlib import Path
from typing import Any

import cpu_shims
import pytest
import real_sglang
from fake_sglang import clean_env
from orders import expected_states, installed_after, orders
from real_sglang import HOOK, INIT, RUNNERS

from mixins import sglang_patch
from mixins.doctor import forget_orphans
from mixins.sglang_targets import NATIVE_EXPORT, TARGETS, Strategy

HERE = Path(__file__).resolve().parent
RUNNER_IDS = [cls for _, cls in RUNNERS]


# -- one file per runner class, through each era's real path -----------------------------------------


@pytest.mark.parametrize("case", ["on", "switch off", "package not installed"])
@pytest.mark.parametrize(("module", "name"), RUNNERS, ids=RUNNER_IDS)
def test_one_trace_per_runner_class(module: str, name: str, case: str, trace_dir: Path,
                                    monkeypatch: pytest.MonkeyPatch) -> None:
    """One file of ours per runner class; installed with the switch off, no file at all (sglang's native export
    reads the same switch). The control, unpatched sglang, writes nothing of ours (era C writes its native
    file; era B EAGLE runners crash with AttributeError, the upstream bug the patch fixes)."""
    cls = real_sglang.class_or_skip(module, name)
    with real_sglang.activation(case, monkeypatch):
        try:
            real_sglang.run_capture_path(real_sglang.make_runner(cls))
        except AttributeError as exc:
            assert case == "package not installed" and (INIT in str(exc) or HOOK in str(exc))
    if case == "package not installed":
        assert not any(real_sglang.is_ours(p) for p in real_sglang.traces(trace_dir))
    else:
        real_sglang.the_one_trace(trace_dir, name, case)


def test_draft_worker_base_runner_gets_draft_name(trace_dir: Path, installed: None) -> None:
    _, cls = real_sglang.base_runner()
    real_sglang.run_capture_path(real_sglang.make_runner(cls, draft_worker=True))
    assert real_sglang.trace_names(trace_dir) == [f"cuda_graph_capture-Draft{cls.__name__}-TP-0.json.gz"]


def test_native_export_taken_over_while_installed(trace_dir: Path) -> None:
    """Era C: the runner module's name for the native export is ours while installed, sglang's after."""
    decode = real_sglang.module_or_skip(real_sglang.DECODE)
    from sglang.srt.utils import profile_utils

    native = profile_utils.export_cuda_graph_capture_trace
    assert vars(decode)[NATIVE_EXPORT] is native
    sglang_patch.PATCH.install()
    try:
        assert vars(decode)[NATIVE_EXPORT] is not native
        assert profile_utils.export_cuda_graph_capture_trace is native  # no global change to sglang
    finally:
        sglang_patch.PATCH.uninstall()
    assert vars(decode)[NATIVE_EXPORT] is native


def _per_batch_size_files(directory: Path, monkeypatch: pytest.MonkeyPatch) -> list[str]:
    """Drive the decode runner's real profiling path with upstream's SGLANG_GRAPH_BATCH_CAPTURE=1 and
    return the names written: its scheduled profiler flushes once per captured shape."""
    decode = real_sglang.module_or_skip(real_sglang.DECODE)
    runner = real_sglang.make_runner(decode.DecodeCudaGraphRunner)
    runner.capture_bs = [1]  # 0.5.18-0.5.21 name each flush after capture_bs
    import torch

    directory.mkdir()
    monkeypatch.setenv("SGLANG_GRAPH_BATCH_CAPTURE", "1")
    monkeypatch.delenv("SGLANG_ENABLE_CUDA_GRAPH_CAPTURE_TRACE", raising=False)
    monkeypatch.setenv("SGLANG_TORCH_PROFILER_DIR", str(directory))
    monkeypatch.chdir(directory)
    cpu_shims.disable_cuda_memory_history()
    with real_sglang.rank_context():
        prof_context = runner._init_profile_context_and_memory_record()
        runner._profile_trace_tag = "bs_1"  # 0.5.22+ name it after the tag the capture loop sets
        with prof_context as prof:
            for _ in range(3):  # schedule(wait=2, active=1) where the mode exists: the third step flushes
                (torch.ones(4) * 2).sum()
                prof.step()
        runner._post_process_after_profile(prof)
    return real_sglang.trace_names(directory)


def test_per_batch_size_mode_untouched(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """Upstream's per-batch-size files (SGLANG_GRAPH_BATCH_CAPTURE) are the same with and without our
    patch, and we add none. Keyed on what this sglang writes, not on which methods it has."""
    unpatched = _per_batch_size_files(tmp_path / "unpatched", monkeypatch)
    if not unpatched:
        pytest.skip("this sglang writes no per-batch-size file under SGLANG_GRAPH_BATCH_CAPTURE=1")
    assert len(unpatched) == 1 and re.fullmatch(r"(DecodeCudaGraphRunner_)?bs_1_rank0\.json\.gz", unpatched[0])
    sglang_patch.PATCH.install()
    try:
        patched = _per_batch_size_files(tmp_path / "patched", monkeypatch)
    finally:
        sglang_patch.PATCH.uninstall()
    assert patched == unpatched
    assert not any(real_sglang.is_ours(p) for p in real_sglang.traces(tmp_path / "patched"))


# -- install / uninstall on the real classes -----------------------------------------------------------


def test_uninstall_restores_vars_exactly() -> None:
    real_sglang.import_targets()
    classes = {(t.module, t.cls): cls for t in TARGETS if (cls := real_sglang.target_class(t)) is not None}
    modules = {t.module: importlib.import_module(t.module) for t in TARGETS if (t.module, t.cls) in classes}
    before = {key: dict(vars(cls)) for key, cls in classes.items()}
    before_globals = {name: dict(vars(module)) for name, module in modules.items()}
    sglang_patch.PATCH.install()
    # identity, not ==: a wrapt proxy compares equal to what it wraps
    changed = [
        key
        for key, cls in classes.items()
        if vars(cls).keys() != before[key].keys() or any(vars(cls)[n] is not v for n, v in before[key].items())
    ]
    assert changed, "install() patched nothing"
    sglang_patch.PATCH.uninstall()
    for key, cls in classes.items():
        after = dict(vars(cls))
        assert after.keys() == before[key].keys(), key
        assert all(after[name] is before[key][name] for name in after), key
    for name, module in modules.items():
        assert all(vars(module)[k] is v for k, v in before_globals[name].items()), name


#: The orders run on real sglang (each a fresh process of ~30 s, so a named subset of the generated
#: matrix that test_patch_machinery runs in full on FAKE sglang), checked by the same model.
REAL_ORDERS = (
    ("import",),
    ("import", "install"),
    ("install", "import"),
    ("install", "uninstall", "import"),
    ("import", "install", "install"),
    ("import", "install", "uninstall", "uninstall"),
    ("install", "uninstall", "install", "import"),
    ("import", "install", "uninstall", "install"),  # reinstall after an uninstall, on imported classes
    # sglang 0.5.23's start-up order in a scheduler process: its module imports the runner modules,
    # then run_scheduler_process() calls load_plugins() (the real loader, our real entry point)
    ("import", "plugin"),
)


@pytest.fixture(scope="module")
def fork() -> Any:
    """``multiprocessing``'s fork server for the module's orders, each still a fresh process: it first imports
    ``fork_preload.py``. The modules it preloads are learnt once per environment, from an order in a spawned
    interpreter. Both start with no SGLANG_* and the start-up hook off: only the orders' steps activate."""
    with pytest.MonkeyPatch.context() as monkeypatch:
        for key in [k for k in os.environ if k.startswith("SGLANG_")]:
            monkeypatch.delenv(key)
        monkeypatch.setenv("SGLANG_CAPTURE_TRACE_STARTUP_HOOK", "0")
        if not real_sglang.learnt_modules():
            real_sglang.remember_modules(_run_order(multiprocessing.get_context("spawn"), ("import",))[1])
        context = multiprocessing.get_context("forkserver")
        context.set_forkserver_preload(["fork_preload"])
        multiprocessing.forkserver.ensure_running()
    return context


def _run_order(context: Any, steps: tuple[str, ...], **env: str) -> tuple[dict, list[str]]:
    """``real_sglang.run_order(*steps)`` in a fresh process with no SGLANG_* but ``env`` and the start-up hook
    off; its result and the modules it ended with."""
    receive, send = context.Pipe(duplex=False)
    environ = clean_env(SGLANG_CAPTURE_TRACE_STARTUP_HOOK="0", **env)
    child = context.Process(target=real_sglang.order_in_child, args=(steps, environ, send))
    child.start()
    send.close()
    result, modules = receive.recv()
    child.join()
    assert child.exitcode == 0 and isinstance(result, dict), result
    return result, modules


@pytest.fixture(scope="module")
def pristine(fork: Any) -> dict:
    return _run_order(fork, ("import",))[0]["final"]


def _module_exists(name: str) -> bool:
    forget_orphans(name.partition(".")[0])  # what a failed package import left behind (doctor's one rule)
    try:
        return importlib.util.find_spec(name) is not None
    except ModuleNotFoundError:  # a parent package is absent in this version
        return False


def _verified_here(qualname: str) -> str | None:
    """What the rows' data says about this row in the installed sglang (None: its module is absent, or
    needs an ``optional`` dependency this venv lacks, so the row waits for an import that never comes)."""
    target = next(t for t in TARGETS if t.qualname == qualname)
    if not _module_exists(target.module):
        return None
    if target.optional and real_sglang.target_class(target) is None:
        return None
    return "applied" if metadata.version("sglang").split(".post")[0] in target.read_in else "skipped"


@pytest.mark.parametrize("steps", REAL_ORDERS, ids="-".join)
def test_order_on_real_sglang(steps: tuple[str, ...], pristine: dict, fork: Any) -> None:
    """Status after every step as the model says (a repeated install changes nothing); while installed every
    applied row's method wrapped once, by us, and nothing else wrapped twice; exact restore."""
    assert steps in orders(3)
    if "plugin" in steps and not _module_exists("sglang.srt.plugins"):
        pytest.skip(f"sglang {metadata.version('sglang')} has no plugin loader (0.5.13+)")
    result, _ = _run_order(fork, steps, SGLANG_ENABLE_CUDA_GRAPH_CAPTURE_TRACE="1")
    for done, states in enumerate(result["after_each"], start=1):
        assert states == expected_states(steps[:done], list(states), _verified_here), steps[:done]
    assert not any("wrapped*" in v for v in pristine.values())
    if installed_after(steps):
        wrapped = [v for v in result["end"].values() if v.startswith("wrapped*")]
        assert wrapped and all(v.startswith(real_sglang.WRAPPED_ONCE) for v in wrapped), result["end"]
        assert result["applied"]
        adopted = {t.qualname for t in TARGETS if t.strategy is Strategy.ADOPT_HOOK}
        assert all(result["end"][q].startswith(real_sglang.WRAPPED_ONCE) for q in set(result["applied"]) - adopted)
    else:
        assert result["end"] == pristine and result["applied"] == []
    assert result["final"] == pristine


# -- activation in every process ----------------------------------------------------------------------


def test_plugin_entry_point_and_pth_are_installed() -> None:
    eps = [ep for ep in metadata.entry_points(group="sglang.srt.plugins") if ep.name == "capture_trace"]
    assert [ep.value for ep in eps] == ["mixins.sglang_patch:register"]
    pth = [Path(d) / "sglang_capture_trace.pth" for d in site.getsitepackages()]
    installed_pth = [p for p in pth if p.exists()]
    assert installed_pth, f"sglang_capture_trace.pth not in {site.getsitepackages()}"
    repo_pth = HERE.parent.parent / "mixins" / "sglang_capture_trace.pth"
    assert installed_pth[0].read_text() == repo_pth.read_text()


@pytest.mark.parametrize(("startup_hook", "load_plugins"), [(True, False), (False, True), (False, False)],
                         ids=["through the .pth", "through the plugin loader", "control: no activation"])
def test_spawn_child_exports_only_when_activated(tmp_path: Path, monkeypatch: pytest.MonkeyPatch, startup_hook: bool,
                                                 load_plugins: bool) -> None:
    """A spawned child that never calls install(): the .pth start-up hook or sglang's plugin loader patches
    it and it writes its one file; with the hook off and no loader call (the control) it is unpatched."""
    if load_plugins:
        real_sglang.module_or_skip("sglang.srt.plugins")
    module, cls = real_sglang.base_runner()
    for key in [k for k in os.environ if k.startswith("SGLANG_")]:
        monkeypatch.delenv(key)
    monkeypatch.setenv("SGLANG_ENABLE_CUDA_GRAPH_CAPTURE_TRACE", "1")
    monkeypatch.setenv("SGLANG_TORCH_PROFILER_DIR", str(tmp_path))
    monkeypatch.setenv("SGLANG_CAPTURE_TRACE_STARTUP_HOOK", "1" if startup_hook else "0")
    monkeypatch.chdir(tmp_path)
    report = tmp_path / "report.json"
    ctx = multiprocessing.get_context("spawn")
    child = ctx.Process(target=real_sglang.capture_in_child, args=(module, cls.__name__, str(report), load_plugins))
    child.start()
    child.join(timeout=600)
    assert child.exitcode == 0
    activated = startup_hook or load_plugins
    assert json.loads(report.read_text())["installed"] is activated
    ours = [p.name for p in real_sglang.traces(tmp_path) if real_sglang.is_ours(p)]
    assert ours == ([f"cuda_graph_capture-{cls.__name__}-TP-0.json.gz"] if activated else [])


def test_rank_and_size_discovery_read_the_real_sglang_parallel_state() -> None:
    """sglang's own rank and size state beats the runner's attributes once written, and its 'not written' /
    'not initialised' errors are survived, falling back to the runner (tp_size as sglang's CudaGraphRunner
    copies it from server_args) — no fake module involved."""
    import types

    from mixins.naming import Ranks, discover_ranks, discover_sizes

    importlib.import_module("sglang.srt.distributed.parallel_state")  # every era has it; not initialised here
    model_runner = types.SimpleNamespace(server_args=types.SimpleNamespace(tp_size=2))
    runner = types.SimpleNamespace(tp_rank=5, pp_rank=0, pp_size=1, model_runner=model_runner)
    ranks, sizes = discover_ranks(runner), discover_sizes(runner, Ranks(1, 0, 1, "runner"))
    assert (ranks.tp_rank, ranks.pp_rank, ranks.pp_size, ranks.source) == (5, 0, 1, "runner")
    assert (sizes.tp_size, sizes.source) == (2, "runner")
    if importlib.util.find_spec("sglang.srt.runtime_context") is None:
        return  # sglang < 0.5.14: only the (uninitialised) parallel_state above exists
    from sglang.srt.runtime_context import get_parallel

    with get_parallel().override(tp_rank=3, tp_size=4, pp_rank=1, pp_size=2):
        ranks, sizes = discover_ranks(runner), discover_sizes(runner, Ranks(3, 1, 2, "sglang"))
    assert (ranks.tp_rank, ranks.pp_rank, ranks.pp_size, ranks.source) == (3, 1, 2, "sglang")
    assert (sizes.tp_size, sizes.source) == (4, "sglang")


@pytest.mark.parametrize(("module", "name"), RUNNERS, ids=RUNNER_IDS)
def test_shape_labels_are_unique_for_the_real_signature(module: str, name: str) -> None:
    """Every per-shape method of this sglang, called as its capture loop calls it (positionally: size,
    forward, then stream / LoRA variant / attention variant where the signature has them), labels each
    combination differently (the loop itself needs a GPU; the label comes from the real signature)."""
    import inspect

    from mixins.capture_trace import shape_label
    from mixins.sglang_targets import SHAPE_METHODS

    cls = real_sglang.class_or_skip(module, name)
    method = next((vars(cls)[m] for m in SHAPE_METHODS if m in vars(cls)), None)
    if method is None:
        pytest.skip(f"{name} defines no per-shape method in this sglang")
    choices = {"stream_idx": (None, 1), "variant_label": (None, "lora", "nolora"), "attention_variant": (None, "dsa")}
    params = list(inspect.signature(method).parameters)[3:]  # after self, size, forward
    varying = [p for p in params if p in choices]
    combos = [dict(zip(varying, values, strict=True)) for values in itertools.product(*(choices[p] for p in varying))]
    runner: Any = object.__new__(cls)
    as_positional = params[: len(varying)] == varying  # as sglang's loop passes them
    labels = [
        shape_label(method, runner, (8, None, *combo.values()), {})
        if as_positional
        else shape_label(method, runner, (8, None), combo)
        for combo in combos
    ]
    assert all(label and label.startswith("capture::bs=8") for label in labels), labels
    assert len(set(labels)) == len(combos), labels
    if metadata.version("sglang").split(".post")[0] == "0.5.23" and name == "DecodeCudaGraphRunner":
        assert varying == ["stream_idx", "variant_label", "attention_variant"]  # the 0.5.23 signature
        assert "capture::bs=8,variant=lora,stream=1,attention=dsa" in labels
