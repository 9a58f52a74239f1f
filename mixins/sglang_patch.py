"""Patch the installed sglang at import time so every CUDA-graph capture profile becomes a trace file: the rows
are data (``sglang_targets.TARGETS``), this module applies them (docs/DESIGN.md §5); ``register()`` is the
plugin entry point (§4).
"""

from __future__ import annotations

import inspect
import logging
import sys
import threading
import types
from collections.abc import Callable, Mapping
from dataclasses import dataclass
from enum import Enum
from typing import Any

import wrapt

from mixins import settings
from mixins.patching import Wrapper, find_attribute, wrap_method
from mixins.sglang_targets import (
    EXEC_CONFIG,
    GLOBAL_SERVER_ARGS,
    HOOK,
    INIT,
    NATIVE_EXPORT,
    NATIVE_PROFILE_NAMES,
    PROFILE_FLAG,
    RUNTIME_CONTEXT,
    SERVER_ARGS_OWNERS,
    TARGETS,
    Strategy,
    Target,
)

logger = logging.getLogger("mixins.sglang_patch")

TAG = "sglang_patch"

Undo = Callable[[], None]


class State(str, Enum):
    NOT_INSTALLED = "not installed"
    WAITING = "waiting for import"
    APPLIED = "applied"
    SKIPPED = "skipped"
    DEFERRED = "deferred to native"


@dataclass(frozen=True)
class RowStatus:
    """One row's state; ``reason`` says why it was skipped or deferred."""

    target: Target
    state: State
    reason: str = ""

    def __str__(self) -> str:
        return f"{self.target.qualname}: {self.state.value}" + (f" ({self.reason})" if self.reason else "")


#: The reason an applied PROFILE_CAPTURE / PROFILE_LAZY_CAPTURE row gives in ``status()`` (a deferred one
#: says why it defers).
PROFILED_BY_US = "profiled by us: sglang does not profile this capture"
_PROFILED = (Strategy.PROFILE_CAPTURE, Strategy.PROFILE_LAZY_CAPTURE)


class Skip(Exception):
    """A row does not apply to this sglang (raised by the checks and strategies, reported by status())."""


class Defer(Exception):
    """A row leaves the export to sglang's native one (never two files)."""


class SglangPatch:
    """The sglang patch: install / uninstall / status over a table of targets (``PATCH`` is the process's
    one; tests build others over tables of their own)."""

    def __init__(self, targets: tuple[Target, ...] = TARGETS, tag: str = TAG) -> None:
        self.targets = targets
        self.tag = tag
        self._lock = threading.RLock()
        self._installed = False
        self._undo: dict[str, Undo] = {}  # qualname -> how to restore it, in the order applied
        self._outcome: dict[str, RowStatus] = {}  # rows whose module was imported while installed
        self._hooked: set[str] = set()  # modules whose post-import hook is registered and not fired yet

    @property
    def installed(self) -> bool:
        return self._installed

    def install(self) -> list[RowStatus]:
        """Patch every row now, or when its module is imported. Returns ``status()``; a repeat warns and
        changes nothing."""
        with self._lock:
            if self._installed:
                logger.warning("sglang-capture-trace: sglang patches already installed; nothing changed")
                return self.status()
            self._installed = True
            for name in dict.fromkeys(t.module for t in self.targets):
                if name not in self._hooked:  # a hook from an earlier install() may still wait
                    self._hooked.add(name)
                    wrapt.register_post_import_hook(self._on_import, name)  # runs at once if imported
            status = self.status()
            logger.info(
                "sglang-capture-trace: sglang patches installed (%d applied, %d waiting for import)",
                sum(s.state is State.APPLIED for s in status),
                sum(s.state is State.WAITING for s in status),
            )
            return status

    def uninstall(self) -> None:
        """Restore every patched class and module exactly (``vars(cls)`` as before install())."""
        with self._lock:
            if not self._installed:
                logger.warning("sglang-capture-trace: sglang patches not installed; nothing to undo")
                return
            self._installed = False
            for qualname, undo in reversed(list(self._undo.items())):
                try:
                    undo()
                except Exception:
                    logger.warning("sglang-capture-trace: could not restore %s", qualname, exc_info=True)
            self._undo.clear()
            self._outcome.clear()

    def status(self) -> list[RowStatus]:
        """Every row's state, in table order."""
        with self._lock:
            if not self._installed:
                return [RowStatus(t, State.NOT_INSTALLED) for t in self.targets]
            return [self._outcome.get(t.qualname) or RowStatus(t, State.WAITING) for t in self.targets]

    def applied(self) -> list[str]:
        """Qualified names patched right now."""
        with self._lock:
            return list(self._undo)

    def _on_import(self, module: types.ModuleType) -> None:
        """Post-import hook: apply this module's rows. Catches everything (a raising hook breaks the import)."""
        try:
            with self._lock:
                self._hooked.discard(module.__name__)
                if not self._installed:
                    return
                for target in self.targets:
                    if target.module == module.__name__ and target.qualname not in self._outcome:
                        self._outcome[target.qualname] = self._apply(target, module)
        except Exception:  # pragma: no cover - defensive: never break sglang's import
            logger.warning("sglang-capture-trace: post-import hook for %s failed", module, exc_info=True)

    def _apply(self, target: Target, module: types.ModuleType) -> RowStatus:
        try:
            cls = applicable_class(target, module)
            self._undo[target.qualname] = _STRATEGIES[target.strategy](target, cls, self.tag)
        except Skip as skip:
            logger.debug("sglang-capture-trace: skipping %s: %s", target.qualname, skip)
            return RowStatus(target, State.SKIPPED, str(skip))
        except Defer as defer:
            logger.info("sglang-capture-trace: %s: %s; deferring to sglang's own export", target.qualname, defer)
            return RowStatus(target, State.DEFERRED, str(defer))
        except Exception as exc:
            logger.warning("sglang-capture-trace: could not patch %s", target.qualname, exc_info=True)
            return RowStatus(target, State.SKIPPED, f"error: {exc!r}")
        logger.debug("sglang-capture-trace: patched %s (%s)", target.qualname, target.strategy.value)
        profiled = (PROFILED_BY_US, target.limits) if target.strategy in _PROFILED else ()
        return RowStatus(target, State.APPLIED, "; ".join(filter(None, profiled)))


