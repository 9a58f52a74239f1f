"""The FAKE sglang packages in ``fakes/`` (a few modules named like sglang's, one per era's layout), how to run a
fresh interpreter on one, and what that interpreter runs: ``python -m fake_sglang CASE [ARG...]``.

In the child, ``sys.path`` starts with one fake's ``sglang`` (so nothing needs real sglang, and in the sglang
venvs the fake shadows the real package), then this directory and the repository. The profile export is
replaced by a spy, so a case checks who gets exported, how often and under which name. Every case prints one
``RESULT {json}`` line.
"""

from __future__ import annotations

import importlib
import json
import logging
import os
import shutil
import subprocess
import sys
from collections.abc import Callable
from pathlib import Path
from typing import Any

import wrapt
from orders import run_steps
from real_sglang import MISSING, describe

from mixins import capture_trace, sglang_patch
from mixins.patching import is_wrapped
from mixins.sglang_targets import HOOK, INIT, SHAPE_METHODS, Strategy

REPO = Path(__file__).resolve().parents[2]
HERE = Path(__file__).resolve().parent
FAKES = HERE / "fakes"

OLD = "sglang.srt.model_executor.cuda_graph_runner.CudaGraphRunner"
DECODE = "sglang.srt.model_executor.runner.decode_cuda_graph_runner.DecodeCudaGraphRunner"
XPU = "sglang.srt.hardware_backend.xpu.graph_runner.xpu_graph_runner.XPUGraphRunner"
EAGLE = "sglang.srt.speculative.eagle_draft_cuda_graph_runner.EAGLEDraftCudaGraphRunner"
FROZEN = "sglang.srt.speculative.frozen_kv_mtp_cuda_graph_runner"
ERA_C = (DECODE, EAGLE, XPU)
ERA_C_NAMES = [qualname.rsplit(".", 1)[1] for qualname in ERA_C]
#: The rows the era-C fake has the shape for; every other row of its modules is skipped.
ERA_C_APPLIED = {f"{DECODE}.{HOOK}", f"{DECODE}.capture_one_shape", f"{XPU}.{HOOK}"}
ERA_C_MODULES = {qualname.rsplit(".", 1)[0] for qualname in ERA_C}


# -- the launcher's side ---------------------------------------------------------------------------------------


def clean_env(**extra: str) -> dict[str, str]:
    env = {k: v for k, v in os.environ.items() if not k.startswith("SGLANG_")}
    env.update(extra)
    return env


def run_python(fake: Path, *args: str, **env: str) -> subprocess.CompletedProcess[str]:
    """``python ARGS`` with one fake's ``sglang``, this directory and the repository on the path, no SGLANG_*
    but ``env``, and the start-up hook off (an installed .pth would otherwise install at start-up)."""
    env.setdefault("SGLANG_CAPTURE_TRACE_STARTUP_HOOK", "0")
    return subprocess.run([sys.executable, *args], capture_output=True, text=True, timeout=120,
                          env=clean_env(PYTHONPATH=os.pathsep.join([str(fake), str(HERE), str(REPO)]), **env))


def run_child(fake: Path, case: str, *args: str, **env: str) -> tuple[dict[str, Any], str]:
    """Run one case below in a fresh interpreter on ``fake``: its result and its log."""
    proc = run_python(fake, "-m", "fake_sglang", case, *args, **env)
    assert proc.returncode == 0, proc.stderr[-3000:]
    line = next(li for li in proc.stdout.splitlines() if li.startswith("RESULT "))
    return json.loads(line.removeprefix("RESULT ")), proc.stderr


def fake_with(tmp_path: Path, era: str, replacements: dict[str, str]) -> Path:
    """A copy of one era's fake with some modules replaced by files from ``fakes/variants``."""
    root = tmp_path / era
    shutil.copytree(FAKES / era, root)
    for module, variant in replacements.items():
        path = root / (module.replace(".", "/") + ".py")
        path.parent.mkdir(parents=True, exist_ok=True)
        shutil.copy(FAKES / "variants" / variant, path)
    return root


