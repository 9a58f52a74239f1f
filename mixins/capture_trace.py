"""Runner-side integration: the class decorator, the mixin, and the wrappers they install.

Hook mode wraps the runner's post-profile hook and exports the profile it was given; profile mode runs
the capture method inside a profiler of ours and exports that; per-shape methods get a labelled range.
Every one is ``capture_wrapper`` with a body of its own (docs/DESIGN.md §1.2).
"""

from __future__ import annotations

import inspect
import logging
import sys
import threading
import time
from collections.abc import Callable, Iterator, Mapping
from contextlib import ExitStack, contextmanager
from dataclasses import dataclass
from functools import lru_cache
from pathlib import Path
from typing import Any, ClassVar, TypeVar, overload

from mixins import kineto, settings
from mixins.export import export_cuda_graph_capture_trace, report_failure
from mixins.formats import BS, SHAPE_UNITS, UNKNOWN_SHAPE, segment_name
from mixins.patching import Wrapper, find_attribute, wrap_method
from mixins.sglang_targets import HOOK, PROFILE_FLAG, SHAPE_LABEL_NAMES, SHAPE_METHODS

logger = logging.getLogger("mixins")
DECORATOR_TAG = "with_capture_trace"
MIXIN_TAG = "CaptureTraceMixin"
AUTO = "auto"

C = TypeVar("C", bound=type)

_inside = threading.local()

#: The rest of a wrapped call once the wrapper decided to act: ``(wrapped, runner, args, kwargs, call)``,
#: ``call`` the method bound to the runner (``bind_instance``).
Body = Callable[[Callable[..., Any], Any, tuple[Any, ...], dict[str, Any], Callable[..., Any]], Any]


@contextmanager
def _outermost(kind: str, instance: object) -> Iterator[bool]:
    """Yields True only for the outermost of nested wrapped calls on the same instance and thread."""
    active: set[tuple[str, int]] = _inside.__dict__.setdefault("active", set())
    key = (kind, id(instance))
    if key in active:
        yield False
        return
    active.add(key)
    try:
        yield True
    finally:
        active.discard(key)


def bind_instance(
    wrapped: Callable[..., Any], instance: Any, args: tuple[Any, ...]
) -> tuple[Any, tuple[Any, ...], Callable[..., Any]]:
    """Called through the class with an explicit self (``Base.hook(self, prof)``, as older sglang's EAGLE
    runners do with ``CudaGraphRunner.capture(self)``): wrapt passes no instance, so take it from args."""
    if instance is None and args and not isinstance(wrapped, (staticmethod, classmethod)):
        self_, rest = args[0], args[1:]
        return self_, rest, lambda *a, **k: wrapped(self_, *a, **k)
    return instance, args, wrapped


def _flag_on_instance(runner: object) -> bool:
    return bool(getattr(runner, PROFILE_FLAG, True))


def capture_wrapper(kind: str, requested: Callable[[object], bool], body: Body) -> Wrapper:
    """The one wrapper of every mode: the method alone unless our switch is on, ``requested(runner)`` says
    so and this is the outermost call of ``kind`` on the runner in this thread (a ``super()`` chain, or
    a class wrapped twice, acts once); then ``body``. Off is a straight call (docs/DESIGN.md §1.2)."""

    def capture_wrapper(
        wrapped: Callable[..., Any], instance: Any, args: tuple[Any, ...], kwargs: dict[str, Any]
    ) -> Any:
        instance, args, call = bind_instance(wrapped, instance, args)
        if not settings.trace_enabled() or not requested(instance):
            return call(*args, **kwargs)
        with _outermost(kind, instance) as outermost:
            return body(wrapped, instance, args, kwargs, call) if outermost else call(*args, **kwargs)

    return capture_wrapper


# -- hook mode: export after the hook ----------------------------------------------------------------


