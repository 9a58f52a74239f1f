"""One home for each grammar and constant the exporter and the analyzer share, checked on the source.

Why: the segment label was written in ``capture_trace.py`` and parsed in three analyzer modules "kept in
sync by a comment"; the exit codes and ``time``'s phases were defined twice. Each now has one home, and
this test reads every module of the package (and the top-level bootstrap modules) and fails when one is
defined in a second module:

- the label grammar, home ``mixins/formats.py``: a string that starts with the ``capture::`` prefix
  (also as the start of a regular expression or an f-string), or with a label field (``bs=``,
  ``tokens=``, ``variant=``, after any regex anchor such as ``(?:^|,)``), or that holds the size bound
  ``\\d{1,18}``. Prose that mentions a label mid-sentence (a help text, a row's note) is not a definition;
  docstrings are not read;
- ``time``'s phases, home ``mixins/formats.py``: a name ``PHASES`` bound, or the four phase names
  written as a tuple or list;
- exit codes, home ``mixins/usage.py``: ``OK``, ``DIFFERENT``, ``TROUBLE``, ``INTERRUPTED``,
  ``BROKEN_PIPE`` or an ``EXIT_*`` name bound to a number, ``EXIT_CODES`` bound; a command function (one
  taking an ``argparse.Namespace``) or ``main`` returning a number literal; ``sys.exit`` / ``SystemExit``
  given one.
"""

from __future__ import annotations

import ast
import re
from pathlib import Path

from tests.core.test_import_graph import module_files

REPO = Path(__file__).resolve().parents[2]
FORMATS, USAGE = "mixins.formats", "mixins.usage"
PREFIX = "capture::"
FIELDS = ("bs=", "tokens=", "variant=")
# what may precede a field or the prefix in a pattern: anchors, separators, groups of them
_ANCHORS = re.compile(r"^(?:\^|\\A|,|\(\?:\^\|[^)]*\)|\(\?:\^\|,\))*")
PHASE_NAMES = ("warmup", "capture", "instantiate", "other")
EXIT_NAMES = {"OK", "DIFFERENT", "TROUBLE", "INTERRUPTED", "BROKEN_PIPE"}


def _docstrings(tree: ast.AST) -> set[int]:
    """ids of the docstring nodes (module, class, function): prose, not definitions."""
    found = set()
    for node in ast.walk(tree):
        if isinstance(node, (ast.Module, ast.ClassDef, ast.FunctionDef, ast.AsyncFunctionDef)) and node.body:
            first = node.body[0]
            if isinstance(first, ast.Expr) and isinstance(first.value, ast.Constant):
                found.add(id(first.value))
    return found


def _leading_text(node: ast.AST) -> str | None:
    """The literal text a string expression starts with: a constant, or an f-string's first part."""
    if isinstance(node, ast.Constant) and isinstance(node.value, str):
        return node.value
    if isinstance(node, ast.JoinedStr) and node.values:
        return _leading_text(node.values[0])
    return None


def _label_grammar(text: str) -> str | None:
    """Why ``text`` (a string literal) defines part of the label grammar, or None."""
    bare = _ANCHORS.sub("", text)
    if bare.startswith(PREFIX):
        return f"the {PREFIX!r} prefix"
    if bare.startswith(FIELDS):
        return f"a label field ({bare.split('=')[0]}=)"
    if r"\d{1,18}" in text:
        return "the size bound"
    return None


def _is_namespace_function(node: ast.FunctionDef | ast.AsyncFunctionDef) -> bool:
    annotations = [a.annotation for a in [*node.args.args, *node.args.kwonlyargs] if a.annotation is not None]
    return node.name == "main" or any("Namespace" in ast.unparse(a) for a in annotations)


def _number(node: ast.AST | None) -> bool:
    """A number literal, or a conditional choosing between number literals."""
    if isinstance(node, ast.IfExp):
        return _number(node.body) or _number(node.orelse)
    return isinstance(node, ast.Constant) and type(node.value) is int


