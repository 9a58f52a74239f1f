"""``capture-trace doctor``: why does (or doesn't) a trace appear in this environment? It must answer in exactly
the environments that are broken, so every probe is isolated (docs/DESIGN.md §5); the switch and
``SGLANG_PLUGINS`` are read by the start-up bootstrap's own functions (§4).
"""

from __future__ import annotations

import argparse
import importlib
import importlib.util
import os
import pkgutil
import platform
import site
import sys
from collections.abc import Callable
from dataclasses import dataclass
from importlib import metadata
from typing import Any

from _sglang_capture_trace_bootstrap import ownership_problem  # noqa: E402
from _sglang_capture_trace_switches import OWN_PTH as PTH_NAME  # noqa: E402
from mixins import helptext, naming, settings
from mixins.metadata import PACKAGE, distribution_version
from mixins.one_line import one_line
from mixins.sglang_targets import PLUGIN_GROUP, PLUGIN_LOADER, PLUGIN_NAME, TARGETS, modules
from mixins.usage import DIFFERENT, OK

# Plain text: argparse shows it as written (wrapped), so no reST markup.
DESCRIPTION = (
    "The first thing to run when no trace appears. It prints the installed versions, whether the switch "
    f"{settings.ENABLE} is on, whether sglang imports, which activation routes are live (sglang's plugin "
    f"loader with our entry point and the {settings.PLUGINS} allow-list, the .pth start-up hook), and every "
    "patch row's state for the sglang installed here. To know which rows apply it imports sglang and its "
    "runner modules (--no-import skips that) and, if the start-up hook has not installed the patch in this "
    "process, installs it for the report and uninstalls it again. Exit code 0 when a trace can appear, 1 "
    "when something named in the report stops it (a part of the check that fails counts as such)."
)


def add_command(commands: Any) -> None:
    parser = helptext.add_command(
        commands,
        "doctor",
        DESCRIPTION,
        ["capture-trace doctor", "capture-trace doctor --no-import"],
        exit_codes=("a trace can appear", "something named in the report stops it", "usage error"),
    )
    _add_arguments(parser)


def _add_arguments(parser: argparse.ArgumentParser) -> None:
    parser.add_argument(
        "--no-import", action="store_true",
        help="do not import sglang or its runner modules (rows stay 'waiting'; an sglang that fails to "
        "import goes unnoticed)",
    )
    parser.set_defaults(func=run)


def main(argv: list[str] | None = None) -> int:
    """``python -m mixins.doctor``: the same report without the analyzer's dependencies (rich, msgspec)."""
    parser = argparse.ArgumentParser(
        prog="capture-trace doctor", description=DESCRIPTION, formatter_class=helptext.HelpFormatter
    )
    _add_arguments(parser)
    return run(parser.parse_args(argv))


def cause(exc: BaseException) -> str:
    """``Type: first line of the message``, on one line whatever the message holds."""
    lines = [line.strip() for line in str(exc).splitlines() if line.strip()]
    return one_line(f"{type(exc).__name__}: {lines[0]}" if lines else type(exc).__name__)


@dataclass(frozen=True)
class Sglang:
    """What became of sglang here: ``imported``, why not (``failure``), and the report's lines on it."""

    lines: list[str]
    imported: bool = False
    failure: str | None = None


Probe = Callable[[list[str]], "tuple[str, list[str]]"]


def run(args: argparse.Namespace) -> int:
    if hasattr(sys.stdout, "reconfigure"):  # a value from the environment is shown, never a traceback
        sys.stdout.reconfigure(errors="backslashreplace")
    problems: list[str] = []
    sglang = _import_sglang(problems, not args.no_import)
    probes: list[tuple[str, Probe]] = [
        ("versions", lambda _problems: _versions()),
        ("sglang", lambda _problems: ("sglang", sglang.lines)),
        ("switch", _switch),
        ("activation routes", _routes),
        ("patch rows", lambda problems_: _rows(problems_, sglang)),
    ]
    for name, probe in probes:
        title, lines = _isolated(name, probe, problems)
        print(title)
        for line in lines:
            print(f"  {line}")
    for problem in problems:
        print(f"problem: {problem}")
    if not problems:
        print("no problem found: a capture with --enable-profile-cuda-graph writes a trace")
    return DIFFERENT if problems else OK


def _isolated(name: str, probe: Probe, problems: list[str]) -> tuple[str, list[str]]:
    """One probe; if it raises, its section says so and the failure is a problem (doctor cannot vouch)."""
    try:
        return probe(problems)
    except Exception as exc:  # a broken environment is what doctor is for: report, never crash
        problems.append(f"the {name} check failed, so doctor cannot tell whether a trace appears: {cause(exc)}")
        return name, [f"failed: {cause(exc)}"]