def runner_name_for(runner: object, draft_base: type | None = None) -> str:
    """``type(runner).__name__``; ``Draft{Name}`` for a draft worker's *plain* base runner (as sglang 0.5.22+
    does, since such drafts capture at the target's shapes and would otherwise share its file name)."""
    cls = runner if isinstance(runner, type) else type(runner)  # a classmethod hook's runner is its class
    if draft_base is not None and cls is draft_base:
        model_runner = getattr(runner, "model_runner", None)
        if getattr(model_runner, "is_draft_worker", False):
            return f"Draft{cls.__name__}"
    return cls.__name__


def export_from_runner(runner: object, prof: Any, *, draft_base: type | None = None) -> Path | None:
    """Export ``prof`` for ``runner`` under the whole policy; never raises unless strict mode is on."""
    if not settings.trace_enabled() or not getattr(runner, "enable_profile_cuda_graph", True):
        return None
    if prof is None:
        logger.debug("%s: hook called without a profile; nothing to export", type(runner).__name__)
        return None
    try:
        try:
            name = runner_name_for(runner, draft_base)
        except Exception:
            name = type(runner).__name__
        return export_cuda_graph_capture_trace(prof, runner_name=name, runner=runner)
    except Exception as exc:  # the export reports its own failures; this is the last net
        report_failure(type(runner).__name__, None, exc)
        return None


def _profile_argument(args: tuple[Any, ...], kwargs: dict[str, Any]) -> Any:
    if "prof_context" in kwargs:
        return kwargs["prof_context"]
    return args[0] if args else kwargs.get("prof")


def export_after_hook(draft_base: type | None) -> Wrapper:
    """The wrapper for a post-profile hook: run it (its memory snapshot saved beside the trace), then export
    the profile it was given."""

    def export_after(wrapped: Callable[..., Any], instance: Any, args: tuple[Any, ...], kwargs: dict[str, Any],
                     call: Callable[..., Any]) -> Any:
        with _snapshot_redirected(instance, draft_base) as redirect:
            result = redirect(call)(*args, **kwargs)
        export_from_runner(instance, _profile_argument(args, kwargs), draft_base=draft_base)
        return result

    return capture_wrapper("hook", _flag_on_instance, export_after)


@contextmanager
def _snapshot_redirected(runner: object, draft_base: type | None) -> Iterator[Callable[[Callable[..., Any]], Any]]:
    """The hook's ``_dump_snapshot`` saved beside the runner's trace (``mixins.memory_snapshot``); if setting
    that up fails, the hook runs as sglang wrote it (a debugging aid never stops the hook)."""
    with ExitStack() as stack:
        try:
            from mixins import memory_snapshot

            scope = memory_snapshot.redirected(runner, lambda: runner_name_for(runner, draft_base))
            redirect: Callable[[Callable[..., Any]], Any] = stack.enter_context(scope)
        except Exception as exc:  # noqa: BLE001
            report_failure(type(runner).__name__, None, exc)
            redirect = lambda hook: hook  # noqa: E731
        yield redirect


# -- per-shape segments ------------------------------------------------------------------------------


@lru_cache(maxsize=256)
def _signature(function: Callable[..., Any]) -> inspect.Signature | None:
    try:
        return inspect.signature(function)
    except (TypeError, ValueError):
        return None


def _bind(function: Callable[..., Any], instance: Any, args: tuple[Any, ...],
          kwargs: dict[str, Any]) -> inspect.BoundArguments | None:
    """The call's arguments by name, ``self`` first; None when they do not bind. ``function`` is the method
    as found on the class (``instance`` is prepended) or already bound."""
    if hasattr(function, "__self__"):
        instance, function = function.__self__, getattr(function, "__func__", function)
    signature = _signature(function)
    try:
        return None if signature is None else signature.bind(instance, *args, **kwargs)
    except TypeError:
        return None