#: The process-wide patch (what the plugin entry point and the start-up hook install).
PATCH = SglangPatch()


def register() -> None:
    """The ``sglang.srt.plugins`` entry point: install when the switch is on. Runs in every sglang
    process, possibly many times and after the start-up hook installed: no repeat warning for that;
    never raises (a plugin error must not stop the server)."""
    try:
        if not settings.trace_enabled():
            logger.debug("sglang-capture-trace: %s is off; sglang not patched", settings.ENABLE)
            return
        with PATCH._lock:
            if PATCH.installed:
                logger.debug("sglang-capture-trace: sglang patches already installed (start-up hook or plugin)")
                return
            PATCH.install()
    except Exception:
        logger.warning("sglang-capture-trace: could not install the sglang patches", exc_info=True)


# -- does a row apply? -----------------------------------------------------------------------------------


def applicable_class(target: Target, module: types.ModuleType) -> type:
    """The row's class when the real class has the shape the row patches; raises Skip otherwise."""
    cls = vars(module).get(target.cls)
    if not isinstance(cls, type):
        raise Skip(f"no class {target.cls} in this sglang")
    mismatch = shape_mismatch(target, vars(cls), lambda name: _member(cls, name), code_names)
    if mismatch is not None:
        raise Skip(" ".join(mismatch))
    return cls


def shape_mismatch(
    target: Target, own: Mapping[str, Any], find: Callable[[str], Any], names: Callable[[Any], set[str]]
) -> tuple[str, str] | None:
    """Why a class lacks the shape the row patches, as (what, why), or None. ``own``: the class body;
    ``find(name)``: a member, own or inherited (None: none); ``names(member)``: the names its code uses. Given
    a live class here and a wheel's source by ``scripts/read_sglang_wheel.py``: one check for both."""
    missing = [name for name in target.requires if find(name) is None]
    if missing:
        return target.cls, f"lacks {missing}"
    present = [name for name in target.absent if find(name) is not None]
    if present:
        return target.cls, f"already has {present}"
    if target.own and target.method not in own:
        return target.cls, f"does not define {target.method} itself"
    method = target.code_of or target.method
    lacking = [name for name in target.code_names if name not in names(own.get(method))]
    if lacking:
        return method, f"does not reference {lacking}"
    return None


