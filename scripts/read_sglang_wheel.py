"""Read sglang wheels (never importing them) and say, per row of ``mixins.sglang_targets.TARGETS``,
whether the row applies there, plus the facts the rows' notes rely on.

Usage (docs/DESIGN.md §5, "adding a sglang version"):

    pip download --no-deps sglang==0.5.24 -d /tmp/wheels
    python scripts/read_sglang_wheel.py /tmp/wheels/sglang-0.5.24-*.whl         # per row: applies / skip: why
    python scripts/read_sglang_wheel.py --check /tmp/wheels/*.whl               # disagreements with read_in

The checks are the rows' own structural checks (``sglang_patch.shape_mismatch`` and ``native_profiling``:
class present, methods defined or inherited, names referenced), run on the source read with ``ast``: base
classes are followed through ``from X import Y`` inside the wheel; bases outside it count as having no
methods. This is the evidence behind each row's ``read_in``; the CI venvs then run the rows for real
(``verified_in``).
"""

from __future__ import annotations

import argparse
import ast
import re
import sys
import zipfile
from collections.abc import Iterator
from dataclasses import dataclass, field
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from mixins.sglang_patch import native_profiling, shape_mismatch  # noqa: E402
from mixins.sglang_targets import HOOK, NATIVE_EXPORT, RUNTIME_CONTEXT, SHAPE_METHODS, TARGETS, Strategy, Target  # noqa: E402


@dataclass
class Wheel:
    """The Python sources of one sglang wheel, parsed on demand."""

    version: str
    sources: dict[str, str]
    _trees: dict[str, ast.Module] = field(default_factory=dict)

    @classmethod
    def open(cls, path: Path) -> Wheel:
        match = re.match(r"sglang-(\d+\.\d+\.\d+)", path.name)
        if match is None:
            raise SystemExit(f"read_sglang_wheel: {path}: not an sglang wheel name (sglang-X.Y.Z-...whl)")
        with zipfile.ZipFile(path) as archive:
            sources = {
                name: archive.read(name).decode("utf-8", "replace")
                for name in archive.namelist()
                if name.startswith("sglang/") and name.endswith(".py")
            }
        return cls(match.group(1), sources)

    def file_of(self, module: str) -> str | None:
        base = module.replace(".", "/")
        for name in (f"{base}.py", f"{base}/__init__.py"):
            if name in self.sources:
                return name
        return None

    def tree(self, module: str) -> ast.Module | None:
        name = self.file_of(module)
        if name is None:
            return None
        if name not in self._trees:
            self._trees[name] = ast.parse(self.sources[name])
        return self._trees[name]


@dataclass
class Klass:
    module: str
    node: ast.ClassDef

    def own(self) -> dict[str, ast.AST]:
        return self.definitions(self.node.body)

    @staticmethod
    def definitions(body: list[ast.stmt]) -> dict[str, ast.AST]:
        """The functions and assigned names of a class or module body, each to its (last) definition."""
        members: dict[str, ast.AST] = {}
        for item in body:
            if isinstance(item, (ast.FunctionDef, ast.AsyncFunctionDef)):
                members[item.name] = item
            elif isinstance(item, ast.Assign):
                members.update({t.id: item for t in item.targets if isinstance(t, ast.Name)})
        return members


def module_global(wheel: Wheel, module: str, name: str, depth: int = 0) -> Klass | ast.AST | None:
    """What ``name`` is at the top level of ``module``: a class (followed through imports), another
    definition or import, or None."""
    tree = wheel.tree(module)
    if tree is None or depth > 10:
        return None
    found: Klass | ast.AST | None = None
    for node in tree.body:  # the last top-level binding wins, as at run time
        if isinstance(node, ast.ClassDef) and node.name == name:
            found = Klass(module, node)
        elif isinstance(node, (ast.FunctionDef, ast.Assign)) and name in Klass.definitions([node]):
            found = node
        elif isinstance(node, ast.ImportFrom) and node.module and node.level == 0:
            for alias in node.names:
                if (alias.asname or alias.name) == name:
                    target = module_global(wheel, node.module, alias.name, depth + 1)
                    found = target if isinstance(target, Klass) else node
    return found


def mro(wheel: Wheel, klass: Klass) -> Iterator[Klass]:
    """The class and its bases inside the wheel, depth first (close enough to the MRO for these checks)."""
    seen: set[tuple[str, str]] = set()
    stack = [klass]
    while stack:
        current = stack.pop(0)
        key = (current.module, current.node.name)
        if key in seen:
            continue
        seen.add(key)
        yield current
        for base in current.node.bases:
            if isinstance(base, ast.Name):
                found = module_global(wheel, current.module, base.id)
                if isinstance(found, Klass):
                    stack.append(found)


def find_member(wheel: Wheel, klass: Klass, name: str) -> ast.AST | None:
    for owner in mro(wheel, klass):
        member = owner.own().get(name)
        if member is not None:
            return member
    return None