def shape_label(
    function: Callable[..., Any],
    instance: Any,
    args: tuple[Any, ...],
    kwargs: dict[str, Any],
    unit: str = BS,
) -> str | None:
    """``capture::{unit}={size}[,variant=..][,stream=..][,attention=..][,name=value..]`` from the call's own
    arguments, never from counting calls (repeated and multi-variant captures of one size stay right): after
    the size, every scalar argument not at its default, sglang's under their short names first
    (``sglang_targets.SHAPE_LABEL_NAMES``), so captures that differ in any such argument differ in label."""
    bound = _bind(function, instance, args, kwargs)
    if bound is None:
        return None
    params = list(bound.signature.parameters.values())[1:]  # after self
    if not params or params[0].name not in bound.arguments:
        return None
    parts: list[tuple[str, object]] = [(unit, bound.arguments[params[0].name])]
    known = [p for name in SHAPE_LABEL_NAMES for p in params[1:] if p.name == name]
    others = [p for p in params[1:] if p.name not in SHAPE_LABEL_NAMES]
    for param in known + others:
        value = bound.arguments.get(param.name, param.default)
        if _distinguishes(value, param.default):
            parts.append((SHAPE_LABEL_NAMES.get(param.name, param.name), value))
    return segment_name(parts)


def _distinguishes(value: object, default: object) -> bool:
    if value is None or not isinstance(value, (str, int, float, bool)):
        return False  # forward callables, tensors, buffers: not a label
    return default is inspect.Parameter.empty or value != default or type(value) is not type(default)


def _in_range(label: str | None, call: Callable[..., Any], args: tuple[Any, ...], kwargs: dict[str, Any]) -> Any:
    """``call`` inside a ``record_function(label)`` range (a plain call without a label)."""
    if label is None:
        return call(*args, **kwargs)
    import torch

    with torch.profiler.record_function(label):
        return call(*args, **kwargs)


def label_shape_in(unit: str) -> Wrapper:
    """The wrapper for a per-shape capture method whose size counts ``unit``: run it inside a
    ``record_function(shape_label)`` range while a profiler records this thread (outermost call only: an
    override calling super() labels once)."""
    if unit not in SHAPE_UNITS:
        raise ValueError(f"shape unit {unit!r}: expected one of {', '.join(SHAPE_UNITS)}")
    return _LABEL_WRAPPERS[unit]


def _label_wrapper(unit: str) -> Wrapper:
    def label(wrapped: Callable[..., Any], instance: Any, args: tuple[Any, ...], kwargs: dict[str, Any],
              call: Callable[..., Any]) -> Any:
        return _in_range(shape_label(wrapped, instance, args, kwargs, unit), call, args, kwargs)

    return capture_wrapper("shape", lambda runner: _flag_on_instance(runner) and _recording_here(), label)


_LABEL_WRAPPERS: dict[str, Wrapper] = {unit: _label_wrapper(unit) for unit in SHAPE_UNITS}
#: Batch-size labels (the decode runners' and the default for user runners).
label_shape = _LABEL_WRAPPERS[BS]


# -- profile mode: our own profiler around the capture ---------------------------------------------------

_DEVICE_ACTIVITIES = {"cuda": "CUDA", "xpu": "XPU", "mtia": "MTIA", "hpu": "HPU"}


def _device_type(runner: object, hints: tuple[Any, ...] = ()) -> str:
    """The runner's (or its model runner's) device, else that of the first hint (or first item of a list or
    tuple hint: a list of static input tensors) that has one, else CUDA when this process has initialised
    it (a lazy capture keyed by plain numbers, as DSpark's accept graph), else CPU."""
    firsts = tuple(h[0] for h in hints if isinstance(h, (list, tuple)) and h)
    for owner in (runner, getattr(runner, "model_runner", None), *hints, *firsts):
        try:
            device = getattr(owner, "device", None)
        except Exception:  # a property that needs state the runner does not have yet
            device = None
        if device is not None:
            return str(getattr(device, "type", device)).split(":")[0]
    return "cuda" if _torch_says(lambda torch: torch.cuda.is_initialized()) else "cpu"


