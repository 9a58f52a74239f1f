"""The wrapt core: wrap a method on one class and recognise our wrappers; ``wrapt.unwrap_object`` undoes
them (docs/DESIGN.md §5). What is ours: the tag that says which of our patches a wrapper belongs to, and the
MRO rule — a class that already holds or inherits a wrapper with the tag gets no second one.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import wrapt

Wrapper = Callable[[Callable[..., Any], Any, tuple[Any, ...], dict[str, Any]], Any]


class TaggedWrapper(wrapt.FunctionWrapper):  # type: ignore[misc]
    """A FunctionWrapper that says which of our patches installed it."""

    def __init__(self, wrapped: Any, wrapper: Wrapper, tag: str) -> None:
        super().__init__(wrapped, wrapper)
        self._self_capture_trace_tag = tag


def find_attribute(cls: type, name: str) -> tuple[type, Any] | None:
    """The raw attribute (no descriptor binding) as ``getattr`` would find it, and its owner."""
    for klass in cls.__mro__:
        if name in vars(klass):
            return klass, vars(klass)[name]
    return None


def is_wrapped(obj: Any, tag: str | None = None) -> bool:
    """True when one of our wrappers (with ``tag``, when given) is anywhere in ``obj``'s wrapper chain."""
    return wrapt.is_wrapped_by(
        obj, predicate=lambda entry: isinstance(entry, TaggedWrapper)
        and (tag is None or entry._self_capture_trace_tag == tag)
    )


def wrap_method(cls: type, name: str, wrapper: Wrapper, *, tag: str) -> TaggedWrapper | None:
    """Wrap ``cls.<name>`` (defined or inherited) in ``vars(cls)``. Returns the wrapper, the handle that
    ``wrapt.unwrap_object(cls, name, handle)`` takes to undo it; None when ``cls`` already holds or
    inherits a wrapper with ``tag``, outermost or under others (an inherited one already runs for this
    class's instances, and a second would run the extra work twice).

    Raises AttributeError when no class in the MRO defines ``name``.
    """
    found = find_attribute(cls, name)
    if found is None:
        raise AttributeError(f"{cls.__qualname__} has no attribute {name!r} to wrap")
    if is_wrapped(found[1], tag):
        return None
    handle: TaggedWrapper = wrapt.wrap_object(cls, name, TaggedWrapper, (wrapper, tag))
    return handle
