"""Environment switches, read at call time (never at import), standard library only. sglang's ``EnvBool``
grammar and the decision "enabled" live in ``_sglang_capture_trace_switches``, which the start-up hook
reads before ``mixins`` may be imported; re-exported here so both share one definition (docs/DESIGN.md §4).
"""

from __future__ import annotations

import math
import os
import re
from collections.abc import Callable

from _sglang_capture_trace_switches import (
    BACKGROUND,
    ENABLE,
    EXIT_TIMEOUT,
    GZIP_LEVEL,
    OUR_VARIABLES,
    PLUGIN_NAME,
    PLUGINS,
    PROFILER_DIR,
    STARTUP_HOOK,
    STRICT,
    env_bool,
    misspelt_variables,
    parse_env_bool,
    plugin_allow_list,
    plugin_allowed,
    startup_hook_allowed,
    startup_hook_wanted,
    trace_enabled,
    typo_message,
    warn_once,
)

__all__ = [
    "ENABLE", "PLUGINS", "PLUGIN_NAME", "STARTUP_HOOK", "env_bool", "parse_env_bool", "plugin_allow_list",
    "plugin_allowed", "startup_hook_allowed", "startup_hook_wanted", "trace_enabled",
    "warn_once", "strict", "background", "profiler_dir", "gzip_level", "exit_timeout", "misspelt_variables",
    "typo_message", "OUR_VARIABLES", "PROFILER_DIR", "STRICT", "GZIP_LEVEL", "BACKGROUND", "EXIT_TIMEOUT",
]

DEFAULT_PROFILER_DIR = "/tmp"
# Level 6 is gzip's own default: on a 199 MB trace it compresses in ~1.1 s in 1 MiB chunks (off the
# calling thread) to within a few percent of level 9, which takes over 10x longer (docs/DESIGN.md §8).
DEFAULT_GZIP_LEVEL = 6
DEFAULT_EXIT_TIMEOUT_S = 300.0


def strict() -> bool:
    """Raise export errors instead of logging them (for users' CI, never for servers)."""
    return env_bool(STRICT, False)


def background() -> bool:
    """Compress in a background thread (default); off means the hook blocks until the file is final."""
    return env_bool(BACKGROUND, True)


def profiler_dir() -> str:
    return os.environ.get(PROFILER_DIR) or DEFAULT_PROFILER_DIR


MAX_EXIT_TIMEOUT_S = 86400.0  # one day: past it a server's exit is hung, not waiting
# Plain ASCII numbers only: no sign, no "_", no spaces, no "inf"/"nan", no other scripts' digits.
_INTEGER = re.compile(r"[0-9]{1,4}")
_DECIMAL = re.compile(r"(?:[0-9]{1,12}(?:\.[0-9]{0,9})?|\.[0-9]{1,9})(?:[eE][+-]?[0-9]{1,3})?")


def _env_number(name: str, pattern: re.Pattern[str], parse: Callable[[str], float], valid: Callable[[float], bool],
                accepted: str, default: float) -> float:
    """A numeric setting: written as ``pattern``, finite and ``valid``; otherwise one WARNING per (variable,
    value) and process, and the default (docs/DESIGN.md §2)."""
    raw = os.environ.get(name)
    if raw is None:
        return default
    value = parse(raw) if pattern.fullmatch(raw) else None
    if value is not None and math.isfinite(value) and valid(value):
        return value
    warn_once(name, raw, accepted, default)
    return default


def gzip_level() -> int:
    return int(_env_number(GZIP_LEVEL, _INTEGER, int, lambda v: 0 <= v <= 9, "an integer from 0 to 9",
                           DEFAULT_GZIP_LEVEL))


def exit_timeout() -> float:
    """How long interpreter exit waits for background exports still compressing (0: not at all)."""
    return _env_number(EXIT_TIMEOUT, _DECIMAL, float, lambda v: 0 <= v <= MAX_EXIT_TIMEOUT_S,
                       f"a number of seconds from 0 to {MAX_EXIT_TIMEOUT_S:.0f}", DEFAULT_EXIT_TIMEOUT_S)
