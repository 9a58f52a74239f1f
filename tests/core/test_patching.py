"""``mixins.patching`` on its own: wrap a method on one class, recognise our wrappers; wrapt's
``unwrap_object`` restores ``vars(cls)`` exactly with the handle ``wrap_method`` returns."""

from __future__ import annotations

import inspect
from typing import Any

import pytest
import wrapt

from mixins.patching import find_attribute, is_wrapped, wrap_method


def tracing(log: list[str], name: str) -> Any:
    def wrapper(wrapped: Any, instance: Any, args: tuple[Any, ...], kwargs: dict[str, Any]) -> Any:
        log.append(f"{name}:{type(instance).__name__ if instance is not None else None}")
        return wrapped(*args, **kwargs)

    return wrapper


class Base:
    def hook(self, prof: Any, *, flag: bool = False) -> str:
        return f"Base.hook({prof},{flag})"

    @staticmethod
    def static(x: int) -> int:
        return x + 1

    @classmethod
    def klass(cls, x: int) -> str:
        return f"{cls.__name__}:{x}"


def fresh_classes() -> tuple[type[Base], type[Base]]:
    class Own(Base):
        def hook(self, prof: Any, *, flag: bool = False) -> str:
            return f"Own.hook({prof})"

    class Inheriting(Base):
        pass

    return Own, Inheriting


def test_find_attribute_returns_the_raw_attribute_and_its_owner() -> None:
    own, inheriting = fresh_classes()
    assert find_attribute(own, "hook") == (own, vars(own)["hook"])
    assert find_attribute(inheriting, "hook") == (Base, vars(Base)["hook"])
    found = find_attribute(inheriting, "static")
    assert found is not None and isinstance(found[1], staticmethod)  # not bound, not unwrapped
    assert find_attribute(inheriting, "missing") is None


def test_own_method_wrapped_then_restored_to_the_same_object() -> None:
    own, _ = fresh_classes()
    original = vars(own)["hook"]
    log: list[str] = []
    handle = wrap_method(own, "hook", tracing(log, "w"), tag="t")
    assert handle is vars(own)["hook"]
    assert is_wrapped(vars(own)["hook"]) and is_wrapped(vars(own)["hook"], "t")
    assert not is_wrapped(vars(own)["hook"], "other")
    assert own().hook(1, flag=True) == "Own.hook(1)"
    assert log == ["w:Own"]
    assert inspect.signature(own.hook) == inspect.signature(original)
    assert wrapt.unwrap_object(own, "hook", handle) is handle
    assert vars(own)["hook"] is original


def test_inherited_method_gets_an_own_wrapper_that_is_deleted_on_restore() -> None:
    _, inheriting = fresh_classes()
    log: list[str] = []
    assert "hook" not in vars(inheriting)
    handle = wrap_method(inheriting, "hook", tracing(log, "w"), tag="t")
    assert handle is not None and is_wrapped(vars(inheriting)["hook"], "t")
    assert inheriting().hook(2) == "Base.hook(2,False)"
    assert Base().hook(3) == "Base.hook(3,False)"  # the base is untouched
    assert log == ["w:Inheriting"]
    wrapt.unwrap_object(inheriting, "hook", handle)
    assert "hook" not in vars(inheriting)  # deleted, not a copy of the base's put back
    assert not is_wrapped(vars(Base)["hook"])


def test_same_tag_never_wraps_twice_even_through_inheritance() -> None:
    own, _ = fresh_classes()
    log: list[str] = []
    Sub = type("Sub", (own,), {})

    assert wrap_method(own, "hook", tracing(log, "w"), tag="t") is not None
    assert wrap_method(own, "hook", tracing(log, "again"), tag="t") is None
    assert wrap_method(Sub, "hook", tracing(log, "sub"), tag="t") is None  # the inherited wrapper runs already
    assert "hook" not in vars(Sub)
    Sub().hook(1)
    assert log == ["w:Sub"]


def test_same_tag_never_wraps_twice_under_another_wrapper() -> None:
    """Someone else's wrapt wrapper laid over ours hides it from a look at the outermost wrapper only."""
    own, _ = fresh_classes()
    log: list[str] = []
    ours = wrap_method(own, "hook", tracing(log, "ours"), tag="t")
    theirs = wrapt.wrap_function_wrapper(own, "hook", tracing(log, "theirs"))
    assert is_wrapped(vars(own)["hook"], "t")
    assert wrap_method(own, "hook", tracing(log, "again"), tag="t") is None
    own().hook(1)
    assert log == ["theirs:Own", "ours:Own"]
    wrapt.unwrap_object(own, "hook", ours)  # spliced out from under theirs, which stays
    assert vars(own)["hook"] is theirs and not is_wrapped(vars(own)["hook"])


def test_other_tags_stack_and_unwrap_in_any_order() -> None:
    own, _ = fresh_classes()
    original = vars(own)["hook"]
    log: list[str] = []
    inner = wrap_method(own, "hook", tracing(log, "inner"), tag="a")
    outer = wrap_method(own, "hook", tracing(log, "outer"), tag="b")
    own().hook(1)
    assert log == ["outer:Own", "inner:Own"]
    wrapt.unwrap_object(own, "hook", inner)  # under another wrapper: spliced out
    assert vars(own)["hook"] is outer and not is_wrapped(vars(own)["hook"], "a")
    own().hook(2)
    assert log[2:] == ["outer:Own"]
    wrapt.unwrap_object(own, "hook", outer)
    assert vars(own)["hook"] is original
    assert wrapt.unwrap_object(own, "hook", inner, missing_ok=True) is None  # nothing left to undo


def test_static_and_class_methods_keep_their_binding() -> None:
    _, inheriting = fresh_classes()
    log: list[str] = []
    static = wrap_method(inheriting, "static", tracing(log, "s"), tag="t")
    klass = wrap_method(inheriting, "klass", tracing(log, "c"), tag="t")
    assert inheriting.static(1) == 2 and inheriting().static(1) == 2
    assert inheriting.klass(5) == "Inheriting:5"
    wrapt.unwrap_object(inheriting, "static", static)
    wrapt.unwrap_object(inheriting, "klass", klass)
    assert "static" not in vars(inheriting) and "klass" not in vars(inheriting)


def test_wrapping_a_missing_method_names_the_class_and_the_method() -> None:
    _, inheriting = fresh_classes()
    with pytest.raises(AttributeError, match="Inheriting has no attribute 'missing' to wrap"):
        wrap_method(inheriting, "missing", tracing([], "w"), tag="t")
    assert not is_wrapped(Base.hook) and not is_wrapped(None)