def capture_profiler(runner: object, hints: tuple[Any, ...] = ()) -> Any:
    """A profiler configured like sglang's own decode capture profile (docs/DESIGN.md §1.2), for the device of
    ``_device_type(runner, hints)`` when this torch can record it."""
    import torch

    activities = [torch.profiler.ProfilerActivity.CPU]
    name = _DEVICE_ACTIVITIES.get(_device_type(runner, hints))
    device = getattr(torch.profiler.ProfilerActivity, name, None) if name else None
    if device is not None and device in torch.profiler.supported_activities():
        activities.append(device)
    return torch.profiler.profile(activities=activities, record_shapes=True, profile_memory=False)


#: Kineto records one profiler per process: a second one started on another thread failed both captures'
#: profiles (torch 2.7) or crashed the process (torch 2.13). Ours take this without waiting; a capture
#: that finds it taken, or any profiler recording anywhere in the process, runs unprofiled.
_ONE_PROFILER = threading.Lock()


def _torch_says(ask: Callable[[Any], Any]) -> bool:
    """``ask(torch)`` when torch is imported (never importing it); False when it is not, or ``ask`` raises."""
    torch = sys.modules.get("torch")
    try:
        return torch is not None and bool(ask(torch))
    except Exception:
        return False


def _recording_here() -> bool:
    """Whether a profiler records this thread (a range opened here lands in its profile)."""
    return _torch_says(lambda torch: torch.autograd._profiler_enabled())


def profiler_active() -> bool:
    """Whether a torch profiler is already recording: in this thread, or in another (the process-wide flag
    torch's profilers set) — sglang's, the user's, or ours on another capture."""
    return _recording_here() or _torch_says(
        lambda torch: getattr(torch.autograd.profiler, "_is_profiler_enabled", False))


@contextmanager
def _our_profiler_may_start() -> Iterator[bool]:
    """True (``_ONE_PROFILER`` held for the block) when no profiler records anywhere in the process and no
    capture of ours is being profiled; False: the capture runs unprofiled. The one rule for both modes."""
    if profiler_active() or not _ONE_PROFILER.acquire(blocking=False):
        yield False
        return
    try:
        yield True
    finally:
        _ONE_PROFILER.release()


class ProfilerTakenError(RuntimeError):
    """Another profiler started inside the capture ended or took over the one Kineto session ours had."""


def _profiled(runner: object, call: Callable[..., Any], args: tuple[Any, ...], kwargs: dict[str, Any],
              label: str | None = None, hints: tuple[Any, ...] = ()) -> tuple[Any, Any]:
    """``call`` inside our profiler (``capture_profiler(runner, hints)``, ``_ONE_PROFILER`` held), in a ``label``
    range when given: its result, and the stopped profile when it may be exported (None: ours failed to start,
    reported, and the call ran unprofiled; or ``_stop`` refused it). The method's own exceptions pass through."""
    try:
        prof = capture_profiler(runner, hints)
        prof.start()
        started_by = time.time_ns()  # the wall-clock time by which its Kineto session had started
    except Exception as exc:  # a debugging aid never stops the capture
        report_failure(type(runner).__name__, None, exc)
        return call(*args, **kwargs), None
    try:
        result = _in_range(label, call, args, kwargs)
    finally:
        stopped = _stop(prof, runner, started_by)
    return result, prof if stopped else None