def _import_sglang(problems: list[str], do_import: bool) -> Sglang:
    """``import sglang`` as a server would; a failure is the problem (no sglang process can start)."""
    if not _importable("sglang"):
        problems.append(
            f"sglang is not installed in this environment ({sys.executable}): install {PACKAGE} "
            "where sglang runs"
        )
        return Sglang(["not installed: no module named 'sglang'"])
    if not do_import:
        return Sglang(["import sglang: not tried (--no-import)"])
    try:
        module = importlib.import_module("sglang")
    except (Exception, SystemExit) as exc:  # a broken sglang (or its dependencies) must still give a report
        problems.append(f"import sglang fails here, so no sglang process can start: {cause(exc)}")
        return Sglang([f"import sglang: fails: {cause(exc)}"], failure=cause(exc))
    return Sglang([f"import sglang: ok ({os.path.dirname(getattr(module, '__file__', None) or '?')})"], imported=True)


def _versions() -> tuple[str, list[str]]:
    sglang = distribution_version("sglang")
    lines = [
        f"{PACKAGE} {distribution_version(PACKAGE) or 'not installed (running from a source tree)'}"
        f" (mixins from {os.path.dirname(__file__)})",
        f"python {platform.python_version()} ({sys.executable})",
        f"torch {distribution_version('torch') or 'not installed'}",
    ]
    if sglang is None:
        lines.append("sglang: no installed distribution" + (" (but importable)" if _importable("sglang") else ""))
    else:
        release = sglang.split(".post")[0]
        verified = any(release in t.verified_in for t in TARGETS)
        read = any(release in t.read_in for t in TARGETS)
        evidence = "run in CI" if verified else "wheel read" if read else "newer or older than any row"
        lines.append(f"sglang {sglang} ({evidence})")
    return "versions", lines


def _switch(problems: list[str]) -> tuple[str, list[str]]:
    from mixins.output_dir import refusal_of

    raw = os.environ.get(settings.ENABLE)
    on = settings.trace_enabled()
    if not on:
        problems.append(f"{settings.ENABLE} is {'unset' if raw is None else repr(raw)}: set it to 1")
    where = naming.trace_dir(settings.profiler_dir())
    refused = refusal_of(where)  # what an export would meet there, nothing created
    if refused is not None:
        problems.append(f"no trace can be written: {one_line(refused)}")
    typos = [f"warning: {one_line(settings.typo_message(name, ours))}" for name, ours in settings.misspelt_variables()]
    return "switch", [
        f"{settings.ENABLE}={'(unset)' if raw is None else one_line(raw)}: {'on' if on else 'off'}",
        f"traces go to {one_line(where)}" + ("" if refused is None else " (refused: see below)"),
        *typos,
    ]


def _pth_files() -> list[str]:
    paths = (os.path.join(d, PTH_NAME) for d in dict.fromkeys([*site.getsitepackages(), site.getusersitepackages()]))
    return [path for path in paths if os.path.isfile(path)]


def _allow_list_text() -> str:
    raw = os.environ.get(settings.PLUGINS)
    allow_list = settings.plugin_allow_list()
    if allow_list is None:
        return f"{settings.PLUGINS}={'(unset)' if raw is None else repr(raw)}: every plugin loads"
    if not allow_list:
        return f"{settings.PLUGINS}={raw!r}: an allow-list naming no plugin (sglang loads none)"
    return f"{settings.PLUGINS}={raw!r}: allow-list {', '.join(sorted(allow_list))}"


def _routes(problems: list[str]) -> tuple[str, list[str]]:
    entry_point = next((ep.value for ep in metadata.entry_points(group=PLUGIN_GROUP, name=PLUGIN_NAME)), None)
    loader = _locate(PLUGIN_LOADER)
    allowed = settings.plugin_allowed()
    pth = _pth_files()
    hook_raw = os.environ.get(settings.STARTUP_HOOK)
    lines = [
        f"plugin entry point {PLUGIN_NAME!r} in {PLUGIN_GROUP}: {entry_point or 'not registered'}; "
        f"sglang's plugin loader: {'present (sglang >= 0.5.13)' if loader else 'absent'}",
        f"{_allow_list_text()}: {'allows' if allowed else 'excludes'} {PLUGIN_NAME}",
        f"start-up hook: {', '.join(pth) if pth else f'no {PTH_NAME} in site-packages'}",
        f"{settings.STARTUP_HOOK}={'(unset)' if hook_raw is None else one_line(hook_raw)}: "
        f"{'on' if settings.env_bool(settings.STARTUP_HOOK, True) else 'off'}",
    ]
    owner = ownership_problem()  # a note, not a problem: a source checkout on sys.path (tests, development)
    if owner is not None:  # shadows the install here; a shadowing foreign package would not even run doctor
        lines.append(f"in this interpreter the start-up hook would stand down: {owner}")
    live = [name for name, on in (("plugin", bool(entry_point) and loader and allowed),
                                  (".pth", bool(pth) and settings.startup_hook_allowed())) if on]
    lines.append(f"live routes: {', '.join(live) or 'none'}")
    if not live:
        problems.append("no activation route is live: sglang's processes will not be patched")
    return "activation routes", lines


