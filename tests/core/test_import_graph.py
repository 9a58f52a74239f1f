"""No import circles anywhere in the package: the module import graph, built from the source, has no cycle.

Why: a circle makes what a module holds at import time depend on which module was imported first (the
bootstrap's knot did: ``run()`` imports ``mixins.sglang_patch``, whose settings imported the bootstrap
back), and it hides which module is the home of a fact. The rule (docs/DESIGN.md §7.6):

- nodes: every module of ``mixins`` and the top-level ``_sglang_capture_trace_*`` modules beside it;
- an edge A -> B for every ``import`` / ``from ... import`` statement in A that names B, wherever it is:
  at the top, inside a function (a deferred import still makes a circle when it runs) or a ``try``; only
  ``if TYPE_CHECKING:`` blocks are left out (never executed). ``from P import x`` names ``P.x`` when that
  is a module, else ``P``;
- the parent packages Python runs on the way to a module (``mixins/__init__.py`` for ``mixins.cli``) are
  not edges unless imported by name, and ``importlib.import_module`` of a computed name is not seen (the
  package's two, in ``mixins/__init__.py`` and ``mixins/analysis/cli.py``, load modules below them).
"""

from __future__ import annotations

import ast
import graphlib
from collections.abc import Iterable
from pathlib import Path

REPO = Path(__file__).resolve().parents[2]


def module_files(root: Path) -> dict[str, Path]:
    """Module name -> file, for the package ``mixins`` and the top-level modules under ``root``."""
    files = {}
    for path in [*sorted((root / "mixins").rglob("*.py")), *sorted(root.glob("_sglang_capture_trace_*.py"))]:
        parts = list(path.relative_to(root).with_suffix("").parts)
        if parts[-1] == "__init__":
            parts.pop()
        files[".".join(parts)] = path
    return files


def _is_type_checking(node: ast.If) -> bool:
    test = node.test
    return (isinstance(test, ast.Name) and test.id == "TYPE_CHECKING") or (
        isinstance(test, ast.Attribute) and test.attr == "TYPE_CHECKING"
    )


def _imports(tree: ast.AST) -> Iterable[ast.Import | ast.ImportFrom]:
    """Every import statement of a module, at any depth, except those under ``if TYPE_CHECKING:``."""
    stack = [tree]
    while stack:
        node = stack.pop()
        for child in ast.iter_child_nodes(node):
            if isinstance(child, ast.If) and _is_type_checking(child):
                stack.extend(child.orelse)
            elif isinstance(child, (ast.Import, ast.ImportFrom)):
                yield child
            else:
                stack.append(child)


def import_graph(root: Path) -> dict[str, set[str]]:
    """Module -> the modules of the same graph it imports (rule: the module docstring)."""
    files = module_files(root)
    graph: dict[str, set[str]] = {}
    for name, path in files.items():
        package = name if path.name == "__init__.py" else name.rpartition(".")[0]
        edges = graph.setdefault(name, set())
        for node in _imports(ast.parse(path.read_text(), str(path))):
            if isinstance(node, ast.Import):
                edges.update(alias.name for alias in node.names if alias.name in files)
                continue
            base = node.module or ""
            if node.level:  # relative: from the package, one level up per extra dot
                parts = package.split(".")[: len(package.split(".")) - node.level + 1]
                base = ".".join([*parts, *([base] if base else [])])
            for alias in node.names:
                target = f"{base}.{alias.name}" if f"{base}.{alias.name}" in files else base
                if target in files and target != name:
                    edges.add(target)
    return graph


def cycles(graph: dict[str, set[str]]) -> list[list[str]]:
    """The modules of an import cycle, sorted, when there is one (``graphlib`` finds it); else none."""
    try:
        graphlib.TopologicalSorter(graph).prepare()
    except graphlib.CycleError as exc:
        return [sorted(set(exc.args[1]))]
    return []


def test_the_package_has_no_import_cycle() -> None:
    graph = import_graph(REPO)
    assert {"mixins.cli", "mixins.analysis.read.reader", "_sglang_capture_trace_bootstrap"} <= set(graph)
    assert "mixins.sglang_patch" in graph["_sglang_capture_trace_bootstrap"]  # function-level edges are seen
    assert cycles(graph) == []


def test_a_deferred_import_back_is_a_cycle(tmp_path: Path) -> None:
    """The rule at work on a planted package: a function-level import closing a loop is reported, an
    ``if TYPE_CHECKING:`` one is not."""
    package = tmp_path / "mixins"
    (package / "sub").mkdir(parents=True)
    (package / "__init__.py").write_text("")
    (package / "sub" / "__init__.py").write_text("")
    (package / "a.py").write_text("from mixins.sub import b\n")
    (package / "sub" / "b.py").write_text("def f():\n    from .. import c\n")
    (package / "c.py").write_text("from typing import TYPE_CHECKING\nif TYPE_CHECKING:\n    import mixins.a\n")
    (tmp_path / "_sglang_capture_trace_x.py").write_text("def run():\n    import mixins.a\n")
    assert cycles(import_graph(tmp_path)) == []
    (package / "c.py").write_text("import os\n\ndef g():\n    import mixins.a\n")
    assert cycles(import_graph(tmp_path)) == [["mixins.a", "mixins.c", "mixins.sub.b"]]
    (package / "c.py").write_text("")
    (package / "sub" / "b.py").write_text("import _sglang_capture_trace_x\n")
    assert cycles(import_graph(tmp_path)) == [["_sglang_capture_trace_x", "mixins.a", "mixins.sub.b"]]