def _stop(prof: Any, runner: object, started_by: int) -> bool:
    """Stop our profiler; True when its profile may be exported: not when a profiler the capture ran in this
    thread ended our session or took it over (one WARNING; docs/DESIGN.md §1.2, "A profiler started inside ours")."""
    name = type(runner).__name__
    try:
        if not _recording_here():
            raise ProfilerTakenError(
                "another profiler started inside the capture ended ours (Kineto records one per process); "
                "nothing to export")
        prof.stop()
        if kineto.session_started_after(prof, started_by):
            raise ProfilerTakenError(
                "another profiler started inside the capture took over ours (Kineto records one per process); "
                "its profile is not exported")
        return True
    except Exception as exc:  # never let our profiler fail the capture
        report_failure(name, None, exc)
        return False


def profile_method(requested: Callable[[object], bool] = _flag_on_instance, draft_base: type | None = None) -> Wrapper:
    """The wrapper for a capture method that profiles nothing itself: profile mode (docs/DESIGN.md §1.2), on when
    our switch is and ``requested(runner)`` (default: the runner's ``enable_profile_cuda_graph``, default on)."""

    def profile_capture(wrapped: Callable[..., Any], instance: Any, args: tuple[Any, ...], kwargs: dict[str, Any],
                        call: Callable[..., Any]) -> Any:
        with _our_profiler_may_start() as ours:
            if ours:
                result, prof = _profiled(instance, call, args, kwargs)
        if not ours:
            logger.debug("%s: a profiler is already recording in this process; not starting ours "
                         "(the capture is not exported by us)", type(instance).__name__)
            return call(*args, **kwargs)
        if prof is not None:
            export_from_runner(instance, prof, draft_base=draft_base)
        return result

    return capture_wrapper("profile", requested, profile_capture)


# -- lazy captures: one graph per new shape while serving (docs/DESIGN.md §5.1) --------------------------

ShapeOf = Callable[[Mapping[str, Any]], "tuple[tuple[str, int], ...]"]


def lazy_label(shape_of: ShapeOf | None, function: Callable[..., Any], instance: Any, args: tuple[Any, ...],
               kwargs: dict[str, Any]) -> str:
    """``capture::tokens=N,images=K`` from ``shape_of`` over the call's arguments bound by name;
    ``capture::graph`` when they cannot be read (a DEBUG line says why)."""
    if shape_of is None:
        return UNKNOWN_SHAPE
    try:
        bound = _bind(function, instance, args, kwargs)
        if bound is None:
            raise TypeError("its arguments do not bind to its signature")
        return segment_name((name, int(value)) for name, value in shape_of(bound.arguments))
    except Exception as exc:  # a future signature: still one segment, unlabelled
        logger.debug("%s: cannot read the captured shape (%s); labelled %s", type(instance).__name__, exc,
                     UNKNOWN_SHAPE)
        return UNKNOWN_SHAPE


def _graph_count(runner: object, graphs: str | None) -> int | None:
    try:
        return len(getattr(runner, graphs)) if graphs else None
    except Exception:
        return None


def profile_lazy_capture(
    requested: Callable[[object], bool], shape_of: ShapeOf | None = None, graphs: str | None = None
) -> Wrapper:
    """The wrapper for a method that captures one graph for a new input shape while serving: lazy profile mode
    (docs/DESIGN.md §1.2, §5.1 "Lazy captures"). ``graphs``: the runner's dict of graphs, for a method that
    returns early for a known shape (a call that adds none is not kept). Nothing of ours raises into the
    caller (unless strict); the method's own exceptions pass through, and nothing is kept for that call."""

    def profile_one_shape(wrapped: Callable[..., Any], instance: Any, args: tuple[Any, ...],
                          kwargs: dict[str, Any], call: Callable[..., Any]) -> Any:
        name = type(instance).__name__
        label = lazy_label(shape_of, wrapped, instance, args, kwargs)
        with _our_profiler_may_start() as ours:
            if ours:
                return _profile_shape(instance, args, kwargs, call, graphs, name, label)
        logger.debug("%s: a profiler is already recording in this process; not starting ours (%s is in "
                     "that profile if it records this thread, and it is not exported by us)", name, label)
        # another thread's profiler: no range (torch 2.7 broke its JSON with ours)
        return _in_range(label if _recording_here() else None, call, args, kwargs)

    return capture_wrapper("profile", requested, profile_one_shape)