def _rows(problems: list[str], sglang: Sglang) -> tuple[str, list[str]]:
    from mixins import sglang_patch

    lines = []
    installed_here = sglang_patch.PATCH.installed
    lines.append(
        "patch installed in this process at start-up" if installed_here else "patch installed for this report only"
    )
    if sglang.failure is not None:
        lines.append("runner modules not imported: import sglang fails (above)")
    if not installed_here:
        sglang_patch.PATCH.install()
    failed: dict[str, str] = {}
    try:
        if sglang.imported:
            failed = _import_modules()
        status = sglang_patch.PATCH.status()
    finally:
        if not installed_here:
            sglang_patch.PATCH.uninstall()
    for row in status:
        module = row.target.module
        if module in failed and row.target.optional and failed[module].startswith("ModuleNotFoundError"):
            lines.append(f"{row.target.qualname}: skipped (needs {row.target.optional}: {failed[module]})")
        elif module in failed:
            lines.append(f"{row.target.qualname}: cannot tell ({module} failed to import: {failed[module]})")
        elif sglang.imported and row.state is sglang_patch.State.WAITING and module not in sys.modules:
            lines.append(f"{row.target.qualname}: skipped (no module {module} in this sglang)")
        else:
            lines.append(str(row))
    if sglang.imported and not any(row.state is sglang_patch.State.APPLIED for row in status):
        problems.append("no patch row applies to this sglang")
    return f"patch rows ({len(TARGETS)})", lines


def import_cleanly(name: str) -> Any:
    """``importlib.import_module(name)``; when it fails, the submodules its failed parent packages left in
    ``sys.modules`` are dropped too (Python drops the failed package, not what its ``__init__`` imported), so
    a later import of a sibling fails the same way instead of with ``KeyError: '<package>'``."""
    forget_orphans(name.partition(".")[0])
    try:
        return importlib.import_module(name)
    except BaseException:
        forget_orphans(name.partition(".")[0])
        raise


def forget_orphans(top: str) -> None:
    """Drop the submodules of ``top`` whose parent package is no longer in ``sys.modules`` (a package whose
    ``__init__`` failed after importing them, by an import or a ``find_spec`` that did not clean up): a
    namespace package among them makes every later import below it fail with ``KeyError: '<parent>'``."""
    for module in sorted((m for m in sys.modules if m.startswith(top + ".")), key=lambda m: m.count(".")):
        if module.rpartition(".")[0] not in sys.modules:
            del sys.modules[module]


def _import_modules() -> dict[str, str]:
    """Import every target module this sglang has; the ones that exist but fail, with the error."""
    failed = {}
    for name in modules():
        try:
            import_cleanly(name)
        except ModuleNotFoundError as exc:
            if exc.name != name and not name.startswith(f"{exc.name}."):  # a dependency, not the module
                failed[name] = cause(exc)
        except (Exception, SystemExit) as exc:  # a broken sglang install must still give a report
            failed[name] = cause(exc)
    return failed


def _importable(name: str) -> bool:
    """A top-level module ``name`` exists (``find_spec`` of a top-level name imports nothing)."""
    try:
        return importlib.util.find_spec(name) is not None
    except (ImportError, ValueError):
        return False


def _locate(name: str) -> bool:
    """Module ``name`` exists, looked up on disk level by level without importing its packages:
    ``find_spec("a.b")`` imports ``a``, which raises in a broken sglang. Each level asks the finders of its
    parent's directories, as importlib does: its ``PathFinder`` cannot look into a namespace package whose
    parent is not imported, and sglang's ``srt`` is one (no ``__init__.py``)."""
    top, *rest = name.split(".")
    spec = importlib.util.find_spec(top) if _importable(top) else None
    if spec is None:
        return False
    locations, fullname = list(spec.submodule_search_locations or ()), top
    for part in rest:
        fullname = f"{fullname}.{part}"
        finders = [pkgutil.get_importer(path) for path in locations]
        found = [s for s in (f.find_spec(fullname) for f in finders if f is not None) if s is not None]
        if not found:
            return False
        # importlib's rule: the first regular package or module, else one namespace package of every portion
        regular = next((s for s in found if s.loader is not None), None)
        locations = [path for s in ([regular] if regular else found) for path in s.submodule_search_locations or ()]
    return True


if __name__ == "__main__":
    sys.exit(main())
