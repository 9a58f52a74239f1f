"""Patch the installed sglang at import time so every CUDA-graph capture profile becomes a trace file.

What is patched, where and why is data (``mixins.sglang_targets.TARGETS``); this module only knows how
to apply each strategy. Lazy and order-proof: one ``wrapt`` post-import hook per target module, so it
works whether sglang is imported before or after ``install()``, and it never imports sglang itself. A
target missing in the installed version is skipped with a DEBUG line; any error while patching is
logged and never breaks sglang's own import.

Activation in every process: ``register()`` is the ``sglang.srt.plugins`` entry point (sglang >= 0.5.13
calls it in each scheduler process), and the ``sglang_capture_trace.pth`` start-up hook
(``_sglang_capture_trace_bootstrap``, docs/DESIGN.md §4) covers sglang without a plugin loader.
"""

from __future__ import annotations

import logging
import sys
import threading
import types
from collections.abc import Callable
from typing import Any

import wrapt

from mixins import settings
from mixins.sglang_targets import NATIVE_EXPORT, TARGETS, Strategy, Target, modules

logger = logging.getLogger("mixins.sglang_patch")

TAG = "sglang_patch"

Undo = Callable[[], None]

_lock = threading.RLock()
_installed = False
_applied: dict[str, Undo] = {}  # qualname -> how to restore it, in the order applied
_pending: set[str] = set()  # modules with a post-import hook registered and not fired yet


# -- public API --------------------------------------------------------------------------------------


def install() -> list[str]:
    """Patch every known target now, or when its module is imported; returns the qualified names
    handled (patched, or scheduled because their module is not imported yet). Idempotent."""
    global _installed
    with _lock:
        if _installed:
            logger.info("sglang-capture-trace: sglang patches already installed; nothing changed")
            return _handled()
        _installed = True
        for name in modules():
            if name in _pending:
                continue  # a hook from an earlier install() still waits for this module
            _pending.add(name)
            wrapt.register_post_import_hook(_on_import, name)  # runs at once if already imported
        handled = _handled()
        logger.info("sglang-capture-trace: %d sglang targets handled", len(handled))
        return handled


def uninstall() -> None:
    """Restore every patched class and module exactly (``vars(cls)`` as before install())."""
    global _installed
    with _lock:
        if not _installed:
            logger.debug("sglang-capture-trace: sglang patches not installed; nothing to undo")
            return
        _installed = False
        for qualname, undo in reversed(list(_applied.items())):
            try:
                undo()
            except Exception:
                logger.warning("sglang-capture-trace: could not restore %s", qualname, exc_info=True)
        _applied.clear()


def is_installed() -> bool:
    return _installed


def applied() -> list[str]:
    """Qualified names patched right now (scheduled ones excluded)."""
    with _lock:
        return list(_applied)


def register() -> None:
    """The ``sglang.srt.plugins`` entry point: install when the switch is on. Runs in every sglang
    process, possibly many times; never raises (a plugin error must not stop the server)."""
    try:
        if not settings.trace_enabled():
            logger.debug("sglang-capture-trace: %s is off; sglang not patched", settings.ENABLE)
            return
        install()
    except Exception:
        logger.warning("sglang-capture-trace: could not install the sglang patches", exc_info=True)


# -- applying the table --------------------------------------------------------------------------------


def _handled() -> list[str]:
    return [t.qualname for t in TARGETS if t.qualname in _applied or t.module not in sys.modules]


def _on_import(module: types.ModuleType) -> None:
    """Post-import hook: apply this module's rows. Catches everything (a raising hook breaks the import)."""
    try:
        with _lock:
            _pending.discard(module.__name__)
            if not _installed:
                return
            for target in TARGETS:
                if target.module != module.__name__ or target.qualname in _applied:
                    continue
                try:
                    undo = _apply(target, module)
                except Exception:
                    logger.warning("sglang-capture-trace: could not patch %s", target.qualname, exc_info=True)
                    continue
                if undo is not None:
                    _applied[target.qualname] = undo
                    logger.debug("sglang-capture-trace: patched %s (%s)", target.qualname, target.strategy.value)
    except Exception:  # pragma: no cover - defensive: never break sglang's import
        logger.warning("sglang-capture-trace: post-import hook for %s failed", module, exc_info=True)


def _skip(target: Target, reason: str) -> None:
    logger.debug("sglang-capture-trace: skipping %s: %s", target.qualname, reason)