# -- the child's side --------------------------------------------------------------------------------------------

exported: list[list[str]] = []


def spy(runner: object, prof: object, *, draft_base: type | None = None) -> None:
    exported.append([type(runner).__name__, str(prof)])


def out(**values: Any) -> None:
    print("RESULT " + json.dumps(values))


def load(qualname: str) -> Any:
    module, name = qualname.rsplit(".", 1)
    return getattr(importlib.import_module(module), name)


def snapshot(cls: type) -> dict[str, str]:
    names = ("capture", HOOK, INIT, *SHAPE_METHODS)
    return {name: describe(vars(cls).get(name, MISSING)) for name in names}


def era_c_classes() -> list[type]:
    return [load(qualname) for qualname in ERA_C]


def exercise_era_c() -> dict[str, list[str]]:
    """Call every era-C runner's hook once: who exported, ours or the (fake) native export."""
    profile_utils = importlib.import_module("sglang.srt.utils.profile_utils")
    exported.clear()
    profile_utils.calls.clear()
    for cls in era_c_classes():
        cls()._post_process_after_profile("prof")
    return {"ours": [e[0] for e in exported], "native": list(profile_utils.calls)}


def states() -> dict[str, str]:
    return {s.target.qualname: s.state.value for s in sglang_patch.PATCH.status()}


def matrix(*steps: str) -> None:
    """One order of import / install / plugin (the entry point sglang's loader calls) / uninstall on the
    era-C fake, with every row's status after each step; then a capture, an uninstall and the restored
    state."""
    after_each = run_steps(steps, do_import=era_c_classes, load_plugins=sglang_patch.register)
    end = {cls.__name__: snapshot(cls) for cls in era_c_classes()}
    result = {"after_each": after_each, "end": end, "applied": sglang_patch.PATCH.applied(), "run": exercise_era_c()}
    sglang_patch.PATCH.uninstall()
    out(**result, final={cls.__name__: snapshot(cls) for cls in era_c_classes()}, restored=exercise_era_c())


def defer() -> None:
    sglang_patch.PATCH.install()
    out(run=exercise_era_c(), decode_hook=states()[f"{DECODE}.{HOOK}"])


def adopt() -> None:
    eagle, base = load(EAGLE), load(OLD)
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
    base, eagle = load(OLD), load(EAGLE)
    module = sys.modules[base.__module__]
    original = module.profile
    sglang_patch.PATCH.install()
    during_install = module.profile is original
    prof = eagle().capture()
    base().capture()
    after_call = module.profile is original
    sglang_patch.PATCH.uninstall()
    out(
        exported=[e[0] for e in exported],
        kwargs=prof.kwargs,
        during_install=during_install,
        after_call=after_call,
        restored=not is_wrapped(vars(base)["capture"]),
    )


def idempotent() -> None:
    first = [str(s) for s in sglang_patch.PATCH.install()]
    second = [str(s) for s in sglang_patch.PATCH.install()]
    imported_by_install = "sglang" in sys.modules
    hook = vars(load(DECODE))[HOOK]
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
    decode = load(DECODE)
    out(imported=decode.__name__, applied=sglang_patch.PATCH.applied(), decode_hook=states()[f"{DECODE}.{HOOK}"])


def missing() -> None:
    importlib.import_module(FROZEN)
    load(DECODE)
    sglang_patch.PATCH.install()
    rows = states()
    out(frozen_rows=sorted({s for q, s in rows.items() if q.startswith(f"{FROZEN}.FrozenKVMTPCudaGraphRunner")}),
        decode_applied={f"{DECODE}.{HOOK}", f"{DECODE}.capture_one_shape"} <= set(sglang_patch.PATCH.applied()),
        xpu_hook=rows[f"{XPU}.{HOOK}"])


def overlaid() -> None:
    decode = load(DECODE)
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
