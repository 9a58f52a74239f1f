"""Environment switches, read at call time (never at import) so a running server can be re-configured
between captures and tests can flip them per case.

Boolean variables follow sglang's ``EnvBool`` exactly: ``true/1/yes/y`` and ``false/0/no/n``,
case-insensitive, no stripping; anything else logs one warning naming the variable and the accepted
values, and the default is used.
"""

from __future__ import annotations

import logging
import os
import threading
from collections.abc import Callable

logger = logging.getLogger("mixins")

ENABLE = "SGLANG_ENABLE_CUDA_GRAPH_CAPTURE_TRACE"
PROFILER_DIR = "SGLANG_TORCH_PROFILER_DIR"
STRICT = "SGLANG_CAPTURE_TRACE_STRICT"
GZIP_LEVEL = "SGLANG_CAPTURE_TRACE_GZIP_LEVEL"
BACKGROUND = "SGLANG_CAPTURE_TRACE_BACKGROUND"
EXIT_TIMEOUT = "SGLANG_CAPTURE_TRACE_EXIT_TIMEOUT"

_TRUE = ("true", "1", "yes", "y")
_FALSE = ("false", "0", "no", "n")

DEFAULT_PROFILER_DIR = "/tmp"
# Level 6 is gzip's own default: on a 199 MB trace it compresses in ~1.1 s in 1 MiB chunks (off the
# calling thread) to within a few percent of level 9, which takes over 10x longer (DESIGN.md §6).
DEFAULT_GZIP_LEVEL = 6
DEFAULT_EXIT_TIMEOUT_S = 300.0

_warned: set[tuple[str, str]] = set()
_warned_lock = threading.Lock()


def _warn_once(name: str, value: str, accepted: str, default: object) -> None:
    with _warned_lock:
        if (name, value) in _warned:
            return
        _warned.add((name, value))
    logger.warning("Invalid value %r for %s: expected %s; using %r", value, name, accepted, default)


def parse_env_bool(value: str | None, *, name: str, default: bool) -> bool:
    """sglang's EnvBool.parse plus its fallback-to-default on invalid input."""
    if value is None:
        return default
    lowered = value.lower()
    if lowered in _TRUE:
        return True
    if lowered in _FALSE:
        return False
    _warn_once(name, value, "one of " + "/".join(_TRUE + _FALSE) + " (case-insensitive)", default)
    return default


def env_bool(name: str, default: bool = False) -> bool:
    return parse_env_bool(os.environ.get(name), name=name, default=default)


def trace_enabled() -> bool:
    """The opt-in switch, the same variable upstream's native export reads."""
    return env_bool(ENABLE, False)


def strict() -> bool:
    """Raise export errors instead of logging them (for users' CI, never for servers)."""
    return env_bool(STRICT, False)


def background() -> bool:
    """Compress in a background thread (default); off means the hook blocks until the file is final."""
    return env_bool(BACKGROUND, True)


def profiler_dir() -> str:
    return os.environ.get(PROFILER_DIR) or DEFAULT_PROFILER_DIR


def _env_number(name: str, parse: Callable[[str], float], valid: Callable[[float], bool], accepted: str,
                default: float) -> float:
    raw = os.environ.get(name)
    if raw is None:
        return default
    try:
        value = parse(raw)
    except ValueError:
        value = None
    if value is not None and valid(value):
        return value
    _warn_once(name, raw, accepted, default)
    return default


def gzip_level() -> int:
    return int(_env_number(GZIP_LEVEL, int, lambda v: 0 <= v <= 9, "an integer from 0 to 9", DEFAULT_GZIP_LEVEL))


def exit_timeout() -> float:
    """How long interpreter exit waits for background exports still compressing."""
    return _env_number(EXIT_TIMEOUT, float, lambda v: v >= 0, "a number of seconds >= 0", DEFAULT_EXIT_TIMEOUT_S)
