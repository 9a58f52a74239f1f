"""``capture-trace doctor``: why does (or doesn't) a trace appear in this environment?

The first thing to run when no trace appears. It prints the installed versions, whether the switch is
on, which activation routes are live (sglang's plugin loader with our entry point and the
``SGLANG_PLUGINS`` allow-list, the ``.pth`` start-up hook), and every patch row's state for the
sglang installed here. To know which rows apply it imports sglang's runner modules (``--no-import``
skips that) and, if the start-up hook has not installed the patch in this process, installs it for
the report and uninstalls it again. Exit code 0 when a trace can appear, 1 when something named in
the report stops it.
"""

from __future__ import annotations

import argparse
import importlib
import importlib.util
import os
import platform
import site
import sys
from collections.abc import Iterator
from importlib import metadata
from typing import Any

from _sglang_capture_trace_bootstrap import OWN_PTH as PTH_NAME  # noqa: E402
from _sglang_capture_trace_bootstrap import ownership_problem  # noqa: E402
from mixins import helptext, settings
from mixins.metadata import PACKAGE, distribution_version
from mixins.sglang_targets import PLUGIN_GROUP, PLUGIN_LOADER, PLUGIN_NAME, PLUGINS_ALLOW_LIST, TARGETS, modules

STARTUP_SWITCH = settings.STARTUP_HOOK


def add_command(commands: Any) -> None:
    parser = helptext.add_command(
        commands,
        "doctor",
        "why a trace does or does not appear here: versions, switch, activation routes, patch rows",
        " ".join(__doc__.split("\n\n", 1)[1].split()),
        ["capture-trace doctor", "capture-trace doctor --no-import"],
        exit_codes=("a trace can appear", "something named in the report stops it", "usage error"),
    )
    _add_arguments(parser)


def _add_arguments(parser: argparse.ArgumentParser) -> None:
    parser.add_argument(
        "--no-import", action="store_true", help="do not import sglang's runner modules (rows stay 'waiting')"
    )
    parser.set_defaults(func=run)


def main(argv: list[str] | None = None) -> int:
    """``python -m mixins.doctor``: the same report without the analyzer's dependencies (rich, msgspec)."""
    parser = argparse.ArgumentParser(prog="capture-trace doctor", description=__doc__)
    _add_arguments(parser)
    return run(parser.parse_args(argv))


def run(args: argparse.Namespace) -> int:
    problems: list[str] = []
    sections = (_versions(), _switch(problems), _routes(problems), _rows(problems, not args.no_import))
    for title, lines in sections:
        print(title)
        for line in lines:
            print(f"  {line}")
    for problem in problems:
        print(f"problem: {problem}")
    if not problems:
        print("no problem found: a capture with --enable-profile-cuda-graph writes a trace")
    return 1 if problems else 0


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
    raw = os.environ.get(settings.ENABLE)
    on = settings.trace_enabled()
    if not on:
        problems.append(f"{settings.ENABLE} is {'unset' if raw is None else repr(raw)}: set it to 1")
    return "switch", [
        f"{settings.ENABLE}={raw if raw is not None else '(unset)'}: {'on' if on else 'off'}",
        f"traces go to {os.path.join(settings.profiler_dir(), 'graph_capture_profile')}",
    ]


def _entry_point() -> str | None:
    for entry_point in metadata.entry_points(group=PLUGIN_GROUP):
        if entry_point.name == PLUGIN_NAME:
            return entry_point.value
    return None


def _pth_files() -> Iterator[str]:
    directories = [*site.getsitepackages(), site.getusersitepackages()]
    for directory in dict.fromkeys(directories):
        path = os.path.join(directory, PTH_NAME)
        if os.path.isfile(path):
            yield path


def _routes(problems: list[str]) -> tuple[str, list[str]]:
    lines = []
    entry_point = _entry_point()
    loader = _importable(PLUGIN_LOADER) if _importable("sglang") else False
    allow = [name.strip() for name in os.environ.get(PLUGINS_ALLOW_LIST, "").split(",") if name.strip()]
    allowed = not allow or PLUGIN_NAME in allow
    lines.append(
        f"plugin entry point {PLUGIN_NAME!r} in {PLUGIN_GROUP}: {entry_point or 'not registered'}; "
        f"sglang's plugin loader: {'present (sglang >= 0.5.13)' if loader else 'absent'}"
    )
    lines.append(
        f"{PLUGINS_ALLOW_LIST}={','.join(allow) if allow else '(unset: every plugin loads)'}: "
        f"{'allows' if allowed else 'excludes'} {PLUGIN_NAME}"
    )
    plugin_live = bool(entry_point) and loader and allowed
    pth = list(_pth_files())
    hook_on = settings.env_bool(STARTUP_SWITCH, True)
    lines.append(f"start-up hook: {', '.join(pth) if pth else f'no {PTH_NAME} in site-packages'}")
    lines.append(f"{STARTUP_SWITCH}={os.environ.get(STARTUP_SWITCH, '(unset)')}: {'on' if hook_on else 'off'}")
    owner = ownership_problem()  # a note, not a problem: a source checkout on sys.path (tests, development)
    if owner is not None:  # shadows the install here; a shadowing foreign package would not even run doctor
        lines.append(f"in this interpreter the start-up hook would stand down: {owner}")
    pth_live = bool(pth) and hook_on and allowed
    live = [name for name, on in (("plugin", plugin_live), (".pth", pth_live)) if on]
    lines.append(f"live routes: {', '.join(live) or 'none'}")
    if not (plugin_live or pth_live):
        problems.append("no activation route is live: sglang's processes will not be patched")
    return "activation routes", lines


def _rows(problems: list[str], import_modules: bool) -> tuple[str, list[str]]:
    from mixins import sglang_patch

    lines = []
    installed_here = sglang_patch.is_installed()
    lines.append(
        "patch installed in this process at start-up" if installed_here else "patch installed for this report only"
    )
    if not installed_here:
        sglang_patch.install()
    imported = import_modules and _importable("sglang")
    failed: dict[str, str] = {}
    try:
        if imported:
            failed = _import_modules()
        status = sglang_patch.status()
    finally:
        if not installed_here:
            sglang_patch.uninstall()
    for row in status:
        module = row.target.module
        if module in failed:
            lines.append(f"{row.target.qualname}: cannot tell ({module} failed to import: {failed[module]})")
        elif imported and row.state is sglang_patch.State.WAITING and module not in sys.modules:
            lines.append(f"{row.target.qualname}: skipped (no module {module} in this sglang)")
        else:
            lines.append(str(row))
    if imported and not any(row.state is sglang_patch.State.APPLIED for row in status):
        problems.append("no patch row applies to this sglang")
    return f"patch rows ({len(TARGETS)})", lines


def _import_modules() -> dict[str, str]:
    """Import every target module this sglang has; the ones that exist but fail, with the error."""
    failed = {}
    for name in modules():
        try:
            importlib.import_module(name)
        except ModuleNotFoundError as exc:
            if exc.name != name and not name.startswith(f"{exc.name}."):  # a dependency, not the module
                failed[name] = f"{type(exc).__name__}: {exc}"
        except Exception as exc:  # a broken sglang install must still give a report
            failed[name] = f"{type(exc).__name__}: {exc}"
    return failed


def _importable(name: str) -> bool:
    try:
        return importlib.util.find_spec(name) is not None
    except (ImportError, ValueError):
        return False


if __name__ == "__main__":
    sys.exit(main())
