"""``mixins.patching`` on its own: wrap a method on one class, recognise our wrappers, restore exactly."""

from __future__ import annotations

import inspect
from typing import Any

import pytest

from mixins.patching import find_attribute, is_wrapped, unwrap_method, wrap_method


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
    assert wrap_method(own, "hook", tracing(log, "w"), tag="t") is True
    assert is_wrapped(vars(own)["hook"]) and is_wrapped(vars(own)["hook"], "t")
    assert not is_wrapped(vars(own)["hook"], "other")
    assert own().hook(1, flag=True) == "Own.hook(1)"
    assert log == ["w:Own"]
    assert inspect.signature(own.hook) == inspect.signature(original)
    assert unwrap_method(own, "hook", tag="t") is True
    assert vars(own)["hook"] is original


def test_inherited_method_gets_an_own_wrapper_that_is_deleted_on_restore() -> None:
    _, inheriting = fresh_classes()
    log: list[str] = []
    assert "hook" not in vars(inheriting)
    assert wrap_method(inheriting, "hook", tracing(log, "w"), tag="t") is True
    assert is_wrapped(vars(inheriting)["hook"], "t")
    assert inheriting().hook(2) == "Base.hook(2,False)"
    assert Base().hook(3) == "Base.hook(3,False)"  # the base is untouched
    assert log == ["w:Inheriting"]
    assert unwrap_method(inheriting, "hook", tag="t") is True
    assert "hook" not in vars(inheriting)
    assert not is_wrapped(vars(Base)["hook"])


def test_same_tag_never_wraps_twice_even_through_inheritance() -> None:
    own, _ = fresh_classes()
    log: list[str] = []
    Sub = type("Sub", (own,), {})

    assert wrap_method(own, "hook", tracing(log, "w"), tag="t") is True
    assert wrap_method(own, "hook", tracing(log, "again"), tag="t") is False
    assert wrap_method(Sub, "hook", tracing(log, "sub"), tag="t") is False  # the inherited wrapper runs already
    assert "hook" not in vars(Sub)
    Sub().hook(1)
    assert log == ["w:Sub"]


def test_other_tags_stack_and_unwrap_in_reverse_order_only() -> None:
    own, _ = fresh_classes()
    original = vars(own)["hook"]
    log: list[str] = []
    assert wrap_method(own, "hook", tracing(log, "inner"), tag="a") is True
    assert wrap_method(own, "hook", tracing(log, "outer"), tag="b") is True
    own().hook(1)
    assert log == ["outer:Own", "inner:Own"]
    assert unwrap_method(own, "hook", tag="a") is False  # not on top: left as is
    assert is_wrapped(vars(own)["hook"], "b")
    assert unwrap_method(own, "hook", tag="b") is True
    assert unwrap_method(own, "hook", tag="a") is True
    assert vars(own)["hook"] is original
    assert unwrap_method(own, "hook", tag="a") is False  # nothing left to undo


def test_static_and_class_methods_keep_their_binding() -> None:
    _, inheriting = fresh_classes()
    log: list[str] = []
    assert wrap_method(inheriting, "static", tracing(log, "s"), tag="t")
    assert wrap_method(inheriting, "klass", tracing(log, "c"), tag="t")
    assert inheriting.static(1) == 2 and inheriting().static(1) == 2
    assert inheriting.klass(5) == "Inheriting:5"
    assert unwrap_method(inheriting, "static", tag="t") and unwrap_method(inheriting, "klass", tag="t")
    assert "static" not in vars(inheriting) and "klass" not in vars(inheriting)


def test_wrapping_a_missing_method_names_the_class_and_the_method() -> None:
    _, inheriting = fresh_classes()
    with pytest.raises(AttributeError, match="Inheriting has no attribute 'missing' to wrap"):
        wrap_method(inheriting, "missing", tracing([], "w"), tag="t")
    assert not is_wrapped(Base.hook) and not is_wrapped(None)
