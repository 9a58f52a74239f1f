"""TEST STAND-IN (see ``sgl_kernel/__init__.py``): the names sglang's quantization modules import from the
real ``sgl_kernel.scalar_type`` at module level (``ScalarType``, ``scalar_types.uint4b8`` and friends)."""

from __future__ import annotations

from typing import Any


class ScalarType:
    """A named placeholder: sglang compares and prints these at import time, never computes with them."""

    def __init__(self, name: str) -> None:
        self.name = name

    def __repr__(self) -> str:
        return f"ScalarType({self.name!r})"


class _ScalarTypes:
    def __getattr__(self, name: str) -> Any:
        if name.startswith("__"):
            raise AttributeError(name)
        value = ScalarType(name)
        setattr(self, name, value)  # the same object every time, as the real constants are
        return value


scalar_types = _ScalarTypes()