def _member(cls: type, name: str) -> Any:
    found = find_attribute(cls, name)
    return None if found is None else found[1]


def code_names(attribute: Any) -> set[str]:
    """Global and attribute names used by a function (under any wrapper: ``inspect.unwrap``), including its
    nested functions."""
    code = getattr(inspect.unwrap(attribute), "__code__", None)
    names: set[str] = set()
    stack = [code] if isinstance(code, types.CodeType) else []
    while stack:
        current = stack.pop()
        names.update(current.co_names)
        stack.extend(c for c in current.co_consts if isinstance(c, types.CodeType))
    return names


# -- the one mechanism: wrap the row's method ----------------------------------------------------------------


def _wrap(target: Target, cls: type, wrapper: Wrapper, tag: str) -> Undo:
    handle = wrap_method(cls, target.method, wrapper, tag=tag)
    if handle is None:
        raise Skip("already wrapped")

    def undo() -> None:
        # Another wrapt wrapper laid over ours since (another instrumentor) stays; ours is spliced out.
        try:
            removed = wrapt.unwrap_object(cls, target.method, handle, missing_ok=True)
        except wrapt.WrapperNotOutermostError:  # under a plain (non-wrapt) wrapper: cannot reach it
            removed = None
        if removed is None:
            logger.warning("sglang-capture-trace: %s was replaced by someone else; left as is", target.qualname)

    return undo


def _export_after_hook(target: Target, cls: type, tag: str) -> Undo:
    from mixins.capture_trace import export_after_hook

    return _wrap(target, cls, export_after_hook(cls if target.draft_base else None), tag)


def _label_shapes(target: Target, cls: type, tag: str) -> Undo:
    from mixins.capture_trace import label_shape_in

    return _wrap(target, cls, label_shape_in(target.unit), tag)


# -- profile what sglang does not (prefill, piecewise, CPU graph runners; the ViT runners' lazy captures) -------


def native_profiling(target: Target, find: Callable[[str], Any], names: Callable[[Any], set[str]]) -> list[str]:
    """What on the row's capture path says sglang profiles this capture itself: the decode runners'
    profiling helpers on the class, or ``NATIVE_PROFILE_NAMES`` used by a capture-path method (``find`` and
    ``names`` as for :func:`shape_mismatch`)."""
    found = [f"has {name}" for name in (INIT, HOOK) if find(name) is not None]
    for method in dict.fromkeys((target.method, *target.capture_path)):
        used = names(find(method))
        found += [f"{method} uses {name}" for name in NATIVE_PROFILE_NAMES if name in used]
    return found


def profiling_requested(runner: object) -> bool:
    """sglang's ``--enable-profile-cuda-graph`` for this process, read as the release reads it
    (``sglang_targets.PROFILE_FLAG``): the runner's own copy; the published ``get_exec().graph``;
    ``model_runner.server_args``; ``get_global_server_args()``. Never raises; unknown is off."""
    own = vars(runner).get(PROFILE_FLAG) if hasattr(runner, "__dict__") else None
    if own is not None:
        return bool(own)
    readers = (
        lambda: _published(RUNTIME_CONTEXT, *EXEC_CONFIG),
        lambda: _from_server_args(runner),
        lambda: _published(*GLOBAL_SERVER_ARGS),
    )
    for read in readers:
        try:
            value = read()
        except Exception:  # not published in this process, or not this release's layout
            continue
        if value is not None:
            return bool(value)
    logger.debug("sglang-capture-trace: %s: cannot tell whether %s is on; not profiling",
                 type(runner).__name__, PROFILE_FLAG)
    return False


def _attributes(owner: Any, path: tuple[str, ...]) -> Any:
    """``owner.a.b...`` along ``path``; None where an attribute is missing."""
    for name in path:
        owner = getattr(owner, name, None)
    return owner


def _from_server_args(runner: object) -> bool | None:
    values = (_attributes(runner, (*path, PROFILE_FLAG)) for path in SERVER_ARGS_OWNERS)
    return next((value for value in values if isinstance(value, bool)), None)


def _published(module_name: str, getter: str, *path: str) -> Any:
    """``module.getter()`` then ``path`` and the flag, where sglang already imported the module; else None."""
    module = sys.modules.get(module_name)
    if module is None or not hasattr(module, getter):
        return None
    return _attributes(getattr(module, getter)(), (*path, PROFILE_FLAG))


