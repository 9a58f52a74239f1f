"""The analyzer builds each join of a trace in one module: correlation / External id indexes and the
segment each row belongs to are made by the model's link pass (``mixins/analysis/model/timeline.py``:
``Joins``, ``Timeline.segment_finder``, ``Timeline.row_segments``) and only queried elsewhere. Read from
the source, so a command that builds its own index again fails here, naming the file and line."""

from __future__ import annotations

import ast
from collections.abc import Callable
from pathlib import Path

import mixins.analysis

ANALYSIS = Path(mixins.analysis.__file__).resolve().parent
HOME = ANALYSIS / "model" / "timeline.py"
RULES = ANALYSIS / "model" / "segments.py"  # where the segment rule itself is defined
# what builds a correlation / External id index, and what assigns rows to segments
INDEX_BUILDERS = {"IdIndex", "Joins"}
INDEX_CONSTRUCTORS = {"where"}  # IdIndex.where
SEGMENT_BUILDERS = {"assigner", "segment_tables", "_innermost_table"}
ID_COLUMNS = {"corr", "ext", "op_ext", "call_ext", "dev_ext", "launch_corr", "kernel_corr", "correlation"}


def _name(node: ast.expr) -> str | None:
    if isinstance(node, ast.Name):
        return node.id
    if isinstance(node, ast.Attribute):
        return node.attr
    return None


def builds(tree: ast.AST) -> list[tuple[int, str]]:
    """(line, what) for each place ``tree`` builds a join: an index constructor called, the segment rule
    called, or a dict keyed by an id column (``{c.corr[i]: …}``, ``d[x.ext[i]] = …``)."""
    out: list[tuple[int, str]] = []
    for node in ast.walk(tree):
        if isinstance(node, ast.Call):
            f = node.func
            if _name(f) in INDEX_BUILDERS | SEGMENT_BUILDERS:
                out.append((node.lineno, f"{_name(f)}(…)"))
            elif isinstance(f, ast.Attribute) and f.attr in INDEX_CONSTRUCTORS and _name(f.value) in INDEX_BUILDERS:
                out.append((node.lineno, f"{_name(f.value)}.{f.attr}(…)"))
        keys: list[ast.expr] = []
        if isinstance(node, ast.DictComp):
            keys = [node.key]
        elif isinstance(node, ast.Assign):
            keys = [t.slice for t in node.targets if isinstance(t, ast.Subscript)]
        for key in keys:
            if isinstance(key, ast.Subscript) and _name(key.value) in ID_COLUMNS:
                out.append((getattr(node, "lineno", 0), f"a dict keyed by {_name(key.value)}"))
    return out


def _found(scan: Callable[[ast.AST], list[tuple[int, str]]], skip: tuple[Path, ...] = ()) -> list[str]:
    return [
        f"{path.relative_to(ANALYSIS)}:{line}: {what}"
        for path in sorted(ANALYSIS.rglob("*.py")) if path not in skip
        for line, what in scan(ast.parse(path.read_text(), str(path)))
    ]


def test_joins_and_segment_assignment_are_built_in_the_model_only() -> None:
    assert _found(builds, (HOME, RULES)) == []


def test_the_home_builds_them() -> None:
    """The check reads what it should: the model does build them (else the test above could not fail)."""
    whats = {what for _, what in builds(ast.parse(HOME.read_text()))}
    assert {"IdIndex.where(…)", "Joins(…)", "assigner(…)", "segment_tables(…)"} <= whats


def test_a_second_builder_is_found() -> None:
    source = (
        "from mixins.analysis.model.timeline import IdIndex\n"
        "def f(tl):\n"
        "    index = IdIndex.where(tl.calls.corr)\n"
        "    by_corr = {tl.device.corr[k]: k for k in range(3)}\n"
        "    find = assigner(segs, pids)\n"
    )
    assert [what for _, what in builds(ast.parse(source))] == [
        "IdIndex.where(…)", "a dict keyed by corr", "assigner(…)",
    ]


def second_shapes(tree: ast.AST) -> list[tuple[int, str]]:
    """(line, what) for each thing that gives the model a second shape: a ``Links`` class, a ``timed``
    method (a copy less the untimed rows), ``.links`` / ``.timed(…)`` read, or ``load_timeline`` given
    (or defining) a parameter other than the reader's ``fields``."""
    out: list[tuple[int, str]] = []
    for node in ast.walk(tree):
        if isinstance(node, ast.ClassDef) and node.name == "Links":
            out.append((node.lineno, "class Links"))
        elif isinstance(node, ast.FunctionDef) and node.name == "timed":
            out.append((node.lineno, "def timed"))
        elif isinstance(node, ast.FunctionDef) and node.name == "load_timeline":
            extra = [a.arg for a in node.args.kwonlyargs if a.arg != "fields"]
            out += [(node.lineno, f"load_timeline({name}=)") for name in extra]
        elif isinstance(node, ast.Attribute) and node.attr in ("links", "timed"):
            out.append((node.lineno, f".{node.attr}"))
        elif isinstance(node, ast.Call) and _name(node.func) == "load_timeline":
            out += [(node.lineno, f"load_timeline({k.arg}=)") for k in node.keywords if k.arg != "fields"]
    return out


def test_the_model_has_one_shape() -> None:
    """No ``Links`` beside the timeline, no ``timed()`` copy, no load flags: a command picks the fields
    the reader decodes, never another model."""
    assert _found(second_shapes) == []


def test_a_second_shape_is_found() -> None:
    source = (
        "class Links: ...\n"
        "def timed(self): ...\n"
        "def load_timeline(path, progress=None, *, fields=None, links=False): ...\n"
        "tl = load_timeline(p, links=True).timed()\n"
        "x = tl.links\n"
    )
    assert sorted(what for _, what in second_shapes(ast.parse(source))) == sorted([
        "class Links", "def timed", "load_timeline(links=)", "load_timeline(links=)", ".timed", ".links",
    ])