def _apply(target: Target, module: types.ModuleType) -> Undo | None:
    """Check the row's structural preconditions on the real class, then apply its strategy."""
    from mixins.patching import find_attribute

    cls = vars(module).get(target.cls)
    if not isinstance(cls, type):
        _skip(target, f"no class {target.cls} in this sglang")
        return None
    missing = [name for name in target.requires if find_attribute(cls, name) is None]
    present = [name for name in target.absent if find_attribute(cls, name) is not None]
    if missing or present:
        _skip(target, f"{target.cls} lacks {missing}" if missing else f"{target.cls} already has {present}")
        return None
    if target.own and target.method not in vars(cls):
        _skip(target, f"{target.cls} does not define {target.method} itself")
        return None
    if target.code_names:
        names = _code_names(vars(cls).get(target.code_of or target.method))
        lacking = [name for name in target.code_names if name not in names]
        if lacking:
            _skip(target, f"{target.code_of or target.method} does not reference {lacking}")
            return None
    return _STRATEGIES[target.strategy](target, cls)


def _plain_function(attribute: Any) -> Any:
    """The function under any FunctionWrapper, staticmethod or classmethod."""
    while True:
        inner = getattr(attribute, "__wrapped__", None) or getattr(attribute, "__func__", None)
        if inner is None:
            return attribute
        attribute = inner


def _code_names(attribute: Any) -> set[str]:
    """Global and attribute names used by a function, including its nested functions."""
    code = getattr(_plain_function(attribute), "__code__", None)
    names: set[str] = set()
    stack = [code] if isinstance(code, types.CodeType) else []
    while stack:
        current = stack.pop()
        names.update(current.co_names)
        stack.extend(c for c in current.co_consts if isinstance(c, types.CodeType))
    return names


def _draft_base(target: Target, cls: type) -> type | None:
    return cls if target.draft_base else None


def _apply_hook(target: Target, cls: type) -> Undo | None:
    from mixins.capture_trace import patch_hook, unpatch_hook

    if not patch_hook(cls, target.method, tag=TAG, draft_base=_draft_base(target, cls)):
        _skip(target, "already wrapped")
        return None
    return lambda: _check_restored(unpatch_hook(cls, target.method, tag=TAG), target)


def _apply_shape(target: Target, cls: type) -> Undo | None:
    from mixins.capture_trace import patch_shape_method, unpatch_shape_method

    if not patch_shape_method(cls, target.method, tag=TAG):
        _skip(target, "already wrapped")
        return None
    return lambda: _check_restored(unpatch_shape_method(cls, target.method, tag=TAG), target)


def _check_restored(restored: bool, target: Target) -> None:
    if not restored:
        logger.warning("sglang-capture-trace: %s was re-wrapped by someone else; left as is", target.qualname)


# -- strategy: take over the native export (era C) ---------------------------------------------------


def _native_export_taken_over(prof_context: Any = None, *args: Any, **kwargs: Any) -> None:
    """Stands in for sglang's ``export_cuda_graph_capture_trace`` in the runner module while we are
    installed: our wrapper around the same hook writes the one file for this runner and rank."""
    logger.debug(
        "sglang-capture-trace: native capture-trace export (%s) handled by sglang-capture-trace",
        kwargs.get("runner_name"),
    )


def _apply_take_over(target: Target, cls: type) -> Undo | None:
    hook = vars(cls)[target.method]
    if NATIVE_EXPORT not in _code_names(hook):
        return _apply_hook(target, cls)  # no native export in this hook: a plain hook
    namespace: dict[str, Any] = getattr(_plain_function(hook), "__globals__", {})
    native = namespace.get(NATIVE_EXPORT)
    if not callable(native):
        # The hook reaches the native export some other way (e.g. through a module attribute): we
        # cannot switch it off, so leave the export to sglang rather than write two files.
        logger.info(
            "sglang-capture-trace: %s exports natively in a way we cannot take over; deferring to sglang's own export",
            target.qualname,
        )
        return None
    undo_hook = _apply_hook(target, cls)
    if undo_hook is None:
        return None
    if native is not _native_export_taken_over:
        namespace[NATIVE_EXPORT] = _native_export_taken_over

    def undo() -> None:
        if namespace.get(NATIVE_EXPORT) is _native_export_taken_over:
            namespace[NATIVE_EXPORT] = native
        else:
            logger.warning("sglang-capture-trace: %s was replaced by someone else; left as is", NATIVE_EXPORT)
        undo_hook()

    return undo