def second_homes(module: str, source: str) -> list[str]:
    """What ``source`` (module ``module``) defines that has its home in another module."""
    tree = ast.parse(source)
    prose = _docstrings(tree)
    found = []
    for node in ast.walk(tree):
        where = f"{module}:{getattr(node, 'lineno', '?')}"
        if module != FORMATS and id(node) not in prose:
            text = _leading_text(node) if not isinstance(node, ast.Constant) or id(node) not in prose else None
            why = _label_grammar(text) if text is not None else None
            if why is not None and not (isinstance(node, ast.Constant) and _inside_fstring(tree, node)):
                found.append(f"{where}: {why}")
            if isinstance(node, (ast.Tuple, ast.List)):
                values = [e.value for e in node.elts if isinstance(e, ast.Constant)]
                if tuple(values) == PHASE_NAMES:
                    found.append(f"{where}: the phases")
        targets: list[ast.expr] = []
        if isinstance(node, ast.Assign):
            targets = node.targets
        elif isinstance(node, ast.AnnAssign):
            targets = [node.target]
        names = [n for t in targets for n in ast.walk(t) if isinstance(n, ast.Name)]
        if module != FORMATS and any(n.id == "PHASES" for n in names):
            found.append(f"{where}: PHASES")
        if module != USAGE and isinstance(node, (ast.Assign, ast.AnnAssign)):
            numbers = [v for v in ast.walk(node.value) if _number(v)] if node.value is not None else []
            for name in names:
                if name.id == "EXIT_CODES" or (
                    numbers and (name.id in EXIT_NAMES or name.id.startswith("EXIT_"))
                ):
                    found.append(f"{where}: exit code {name.id}")
        if module != USAGE and isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef)):
            if _is_namespace_function(node):
                for inner in ast.walk(node):
                    if isinstance(inner, ast.Return) and _number(inner.value):
                        found.append(f"{module}:{inner.lineno}: exit code returned as a number by {node.name}")
        if isinstance(node, ast.Call) and node.args and _number(node.args[0]):
            called = ast.unparse(node.func)
            if called in ("sys.exit", "exit", "SystemExit", "parser.exit"):
                found.append(f"{where}: exit code given to {called} as a number")
    return found


def _inside_fstring(tree: ast.AST, constant: ast.Constant) -> bool:
    """An f-string's parts are judged as the f-string (its first part), not one by one."""
    return any(
        isinstance(node, ast.JoinedStr) and any(part is constant for part in node.values) for node in ast.walk(tree)
    )


def test_each_grammar_and_constant_is_defined_once() -> None:
    files = module_files(REPO)
    assert FORMATS in files and USAGE in files
    found = [hit for name, path in files.items() for hit in second_homes(name, path.read_text())]
    assert found == []


def test_the_homes_hold_them() -> None:
    """The checks look for the right things: each home really defines what the others must not."""
    files = module_files(REPO)
    formats = second_homes("elsewhere", files[FORMATS].read_text())
    assert any("prefix" in hit for hit in formats) and any("size bound" in hit for hit in formats)
    assert any("PHASES" in hit for hit in formats)
    usage = second_homes("elsewhere", files[USAGE].read_text())
    assert {"exit code OK", "exit code TROUBLE", "exit code BROKEN_PIPE", "exit code EXIT_CODES"} <= {
        hit.split(": ", 1)[1] for hit in usage
    }


def test_planted_second_definitions_are_found() -> None:
    """Each way a grammar or constant was defined twice before it had one home."""
    planted = {
        'OUR_SEGMENT = re.compile(r"^capture::(?P<label>.+)$")': "prefix",
        'LAZY = "capture::graph"': "prefix",
        'name = f"capture::{unit}={size}"': "prefix",
        'x = "capture::" + ",".join(parts)': "prefix",
        '_BS = re.compile(r"(?:^|,)bs=(" + SIZE + r")(?:,|$)")': "label field (bs=)",
        'HINT = re.compile(r"(?:^|[^A-Za-z0-9])tokens=(" + SIZE + ")")': "label field (tokens=)",
        'label = f"tokens={n}"': "label field (tokens=)",
        '_VARIANT = re.compile(r"(?:^|,)variant=([^,#]+)")': "label field (variant=)",
        'SIZE = r"\\d{1,18}(?!\\d)"': "size bound",
        'PHASES = ("warmup", "capture", "instantiate", "other")': "PHASES",
        'keys = ["warmup", "capture", "instantiate", "other"]': "the phases",
        "OK, LOW_COVERAGE, TROUBLE = 0, 1, 2": "exit code TROUBLE",
        "BROKEN_PIPE = 141": "exit code BROKEN_PIPE",
        "def run(args: argparse.Namespace) -> int:\n    return 1 if args.x else 0": "returned as a number by run",
        "def main() -> int:\n    return 130": "returned as a number by main",
        "sys.exit(2)": "given to sys.exit",
    }
    for source, expected in planted.items():
        hits = second_homes("mixins.somewhere", source)
        assert any(expected in hit for hit in hits), (source, hits)
    prose = (
        'def f():\n    """Parse ``capture::bs=8`` (``\\\\d{1,18}``)."""\n'
        'WHY = "label each batch size\'s capture as a capture::bs=N range"\n'
        "code = 0\nreturn_value = usage.OK\n"
    )
    assert second_homes("mixins.somewhere", prose) == []