def _profile_shape(
    instance: Any, args: tuple[Any, ...], kwargs: dict[str, Any], call: Callable[..., Any], graphs: str | None,
    name: str, label: str,
) -> Any:
    """One lazy capture inside our profiler (``_ONE_PROFILER`` held), handed to the runner's trace."""
    from mixins import lazy_trace

    try:
        trace = lazy_trace.trace_for(instance, name)
        admitted = trace.admit()
    except Exception as exc:  # a debugging aid never stops the capture
        report_failure(name, None, exc)
        return call(*args, **kwargs)
    before = _graph_count(instance, graphs)
    if not admitted:  # past the trace's limits: counted only if the call captured a new shape
        result = call(*args, **kwargs)
        if before is None or (_graph_count(instance, graphs) or 0) > before:
            try:
                trace.not_profiled()
            except Exception as exc:
                report_failure(name, trace.final, exc)
        return result
    prof = None
    try:
        result, prof = _profiled(instance, call, args, kwargs, label, (*args, *kwargs.values()))
        if before is not None and (_graph_count(instance, graphs) or 0) <= before:
            prof = None  # a known shape: the call captured nothing, nothing is kept
    finally:
        if prof is None:
            trace.release()
    if prof is not None:
        try:
            trace.add(prof, instance)
        except Exception as exc:
            report_failure(name, trace.final, exc)
    return result


# -- decorator and mixin -----------------------------------------------------------------------------


@dataclass(frozen=True)
class _Options:
    hook: str = HOOK
    shape_method: str | None = AUTO
    draft_base: type | None = None
    profile: str | None = None
    shape_unit: str = BS

    def __post_init__(self) -> None:
        if self.profile is not None and (not isinstance(self.profile, str) or not self.profile.isidentifier()):
            raise TypeError(f"profile= names the method to profile (e.g. 'capture'), got {self.profile!r}")
        label_shape_in(self.shape_unit)  # ValueError naming the units


def _has_method(cls: type, name: str) -> bool:
    """Whether ``cls`` has ``name`` to wrap. A staticmethod is refused: called with no runner, it cannot
    say whose trace it is (its profile would be taken for the runner, and nothing exported)."""
    found = find_attribute(cls, name)
    if found is not None and isinstance(found[1], staticmethod):
        raise TypeError(f"{cls.__qualname__}.{name} is a staticmethod: make it a method (the runner names the trace)")
    return found is not None


def _apply(cls: type, options: _Options, tag: str, *, required: bool) -> None:
    if options.profile is not None:  # profile mode: our profiler around that method; no hook involved
        method, wrapper, what = options.profile, profile_method(draft_base=options.draft_base), "to profile"
    else:
        method, wrapper, what = options.hook, export_after_hook(options.draft_base), "to export after"
    if _has_method(cls, method):
        wrap_method(cls, method, wrapper, tag=tag)
    elif required:
        raise TypeError(f"{cls.__qualname__} has no method {method!r} {what}")
    if options.shape_method is None:
        return
    names = SHAPE_METHODS if options.shape_method == AUTO else (options.shape_method,)
    for name in names:
        if find_attribute(cls, name) is not None:
            wrap_method(cls, name, label_shape_in(options.shape_unit), tag=tag)
        elif required and options.shape_method != AUTO:
            raise TypeError(f"{cls.__qualname__} has no per-shape method {name!r} to label")


