"""The wrapt core: wrap a method on one class, recognise our wrappers, restore ``vars(cls)`` exactly.

wrapt has no unwrap, and a class that only inherited a method must get its attribute deleted, not a
copy of the parent's put back — so what each class held is remembered on the wrapper itself.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import wrapt

Wrapper = Callable[[Callable[..., Any], Any, tuple[Any, ...], dict[str, Any]], Any]

_ABSENT = object()  # the class only inherited the attribute


class CaptureTraceWrapper(wrapt.FunctionWrapper):  # type: ignore[misc]
    """A FunctionWrapper that knows who installed it and what it replaced."""

    def __init__(self, wrapped: Any, wrapper: Wrapper, *, tag: str, saved: Any, owner: type) -> None:
        super().__init__(wrapped, wrapper)
        self._self_capture_trace_tag = tag
        self._self_capture_trace_saved = saved
        self._self_capture_trace_owner = owner


def find_attribute(cls: type, name: str) -> tuple[type, Any] | None:
    """The raw attribute (no descriptor binding) as ``getattr`` would find it, and its owner."""
    for klass in cls.__mro__:
        if name in vars(klass):
            return klass, vars(klass)[name]
    return None


def is_wrapped(obj: Any, tag: str | None = None) -> bool:
    """True when ``obj`` is one of our wrappers (with ``tag``, when given)."""
    if not isinstance(obj, CaptureTraceWrapper):
        return False
    return tag is None or obj._self_capture_trace_tag == tag


def wrap_method(cls: type, name: str, wrapper: Wrapper, *, tag: str) -> bool:
    """Wrap ``cls.<name>`` (defined or inherited) in ``vars(cls)``; False when ``cls`` already holds or
    inherits a wrapper with ``tag`` (an inherited one already runs for this class's instances, and a
    second would run the extra work twice).

    Raises AttributeError when no class in the MRO defines ``name``.
    """
    found = find_attribute(cls, name)
    if found is None:
        raise AttributeError(f"{cls.__qualname__} has no attribute {name!r} to wrap")
    owner, original = found
    if is_wrapped(original, tag):
        return False
    saved = original if owner is cls else _ABSENT
    setattr(cls, name, CaptureTraceWrapper(original, wrapper, tag=tag, saved=saved, owner=cls))
    return True


def unwrap_method(cls: type, name: str, *, tag: str) -> bool:
    """Undo ``wrap_method(cls, name, tag=tag)``; False if ``vars(cls)`` holds no such wrapper."""
    current = vars(cls).get(name, _ABSENT)
    if is_wrapped(current, tag):
        saved = current._self_capture_trace_saved
        if saved is _ABSENT:
            delattr(cls, name)
        else:
            setattr(cls, name, saved)
        return True
    return False
