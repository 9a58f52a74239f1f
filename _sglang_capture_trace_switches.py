"""The switches of sglang-capture-trace and who it is: every environment variable it reads, sglang's
``EnvBool`` grammar, the decision "enabled", and the names of the distribution, package and ``.pth``.

A standard-library-only leaf (docs/DESIGN.md §4): the start-up bootstrap decides with it before it may
import ``mixins``, and the package imports it too, so no import circle runs through the bootstrap.
"""

import os

# No __future__, typing or collections.abc import at interpreter start-up: annotations are strings.
TYPE_CHECKING = False
if TYPE_CHECKING:
    from collections.abc import Mapping

ENABLE = "SGLANG_ENABLE_CUDA_GRAPH_CAPTURE_TRACE"
STARTUP_HOOK = "SGLANG_CAPTURE_TRACE_STARTUP_HOOK"
PROFILER_DIR = "SGLANG_TORCH_PROFILER_DIR"  # sglang's own; ours too (where traces go)
STRICT = "SGLANG_CAPTURE_TRACE_STRICT"
GZIP_LEVEL = "SGLANG_CAPTURE_TRACE_GZIP_LEVEL"
BACKGROUND = "SGLANG_CAPTURE_TRACE_BACKGROUND"
EXIT_TIMEOUT = "SGLANG_CAPTURE_TRACE_EXIT_TIMEOUT"
# Every variable we read (mixins.settings reads them by these names): a set name a typo away from one
# of them is most likely meant as it, and without a word the trace silently does not appear.
OUR_VARIABLES = (ENABLE, STARTUP_HOOK, PROFILER_DIR, STRICT, GZIP_LEVEL, BACKGROUND, EXIT_TIMEOUT)
TYPO_DISTANCE = 2
PLUGINS = "SGLANG_PLUGINS"
PLUGIN_NAME = "capture_trace"  # our entry point in sglang's "sglang.srt.plugins" group
DISTRIBUTION = "sglang-capture-trace"
PACKAGE = "mixins"
OWN_PTH = "sglang_capture_trace.pth"  # the start-up hook's line, beside the bootstrap in site-packages

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


def within_distance(a: str, b: str, limit: int = TYPO_DISTANCE) -> bool:
    """Levenshtein distance of ``a`` and ``b`` at most ``limit``: the DP row kept to the diagonal band
    of width ``2 * limit + 1`` and abandoned once every cell in it exceeds ``limit`` (~40x40 names: a
    few microseconds, as the hook runs in every interpreter)."""
    if abs(len(a) - len(b)) > limit:
        return False
    big = limit + 1
    previous = [j if j <= limit else big for j in range(len(b) + 1)]
    for i in range(1, len(a) + 1):
        low, high = max(1, i - limit), min(len(b), i + limit)
        current = [big] * (len(b) + 1)
        current[0] = i if i <= limit else big
        for j in range(low, high + 1):
            cost = 0 if a[i - 1] == b[j - 1] else 1
            current[j] = min(previous[j] + 1, current[j - 1] + 1, previous[j - 1] + cost, big)
        if min(current[max(0, low - 1):high + 1]) > limit:
            return False
        previous = current
    return previous[len(b)] <= limit


def _trigrams(name: str) -> "set[str]":
    return {name[i:i + 3] for i in range(len(name) - 2)}


_OUR_TRIGRAMS = {ours: _trigrams(ours) for ours in OUR_VARIABLES}


def misspelt_variables(environ: "Mapping[str, str] | None" = None) -> "list[tuple[str, str]]":
    """(set name, our variable it is probably meant as) for every ``SGLANG_*`` name in the environment
    within ``TYPO_DISTANCE`` edits of one of ``OUR_VARIABLES`` (names of other programs are never read).

    Cheap enough for every interpreter: most names fail on length; the rest on shared trigrams (each
    edit destroys at most 3 of a name's trigrams, so a near miss keeps all but ``3 * TYPO_DISTANCE``),
    and only a real near miss reaches :func:`within_distance`.
    """
    found = []
    for name in os.environ if environ is None else environ:
        if not name.startswith("SGLANG_") or name in OUR_VARIABLES:
            continue
        grams = _trigrams(name)
        for ours, theirs in _OUR_TRIGRAMS.items():
            if abs(len(name) - len(ours)) > TYPO_DISTANCE:
                continue
            if len(grams & theirs) >= len(theirs) - 3 * TYPO_DISTANCE and within_distance(name, ours):
                found.append((name, ours))
                break
    return found


def typo_message(name: str, ours: str) -> str:
    return f"{name} is set; did you mean {ours}?"


def warn_misspelt_variables() -> None:
    """One WARNING on logger ``mixins`` per misspelt name and process (the start-up hook calls it)."""
    for name, ours in misspelt_variables():
        token = object()
        if _warned.setdefault((name, ""), token) is token:
            import logging

            logging.getLogger("mixins").warning("sglang-capture-trace: %s", typo_message(name, ours))


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