def _follow_subclasses(cls: type, options: _Options) -> None:
    """Subclasses that override the hook (with or without ``super()``) get their own wrapper too."""
    existing = vars(cls).get("__init_subclass__")
    if getattr(getattr(existing, "__func__", None), "_capture_trace_follows", False):
        return

    def __init_subclass__(sub: type, **kwargs: Any) -> None:
        if existing is not None:
            existing.__get__(None, sub)(**kwargs)
        else:
            super(cls, sub).__init_subclass__(**kwargs)  # type: ignore[misc, arg-type]
        _apply(sub, options, DECORATOR_TAG, required=False)

    __init_subclass__._capture_trace_follows = True  # type: ignore[attr-defined]
    cls.__init_subclass__ = classmethod(__init_subclass__)  # type: ignore[assignment]
    pending: list[type] = list(cls.__subclasses__())
    while pending:  # subclasses defined before the decorator ran
        sub = pending.pop()
        _apply(sub, options, DECORATOR_TAG, required=False)
        pending.extend(sub.__subclasses__())


@overload
def with_capture_trace(cls: C, /) -> C: ...
@overload
def with_capture_trace(
    *,
    hook: str = HOOK,
    shape_method: str | None = AUTO,
    draft_base: bool | type = False,
    profile: str | None = None,
    shape_unit: str = BS,
) -> Callable[[C], C]: ...
def with_capture_trace(
    cls: Any = None,
    /,
    *,
    hook: str = HOOK,
    shape_method: str | None = AUTO,
    draft_base: bool | type = False,
    profile: str | None = None,
    shape_unit: str = BS,
) -> Any:
    """Class decorator; returns the same class.

    Hook mode (default): export the capture profile after ``hook`` returns — for runners that profile
    their capture themselves (sglang's decode runners). Profile mode, ``profile="capture"``: for runners
    that profile nothing, run that method inside our own ``torch.profiler.profile`` and export it after
    the method returns (``hook`` is not used). ``shape_method``: the per-shape capture method to label
    (``"auto"``: sglang's names when present, ``None``: none); ``shape_unit``: what its size counts
    (``"bs"`` or ``"tokens"``). ``draft_base``: True (this class) or a class whose exact instances are
    named ``Draft{Name}`` when ``self.model_runner.is_draft_worker`` is truthy.
    """

    _Options(hook, shape_method, None, profile, shape_unit)  # bad options fail where they are written

    def decorate(klass: Any) -> Any:
        if not isinstance(klass, type):
            raise TypeError(f"with_capture_trace decorates a class, got {type(klass).__name__} {klass!r}")
        base = klass if draft_base is True else (draft_base or None)
        if base is not None and not isinstance(base, type):
            raise TypeError(f"with_capture_trace(draft_base=...) expects True, False or a class, got {draft_base!r}")
        options = _Options(hook, shape_method, base, profile, shape_unit)
        _apply(klass, options, DECORATOR_TAG, required=True)
        _follow_subclasses(klass, options)
        return klass

    return decorate if cls is None else decorate(cls)


class CaptureTraceMixin:
    """Inherit first (``class MyRunner(CaptureTraceMixin, SomeRunner)``) to get the decorator's behaviour.

    Class attributes configure it: ``capture_trace_hook``, ``capture_trace_shape_method``,
    ``capture_trace_profile`` (profile mode: the method to run inside our profiler, e.g. ``"capture"``),
    ``capture_trace_shape_unit`` and, read from the class's own body only,
    ``capture_trace_draft_base = True`` for a plain base runner.
    """

    capture_trace_hook: ClassVar[str] = HOOK
    capture_trace_shape_method: ClassVar[str | None] = AUTO
    capture_trace_profile: ClassVar[str | None] = None
    capture_trace_shape_unit: ClassVar[str] = BS

    def __init_subclass__(cls, **kwargs: Any) -> None:
        super().__init_subclass__(**kwargs)
        options = _Options(
            cls.capture_trace_hook,
            cls.capture_trace_shape_method,
            cls if vars(cls).get("capture_trace_draft_base", False) else None,
            cls.capture_trace_profile,
            cls.capture_trace_shape_unit,
        )
        _apply(cls, options, MIXIN_TAG, required=False)