# -- strategy: inline profiling in capture() (era A) -------------------------------------------------


class _ProfileRecorder:
    """Stands in for the runner module's ``profile`` name during one capture() call: creates the real
    profiler and remembers it, so the profile can be exported after capture() has stopped it."""

    def __init__(self, factory: Callable[..., Any]) -> None:
        self.factory = factory
        self.created: list[Any] = []

    def __call__(self, *args: Any, **kwargs: Any) -> Any:
        prof = self.factory(*args, **kwargs)
        self.created.append(prof)
        return prof


def _apply_inline_capture(target: Target, cls: type) -> Undo | None:
    from mixins.capture_trace import bind_instance, export_from_runner
    from mixins.patching import unwrap_method, wrap_method

    namespace: dict[str, Any] = getattr(_plain_function(vars(cls)[target.method]), "__globals__", {})
    if not callable(namespace.get("profile")):
        _skip(target, "its module has no callable 'profile'")
        return None
    draft_base = _draft_base(target, cls)

    def capture_and_export(wrapped: Any, instance: Any, args: tuple[Any, ...], kwargs: dict[str, Any]) -> Any:
        # EAGLE runners (plain classes) call ``CudaGraphRunner.capture(self)``: bind_instance finds them.
        runner, args, call = bind_instance(wrapped, instance, args)
        current = namespace.get("profile")
        if current is None or isinstance(current, _ProfileRecorder) or not settings.trace_enabled():
            return call(*args, **kwargs)  # nested call (the outer one exports), or switched off
        recorder = _ProfileRecorder(current)
        namespace["profile"] = recorder
        try:
            result = call(*args, **kwargs)
        finally:
            if namespace.get("profile") is recorder:
                namespace["profile"] = current
        for prof in recorder.created[-1:]:
            export_from_runner(runner, prof, draft_base=draft_base)
        return result

    if not wrap_method(cls, target.method, capture_and_export, tag=TAG):
        _skip(target, "already wrapped")
        return None
    return lambda: _check_restored(unwrap_method(cls, target.method, tag=TAG), target)


# -- strategy: adopt the base's profiling helpers (era B EAGLE runners) ------------------------------


def _delegate(base: type, name: str, owner: type) -> Callable[..., Any]:
    from mixins.patching import find_attribute

    def delegate(self: Any, *args: Any, **kwargs: Any) -> Any:
        # Looked up per call (so it sees our wrapper on the base) and bound to *this* instance by the
        # descriptor protocol: calling ``base.name(self, ...)`` would not bind it, since wrapt only
        # binds an unbound call whose first argument is an instance of ``base``.
        found = find_attribute(base, name)
        if found is None:
            raise AttributeError(f"{base.__qualname__} has no attribute {name!r}")
        return found[1].__get__(self, type(self))(*args, **kwargs)

    delegate.__name__ = name
    delegate.__qualname__ = f"{owner.__qualname__}.{name}"
    delegate.__doc__ = f"Delegates to {base.__qualname__}.{name} (added by sglang-capture-trace)."
    delegate._capture_trace_adopted = TAG  # type: ignore[attr-defined]
    return delegate


def _apply_adopt(target: Target, cls: type) -> Undo | None:
    from mixins.patching import find_attribute

    module = sys.modules[cls.__module__]
    base = vars(module).get(target.base or "")
    if not isinstance(base, type):
        _skip(target, f"its module has no class {target.base}")
        return None
    lacking = [name for name in target.base_requires if find_attribute(base, name) is None]
    if lacking:
        _skip(target, f"{base.__qualname__} lacks {lacking} too (profiling is inline there)")
        return None
    added = {name: _delegate(base, name, cls) for name in target.base_requires}
    for name, function in added.items():
        setattr(cls, name, function)

    def undo() -> None:
        for name, function in added.items():
            if vars(cls).get(name) is function:
                delattr(cls, name)
            else:
                logger.warning(
                    "sglang-capture-trace: %s.%s was replaced by someone else; left as is", cls.__qualname__, name
                )

    return undo


_STRATEGIES: dict[Strategy, Callable[[Target, type], Undo | None]] = {
    Strategy.HOOK: _apply_hook,
    Strategy.OVERRIDE: _apply_hook,
    Strategy.SHAPE: _apply_shape,
    Strategy.TAKE_OVER_NATIVE: _apply_take_over,
    Strategy.INLINE_CAPTURE: _apply_inline_capture,
    Strategy.ADOPT_HOOK: _apply_adopt,
}
