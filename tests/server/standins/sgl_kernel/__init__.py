"""TEST STAND-IN for ``sgl_kernel``, sglang's kernel package: used only by tests/server, never installed.

Why: PyPI has no CPU build of it (the ``sglang-kernel`` wheel is CUDA-only), yet sglang imports names from
it while the CPU server starts. This package can be imported and nothing more:

- any attribute is a function that raises when called, and any submodule ``sgl_kernel.X`` is a module of
  such functions (``_StandInFinder``);
- ``sgl_kernel.scalar_type`` holds the names sglang's quantization modules read at import time;
- the ``torch.ops.sgl_kernel`` operators that sglang's ``cpu_graph_runner.register_fake_ops()`` attaches
  torch.compile fakes to exist, with a placeholder schema (their names are read from that function in the
  installed sglang, so they follow the release). ``convert_weight_packed`` is deliberately not among
  them: without it sglang decides Intel AMX is unavailable and uses the ``torch_native`` attention backend,
  whose path never calls an ``sgl_kernel`` operator — so every kernel the server runs is torch's own.
"""

from __future__ import annotations

import ast
import importlib.abc
import importlib.machinery
import importlib.util
import sys
import types
from pathlib import Path
from typing import Any

STAND_IN = "sgl_kernel test stand-in"
CPU_GRAPH_RUNNER = Path("srt", "model_executor", "cpu_graph_runner.py")


def _raiser(qualname: str) -> Any:
    def kernel(*args: Any, **kwargs: Any) -> Any:
        raise RuntimeError(f"{qualname} called: this is the {STAND_IN}, which has no kernels")

    kernel.__qualname__ = kernel.__name__ = qualname.rsplit(".", 1)[-1]
    return kernel


class _StandInModule(types.ModuleType):
    """A submodule whose every public attribute is a raising function."""

    def __getattr__(self, name: str) -> Any:
        if name.startswith("__"):
            raise AttributeError(name)
        return _raiser(f"{self.__name__}.{name}")


class _StandInFinder(importlib.abc.MetaPathFinder, importlib.abc.Loader):
    """Last on ``sys.meta_path``: ``sgl_kernel.X`` that no real file provides becomes a ``_StandInModule``."""

    def find_spec(self, fullname: str, path: Any = None, target: Any = None) -> importlib.machinery.ModuleSpec | None:
        if not fullname.startswith(__name__ + "."):
            return None
        return importlib.machinery.ModuleSpec(fullname, self, is_package=True)

    def create_module(self, spec: importlib.machinery.ModuleSpec) -> types.ModuleType:
        module = _StandInModule(spec.name)
        module.__path__ = []
        return module

    def exec_module(self, module: types.ModuleType) -> None:
        pass


def __getattr__(name: str) -> Any:
    if name.startswith("__"):
        raise AttributeError(name)
    return _raiser(f"{__name__}.{name}")


def fake_op_names(source: str) -> list[str]:
    """The operator names ``register_fake_ops()`` registers fakes for: the string arguments of
    ``register_cpu_compile_fake(...)`` and the names in its lists of operators."""
    tree = ast.parse(source)
    function = next(n for n in tree.body if isinstance(n, ast.FunctionDef) and n.name == "register_fake_ops")
    names: set[str] = set()
    for node in ast.walk(function):
        if isinstance(node, ast.Call) and getattr(node.func, "id", None) == "register_cpu_compile_fake":
            names.update(arg.value for arg in node.args if isinstance(arg, ast.Constant) and isinstance(arg.value, str))
        elif isinstance(node, ast.List) and node.elts:
            if all(isinstance(e, ast.Constant) and isinstance(e.value, str) for e in node.elts):
                names.update(e.value for e in node.elts)  # type: ignore[attr-defined]
    return sorted(names)


_library: Any = None  # must stay alive: dropping it unregisters the operators


def _define_ops() -> None:
    global _library
    import torch

    spec = importlib.util.find_spec("sglang")  # finds the package without importing it
    if spec is None or not spec.submodule_search_locations:
        return
    source = Path(spec.submodule_search_locations[0], CPU_GRAPH_RUNNER)
    if not source.is_file():
        return
    _library = torch.library.Library("sgl_kernel", "DEF")
    for name in fake_op_names(source.read_text()):
        _library.define(f"{name}(Tensor input) -> Tensor")  # placeholder: only fakes are attached, never run


sys.meta_path.append(_StandInFinder())
_define_ops()