def referenced_names(node: ast.AST | None) -> set[str]:
    """Names and attribute names used in a function (a superset of its ``co_names``)."""
    names: set[str] = set()
    for sub in ast.walk(node) if node is not None else ():
        if isinstance(sub, ast.Name):
            names.add(sub.id)
        elif isinstance(sub, ast.Attribute):
            names.add(sub.attr)
    return names


def check_row(wheel: Wheel, target: Target) -> str:
    """``applies`` or ``skip: why``, as ``sglang_patch.applicable_class`` and the strategy would say (their own
    checks, on the source)."""
    if wheel.file_of(target.module) is None:
        return "skip: no module"
    klass = module_global(wheel, target.module, target.cls)
    if not isinstance(klass, Klass):
        return f"skip: no class {target.cls}"
    mismatch = shape_mismatch(target, klass.own(), lambda name: find_member(wheel, klass, name), referenced_names)
    if mismatch is not None:
        return f"skip: {mismatch[1]}"
    return _strategy_check(wheel, target, klass)


def _strategy_check(wheel: Wheel, target: Target, klass: Klass) -> str:
    if target.strategy is Strategy.ADOPT_HOOK:
        base = module_global(wheel, target.module, target.base or "")
        if not isinstance(base, Klass):
            return f"skip: no class {target.base}"
        lacking = [n for n in target.base_requires if find_member(wheel, base, n) is None]
        return f"skip: {target.base} lacks {lacking}" if lacking else "applies"
    if target.strategy is Strategy.INLINE_CAPTURE:
        return "applies" if module_global(wheel, target.module, "profile") is not None else "skip: no 'profile'"
    if target.strategy in (Strategy.PROFILE_CAPTURE, Strategy.PROFILE_LAZY_CAPTURE):
        if find_member(wheel, klass, target.method) is None:
            return f"skip: lacks {target.method}"
        native = native_profiling(target, lambda name: find_member(wheel, klass, name), referenced_names)
        return f"deferred to native ({', '.join(native)})" if native else "applies (profiled by us)"
    if target.strategy is Strategy.TAKE_OVER_NATIVE:
        hook = klass.own().get(target.method)
        if NATIVE_EXPORT not in referenced_names(hook):
            return "applies (plain hook: no native export)"
        if not isinstance(module_global(wheel, target.module, NATIVE_EXPORT), ast.ImportFrom):
            return "deferred to native (not a module-level name)"
        return "applies (takes over the native export)"
    return "applies"


def facts(wheel: Wheel) -> Iterator[str]:
    """The version facts the rows' notes and the rank discovery rely on."""
    for target in TARGETS:
        if target.strategy is Strategy.TAKE_OVER_NATIVE:
            klass = module_global(wheel, target.module, target.cls)
            hook = klass.own().get(HOOK) if isinstance(klass, Klass) else None
            source = wheel.sources.get(wheel.file_of(target.module) or "", "")
            for call in (n for n in ast.walk(hook) if isinstance(n, ast.Call)) if hook else ():
                if isinstance(call.func, ast.Name) and call.func.id == NATIVE_EXPORT:
                    text = " ".join((ast.get_source_segment(source, call) or "").split())
                    yield f"native export call: {text}"
    for target in TARGETS:
        if target.strategy is Strategy.LABEL_SHAPES and target.method in SHAPE_METHODS:
            klass = module_global(wheel, target.module, target.cls)
            member = klass.own().get(target.method) if isinstance(klass, Klass) else None
            if isinstance(member, ast.FunctionDef):
                yield f"{target.cls}.{target.method}({ast.unparse(member.args)})"
    runtime = wheel.tree(RUNTIME_CONTEXT)
    has_get_parallel = runtime is not None and module_global(wheel, RUNTIME_CONTEXT, "get_parallel") is not None
    yield f"{RUNTIME_CONTEXT}.get_parallel: {'yes' if has_get_parallel else 'no'}"
    yield f"plugin loader sglang.srt.plugins: {'yes' if wheel.file_of('sglang.srt.plugins') else 'no'}"


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("wheels", nargs="+", type=Path, help="sglang-X.Y.Z-*.whl files")
    parser.add_argument("--check", action="store_true", help="only print rows whose read_in disagrees")
    args = parser.parse_args(argv)
    disagreements = 0
    for path in sorted(args.wheels, key=lambda p: [int(x) for x in re.findall(r"\d+", p.name)[:3]]):
        wheel = Wheel.open(path)
        if not args.check:
            print(f"== sglang {wheel.version}")
        for target in TARGETS:
            verdict = check_row(wheel, target)
            applies = verdict.startswith("applies")
            listed = wheel.version in target.read_in
            if args.check:
                if applies != listed:
                    disagreements += 1
                    has = "has" if listed else "lacks"
                    print(f"{wheel.version} {target.qualname}: {verdict}, but read_in {has} it")
            else:
                print(f"  {target.cls}.{target.method} [{target.strategy.value}]: {verdict}")
        if not args.check:
            for line in facts(wheel):
                print(f"  fact: {line}")
    return 1 if disagreements else 0


if __name__ == "__main__":
    sys.exit(main())
