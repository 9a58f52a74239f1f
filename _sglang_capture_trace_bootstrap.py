"""Start-up hook of sglang-capture-trace: ``sglang_capture_trace.pth`` runs :func:`run` in every interpreter
of the environment (docs/DESIGN.md §4).

Why a top-level module with a unique name, outside the ``mixins`` package: PyPI has other distributions
with a top-level ``mixins`` (``mixins``, ``django-mixins``); a ``.pth`` line that imports ``mixins.…``
would run their ``__init__`` or fail in every interpreter. This module uses the standard library only,
imports nothing beyond ``os`` until the switch says the hook is wanted, then checks that the importable
``mixins`` is the one this distribution installed (its recorded files) before importing it.

It is also the one home of the switch grammar (sglang's ``EnvBool``) and of the decision "enabled":
``mixins.settings`` imports it from here, so the ``.pth`` and the package can never disagree.
"""

import os

# No __future__, typing or collections.abc import at interpreter start-up: annotations are strings.
TYPE_CHECKING = False
if TYPE_CHECKING:
    from collections.abc import Iterator, Mapping
    from importlib.metadata import Distribution

ENABLE = "SGLANG_ENABLE_CUDA_GRAPH_CAPTURE_TRACE"
STARTUP_HOOK = "SGLANG_CAPTURE_TRACE_STARTUP_HOOK"
PLUGINS = "SGLANG_PLUGINS"
PLUGIN_NAME = "capture_trace"  # our entry point in sglang's "sglang.srt.plugins" group
DISTRIBUTION = "sglang-capture-trace"
PACKAGE = "mixins"
OWN_PTH = "sglang_capture_trace.pth"

TRUE = ("true", "1", "yes", "y")
FALSE = ("false", "0", "no", "n")
BOOL_VALUES = "one of " + "/".join(TRUE + FALSE) + " (case-insensitive)"

# (variable, value) pairs already warned about. dict.setdefault is atomic under the GIL, so no lock
# (threading is not imported at start-up).
_warned: "dict[tuple[str, str], object]" = {}


def warn_once(name: str, value: str, accepted: str, default: object) -> None:
    """One WARNING on logger ``mixins`` per (variable, value) and process."""
    token = object()
    if _warned.setdefault((name, value), token) is not token:
        return
    import logging

    logger = logging.getLogger("mixins")
    logger.warning("Invalid value %r for %s: expected %s; using %r", value, name, accepted, default)


def parse_env_bool(value: "str | None", *, name: str, default: bool) -> bool:
    """sglang's EnvBool.parse (no stripping) plus its fallback to the default, with a warning, on bad input."""
    if value is None:
        return default
    lowered = value.lower()
    if lowered in TRUE:
        return True
    if lowered in FALSE:
        return False
    warn_once(name, value, BOOL_VALUES, default)
    return default


def env_bool(name: str, default: bool, environ: "Mapping[str, str] | None" = None) -> bool:
    return parse_env_bool((os.environ if environ is None else environ).get(name), name=name, default=default)


def trace_enabled(environ: "Mapping[str, str] | None" = None) -> bool:
    """The opt-in switch (the variable upstream's native export reads): the one decision of "enabled"."""
    return env_bool(ENABLE, False, environ)


def plugin_allow_list(environ: "Mapping[str, str] | None" = None) -> "frozenset[str] | None":
    """``SGLANG_PLUGINS`` read as sglang's ``load_plugins`` reads it: None when unset or empty (every plugin
    loads), else the names it allows (a value of only commas and blanks is the empty set: no plugin)."""
    value = (os.environ if environ is None else environ).get(PLUGINS)
    if not value:  # sglang's own test: a set, non-empty value is an allow-list
        return None
    return frozenset(name.strip() for name in value.split(",") if name.strip())


def plugin_allowed(environ: "Mapping[str, str] | None" = None) -> bool:
    """``SGLANG_PLUGINS`` lets ``capture_trace`` load (it gates the start-up hook as well as sglang's loader)."""
    allow_list = plugin_allow_list(environ)
    return allow_list is None or PLUGIN_NAME in allow_list


def startup_hook_allowed(environ: "Mapping[str, str] | None" = None) -> bool:
    """The start-up hook is not switched off and ``SGLANG_PLUGINS`` allows us (the trace switch aside)."""
    return env_bool(STARTUP_HOOK, True, environ) and plugin_allowed(environ)


def startup_hook_wanted(environ: "Mapping[str, str] | None" = None) -> bool:
    """Trace switch on and :func:`startup_hook_allowed`."""
    environ = os.environ if environ is None else environ
    return ENABLE in environ and trace_enabled(environ) and startup_hook_allowed(environ)


# -- is the importable ``mixins`` ours? ----------------------------------------------------------------


def _file_hash(path: str) -> str:
    import base64
    import hashlib

    with open(path, "rb") as handle:
        digest = hashlib.sha256(handle.read()).digest()
    return base64.urlsafe_b64encode(digest).rstrip(b"=").decode("ascii")


def _editable_roots(dist: "Distribution") -> "Iterator[str]":
    """Source directories an editable install put on sys.path (the path lines of its own ``.pth``)."""
    for record in dist.files or ():
        if record.suffix != ".pth" or record.name == OWN_PTH:
            continue
        try:
            text = record.read_text()
        except OSError:
            continue
        for line in text.splitlines():
            if line.strip() and not line.startswith(("#", "import ", "import\t")):
                yield line.strip()


def _is_recorded_init(dist: "Distribution", origin: str) -> bool:
    """``origin`` is the ``mixins/__init__.py`` the wheel installed, with the recorded content."""
    for record in dist.files or ():
        if record.as_posix() != f"{PACKAGE}/__init__.py":
            continue
        if os.path.realpath(str(dist.locate_file(record))) != origin:
            return False
        return record.hash is None or (record.hash.mode == "sha256" and record.hash.value == _file_hash(origin))
    return False


def ownership_problem() -> "str | None":
    """None when the importable ``mixins`` is this distribution's, else why not (nothing is imported)."""
    from importlib import metadata, util

    try:
        dist = metadata.distribution(DISTRIBUTION)
    except metadata.PackageNotFoundError:
        return f"the distribution {DISTRIBUTION} is not installed"
    spec = util.find_spec(PACKAGE)
    if spec is None or not spec.origin:
        return f"no importable {PACKAGE!r} package"
    origin = os.path.realpath(spec.origin)
    if _is_recorded_init(dist, origin):
        return None
    if any(origin == os.path.realpath(os.path.join(root, PACKAGE, "__init__.py")) for root in _editable_roots(dist)):
        return None
    return (
        f"the importable {PACKAGE!r} ({origin}) is not the one {DISTRIBUTION} installed; another distribution "
        f"ships a top-level {PACKAGE!r} (PyPI's 'mixins' and 'django-mixins' do)"
    )


_ran = False


def run() -> None:
    """Install sglang's post-import hooks when wanted; never raises, never imports a foreign ``mixins``."""
    global _ran
    if _ran:
        return
    _ran = True
    try:
        if not startup_hook_wanted():
            return
        problem = ownership_problem()
        if problem is not None:
            import logging

            logging.getLogger("mixins").warning(
                "sglang-capture-trace: start-up hook does nothing: %s. Remove the other package or use a "
                "separate environment.",
                problem,
            )
            return
        from mixins import sglang_patch

        sglang_patch.PATCH.install()
    except Exception:
        import logging

        logging.getLogger("mixins").warning("sglang-capture-trace: start-up hook failed", exc_info=True)
