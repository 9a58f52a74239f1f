"""What each fresh interpreter of ``test_patch_machinery.py`` runs: ``python -m machinery_child CASE [ARG...]``.

``sys.path`` starts with one FAKE sglang package from ``fakes/`` (so nothing here needs real sglang),
then this directory and the repository. The profile export is replaced by a spy, so a case checks who
gets exported, how often and under which name. Every case prints one ``RESULT {json}`` line.
"""

from __future__ import annotations

import importlib
import json
import logging
import sys
from collections.abc import Callable
from typing import Any

import wrapt
from orders import run_steps
from real_sglang import MISSING, describe

from mixins import capture_trace, sglang_patch
from mixins.patching import is_wrapped
from mixins.sglang_targets import HOOK, INIT, SHAPE_METHODS, Strategy

DECODE = "sglang.srt.model_executor.runner.decode_cuda_graph_runner"
EAGLE = "sglang.srt.speculative.eagle_draft_cuda_graph_runner"
XPU = "sglang.srt.hardware_backend.xpu.graph_runner.xpu_graph_runner"
OLD = "sglang.srt.model_executor.cuda_graph_runner"
ERA_C_CLASSES = ((DECODE, "DecodeCudaGraphRunner"), (EAGLE, "EAGLEDraftCudaGraphRunner"), (XPU, "XPUGraphRunner"))

exported: list[list[str]] = []


def spy(runner: object, prof: object, *, draft_base: type | None = None) -> None:
    exported.append([type(runner).__name__, str(prof)])


def out(**values: Any) -> None:
    print("RESULT " + json.dumps(values))


def snapshot(cls: type) -> dict[str, str]:
    names = ("capture", HOOK, INIT, *SHAPE_METHODS)
    return {name: describe(vars(cls).get(name, MISSING)) for name in names}


def classes(pairs: tuple[tuple[str, str], ...]) -> list[type]:
    return [getattr(importlib.import_module(module), name) for module, name in pairs]


def exercise_era_c() -> dict[str, list[str]]:
    """Call every era-C runner's hook once: who exported, ours or the (fake) native export."""
    profile_utils = importlib.import_module("sglang.srt.utils.profile_utils")
    exported.clear()
    profile_utils.calls.clear()
    for cls in classes(ERA_C_CLASSES):
        cls()._post_process_after_profile("prof")
    return {"ours": [e[0] for e in exported], "native": list(profile_utils.calls)}


def states() -> dict[str, str]:
    return {s.target.qualname: s.state.value for s in sglang_patch.PATCH.status()}


# -- cases ---------------------------------------------------------------------------------------------


def matrix(*steps: str) -> None:
    """One order of import / install / plugin (the entry point sglang's loader calls) / uninstall on the
    era-C fake, with every row's status after each step; then a capture, an uninstall and the restored
    state."""
    after_each = run_steps(steps, do_import=lambda: classes(ERA_C_CLASSES), load_plugins=sglang_patch.register)
    end = {cls.__name__: snapshot(cls) for cls in classes(ERA_C_CLASSES)}
    result = {"after_each": after_each, "end": end, "applied": sglang_patch.PATCH.applied(), "run": exercise_era_c()}
    sglang_patch.PATCH.uninstall()
    out(**result, final={cls.__name__: snapshot(cls) for cls in classes(ERA_C_CLASSES)}, restored=exercise_era_c())


def defer() -> None:
    sglang_patch.PATCH.install()
    out(run=exercise_era_c(), decode_hook=states()[f"{DECODE}.DecodeCudaGraphRunner.{HOOK}"])


def adopt() -> None:
    eagle = importlib.import_module(EAGLE).EAGLEDraftCudaGraphRunner
    base = importlib.import_module(OLD).CudaGraphRunner
    try:
        eagle().capture()
        unpatched = "ok"
    except AttributeError:
        unpatched = "AttributeError"
    before = snapshot(eagle)
    sglang_patch.PATCH.install()
    eagle().capture()
    base().capture()
    installed = list(exported)
    sglang_patch.PATCH.uninstall()
    out(unpatched=unpatched, installed=installed, restored=snapshot(eagle) == before, hook_before=before[HOOK])