def _profile_capture(target: Target, cls: type, tag: str) -> Undo:
    """PROFILE_CAPTURE and PROFILE_LAZY_CAPTURE: our profiler, unless sglang profiles this capture itself."""
    from mixins.capture_trace import profile_lazy_capture, profile_method

    native = native_profiling(target, lambda name: _member(cls, name), code_names)
    if native:
        raise Defer(f"sglang profiles this capture itself ({', '.join(native)})")
    if target.strategy is Strategy.PROFILE_CAPTURE:
        return _wrap(target, cls, profile_method(profiling_requested), tag)
    requested = profiling_requested if target.profile_flag else switch_alone
    return _wrap(target, cls, profile_lazy_capture(requested, target.shape_of, target.graphs), tag)


def switch_alone(runner: object) -> bool:
    """A runtime without ``--enable-profile-cuda-graph`` (the diffusion runtime, ``Target.profile_flag``):
    our switch, which the wrapper reads first, is the whole opt-in."""
    return True


# -- take over the native export (era C) -----------------------------------------------------------------


def _native_export_taken_over(prof_context: Any = None, *args: Any, **kwargs: Any) -> None:
    """Stands in for sglang's ``export_cuda_graph_capture_trace`` in the runner module while we are
    installed: our wrapper around the same hook writes the one file for this runner and rank."""
    logger.debug(
        "sglang-capture-trace: native capture-trace export (%s) handled by sglang-capture-trace",
        kwargs.get("runner_name"),
    )


def _take_over_native(target: Target, cls: type, tag: str) -> Undo:
    hook = vars(cls)[target.method]
    if NATIVE_EXPORT not in code_names(hook):
        return _export_after_hook(target, cls, tag)  # no native export in this hook: a plain hook
    namespace: dict[str, Any] = getattr(inspect.unwrap(hook), "__globals__", {})
    native = namespace.get(NATIVE_EXPORT)
    if not callable(native):
        # The hook reaches the native export some other way (e.g. through a module attribute): we
        # cannot switch it off, so leave the export to sglang rather than write two files.
        raise Defer("the hook exports natively in a way we cannot take over")
    undo_hook = _export_after_hook(target, cls, tag)
    namespace[NATIVE_EXPORT] = _native_export_taken_over

    def undo() -> None:
        if namespace.get(NATIVE_EXPORT) is _native_export_taken_over:
            namespace[NATIVE_EXPORT] = native
        else:
            logger.warning("sglang-capture-trace: %s was replaced by someone else; left as is", NATIVE_EXPORT)
        undo_hook()

    return undo


# -- inline profiling in capture() (era A) ---------------------------------------------------------------


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


def _inline_capture(target: Target, cls: type, tag: str) -> Undo:
    from mixins.capture_trace import bind_instance, export_from_runner

    namespace: dict[str, Any] = getattr(inspect.unwrap(vars(cls)[target.method]), "__globals__", {})
    if not callable(namespace.get("profile")):
        raise Skip("its module has no callable 'profile'")
    draft_base = cls if target.draft_base else None

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

    return _wrap(target, cls, capture_and_export, tag)


# -- adopt the base's profiling helpers (era B EAGLE runners) --------------------------------------------


def _delegate(base: type, name: str, owner: type) -> Callable[..., Any]:
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
    return delegate


def _adopt_hook(target: Target, cls: type, tag: str) -> Undo:
    base = vars(sys.modules[cls.__module__]).get(target.base or "")
    if not isinstance(base, type):
        raise Skip(f"its module has no class {target.base}")
    lacking = [name for name in target.base_requires if find_attribute(base, name) is None]
    if lacking:
        raise Skip(f"{base.__qualname__} lacks {lacking} too (profiling is inline there)")
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


_STRATEGIES: dict[Strategy, Callable[[Target, type, str], Undo]] = {
    Strategy.EXPORT_AFTER_HOOK: _export_after_hook,
    Strategy.TAKE_OVER_NATIVE: _take_over_native,
    Strategy.INLINE_CAPTURE: _inline_capture,
    Strategy.LABEL_SHAPES: _label_shapes,
    Strategy.ADOPT_HOOK: _adopt_hook,
    Strategy.PROFILE_CAPTURE: _profile_capture,
    Strategy.PROFILE_LAZY_CAPTURE: _profile_capture,
}