def inline() -> None:
    module = importlib.import_module(OLD)
    eagle = importlib.import_module(EAGLE).EAGLEDraftCudaGraphRunner
    original = module.profile
    sglang_patch.PATCH.install()
    during_install = module.profile is original
    prof = eagle().capture()
    module.CudaGraphRunner().capture()
    after_call = module.profile is original
    sglang_patch.PATCH.uninstall()
    out(
        exported=[e[0] for e in exported],
        kwargs=prof.kwargs,
        during_install=during_install,
        after_call=after_call,
        restored=not is_wrapped(vars(module.CudaGraphRunner)["capture"]),
    )


def idempotent() -> None:
    first = [str(s) for s in sglang_patch.PATCH.install()]
    second = [str(s) for s in sglang_patch.PATCH.install()]
    imported_by_install = "sglang" in sys.modules
    decode = importlib.import_module(DECODE).DecodeCudaGraphRunner
    hook = vars(decode)[HOOK]
    sglang_patch.PATCH.uninstall()
    sglang_patch.PATCH.uninstall()
    out(
        repeat_same=first == second,
        all_waiting=bool(first) and all(line.endswith(": waiting for import") for line in first),
        imported=imported_by_install,
        depth_one=not is_wrapped(hook.__wrapped__),
        wrapped=is_wrapped(hook),
        installed=sglang_patch.PATCH.installed,
    )


def failing_patch() -> None:
    def boom(target: object, cls: type, tag: str) -> Callable[[], None]:
        raise RuntimeError("patch exploded")

    sglang_patch._STRATEGIES[Strategy.TAKE_OVER_NATIVE] = boom
    sglang_patch.PATCH.install()
    decode = importlib.import_module(DECODE).DecodeCudaGraphRunner
    out(imported=decode.__name__, applied=sglang_patch.PATCH.applied(),
        decode_hook=states()[f"{DECODE}.DecodeCudaGraphRunner.{HOOK}"])


def missing() -> None:
    frozen = "sglang.srt.speculative.frozen_kv_mtp_cuda_graph_runner"
    importlib.import_module(frozen)
    importlib.import_module(DECODE)
    sglang_patch.PATCH.install()
    rows = states()
    decode = {f"{DECODE}.DecodeCudaGraphRunner.{HOOK}", f"{DECODE}.DecodeCudaGraphRunner.capture_one_shape"}
    out(frozen_rows=sorted({s for q, s in rows.items() if q.startswith(f"{frozen}.FrozenKVMTPCudaGraphRunner")}),
        decode_applied=decode <= set(sglang_patch.PATCH.applied()),
        xpu_hook=rows[f"{XPU}.XPUGraphRunner.{HOOK}"])


def overlaid() -> None:
    decode = importlib.import_module(DECODE).DecodeCudaGraphRunner
    original = vars(decode)[HOOK]
    sglang_patch.PATCH.install()

    def theirs(wrapped: Any, instance: Any, args: tuple[Any, ...], kwargs: dict[str, Any]) -> Any:
        return wrapped(*args, **kwargs)

    their_wrapper = wrapt.wrap_function_wrapper(decode, HOOK, theirs)
    ours_under_theirs = is_wrapped(their_wrapper.__wrapped__, sglang_patch.TAG)
    shape_method = next(name for name in SHAPE_METHODS if name in vars(decode))
    replacement = lambda *args, **kwargs: None  # noqa: E731 - someone replaces the method outright
    setattr(decode, shape_method, replacement)
    sglang_patch.PATCH.uninstall()
    out(
        ours_under_theirs=ours_under_theirs,
        theirs_kept=vars(decode)[HOOK] is their_wrapper,
        theirs_wraps_the_original=their_wrapper.__wrapped__ is original,
        replaced_kept=vars(decode)[shape_method] is replacement,
    )


def register_twice() -> None:
    sglang_patch.register()
    sglang_patch.register()
    out(installed=sglang_patch.PATCH.installed)


CASES: dict[str, Callable[..., None]] = {
    f.__name__: f
    for f in (matrix, defer, adopt, inline, idempotent, failing_patch, missing, overlaid, register_twice)
}


def main(argv: list[str]) -> None:
    logging.basicConfig(level=logging.DEBUG, stream=sys.stderr, format="%(levelname)s %(name)s %(message)s")
    capture_trace.export_from_runner = spy  # the strategies look it up at call time
    CASES[argv[0]](*argv[1:])


if __name__ == "__main__":
    main(sys.argv[1:])
