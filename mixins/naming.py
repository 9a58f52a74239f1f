"""Trace file names, and rank and size discovery: which source wins for each value, and why sizes are recorded
at all, is docs/DESIGN.md §1.1 ("Order of the sources"); we never import sglang ourselves."""

from __future__ import annotations

import os
import re
import sys
import threading
from collections.abc import Callable
from dataclasses import dataclass
from numbers import Integral
from pathlib import Path
from typing import Any

from mixins import settings
from mixins.formats import SUBDIR, TRACE_NAME, TRACE_PREFIX, TRACE_SUFFIX, rank_tag  # noqa: F401 - re-exported
from mixins.sglang_targets import (
    ATTENTION_DP_FLAG,
    ATTENTION_DP_SIZE,
    DP_RANK,
    DP_SIZE,
    PARALLEL_STATE,
    PARALLEL_STATE_GETTERS,
    RUNNER_OWNERS,
    RUNNER_SIZE_OWNERS,
    RUNTIME_CONTEXT,
)

_SAFE_NAME = re.compile(r"[A-Za-z0-9_][A-Za-z0-9_.+-]*")


@dataclass(frozen=True)
class Ranks:
    tp_rank: int
    pp_rank: int
    pp_size: int
    source: str  # where tp_rank came from: explicit, sglang, runner, torch.distributed, default
    dp_rank: int | None = None  # the data-parallel replica, None unless one of several (``replica``)


def validate_runner_name(runner_name: object) -> str:
    """Runner names become file names: refuse anything that could escape the directory or collide."""
    if not isinstance(runner_name, str) or not _SAFE_NAME.fullmatch(runner_name):
        raise ValueError(
            f"runner_name must be a non-empty name of letters, digits, '_', '.', '+', '-' "
            f"not starting with '.' or '-', got {runner_name!r}"
        )
    return runner_name


def _as_rank(value: object, what: str, minimum: int) -> int:
    if isinstance(value, bool) or not isinstance(value, Integral) or int(value) < minimum:
        raise ValueError(f"{what} must be an integer >= {minimum}, got {value!r}")
    return int(value)


def trace_stem(runner_name: str, ranks: Ranks, prefix: str = TRACE_PREFIX) -> str:
    return prefix + runner_name + rank_tag(ranks.tp_rank, ranks.pp_rank, ranks.pp_size, ranks.dp_rank)


def trace_dir(profiler_dir: str) -> Path:
    return Path(profiler_dir) / SUBDIR


def destination(runner_name: object, runner: object = None, *, prefix: str = TRACE_PREFIX,
                **explicit: int | None) -> tuple[str, Ranks, Path, str]:
    """Where a file of ``runner_name`` goes, for every kind we write (traces, memory snapshots): the name
    checked, the ranks discovered (``explicit`` ones win), the output directory and the file's stem, before
    its capture number (``capture_numbers.reserve``)."""
    name = validate_runner_name(runner_name)
    ranks = discover_ranks(runner, **explicit)
    return name, ranks, trace_dir(settings.profiler_dir()), trace_stem(name, ranks, prefix)


# -- rank discovery --------------------------------------------------------------------------------


def _call_quietly(fn: Callable[[], Any]) -> Any:
    try:
        return fn()
    except Exception:  # not initialised in this process, or an API that moved
        return None


def _sglang_value(name: str) -> int | None:
    """From sglang's runtime context, else its older parallel state; a module not imported has no attribute."""
    runtime_context: Any = sys.modules.get(RUNTIME_CONTEXT)
    parallel_state = sys.modules.get(PARALLEL_STATE)
    getter = PARALLEL_STATE_GETTERS.get(name, "")
    for read in (lambda: getattr(runtime_context.get_parallel(), name), lambda: getattr(parallel_state, getter)()):
        value = _call_quietly(read)
        if _is_int(value):
            return int(value)
    return None


def _runner_value(runner: object, name: str, owners: tuple[tuple[str, ...], ...] = RUNNER_OWNERS) -> int | None:
    if runner is None:
        return None
    for path in owners:
        owner: Any = runner
        for attribute in (*path, name):
            owner = _attribute(owner, attribute)
        if _is_int(owner):
            return int(owner)
    return None


def _attribute(owner: object, name: str) -> Any:
    """``getattr`` that survives properties raising (a runner half built, a config not published)."""
    try:
        return getattr(owner, name, None)
    except Exception:
        return None


def _torch_dist(call: str) -> int | None:
    """``torch.distributed.<call>()`` when a process group is initialised (never imports torch)."""
    dist = sys.modules.get("torch.distributed")
    if dist is None:
        return None
    value: Any = _call_quietly(
        lambda: getattr(dist, call)() if dist.is_available() and dist.is_initialized() else None
    )
    return int(value) if _is_int(value) else None


def _is_int(value: object) -> bool:
    return isinstance(value, Integral) and not isinstance(value, bool) and int(value) >= 0


Lookup = tuple[str, Callable[[], "int | None"]]


def _lookups(runner: object, name: str, owners: tuple[tuple[str, ...], ...] = RUNNER_OWNERS) -> list[Lookup]:
    """sglang's value of ``name``, then the runner's: the first two sources of every rank and size."""
    return [("sglang", lambda: _sglang_value(name)), ("runner", lambda: _runner_value(runner, name, owners))]


def _first(lookups: list[Lookup], valid: Callable[[int], bool] = lambda value: True) -> tuple[int | None, str]:
    """The first known and ``valid`` value, and its source's name ("default" and None when there is none)."""
    for source, lookup in lookups:
        value = lookup()
        if value is not None and valid(value):
            return value, source
    return None, "default"


def discover_ranks(
    runner: object = None,
    *,
    tp_rank: int | None = None,
    pp_rank: int | None = None,
    pp_size: int | None = None,
) -> Ranks:
    def pick(name: str, explicit: int | None, default: int, minimum: int) -> tuple[int, str]:
        if explicit is not None:
            return _as_rank(explicit, name, minimum), "explicit"
        world = ("torch.distributed", lambda: _torch_dist("get_rank") if name == "tp_rank" else None)
        value, source = _first([*_lookups(runner, name), world], lambda value: value >= minimum)
        return (default if value is None else value), source

    tp, source = pick("tp_rank", tp_rank, 0, 0)
    pp, _ = pick("pp_rank", pp_rank, 0, 0)
    size, _ = pick("pp_size", pp_size, 1, 1)
    return Ranks(tp_rank=tp, pp_rank=pp, pp_size=size, source=source, dp_rank=replica(runner))


def _dp_size(runner: object) -> int | None:
    return _first(_lookups(runner, DP_SIZE, RUNNER_SIZE_OWNERS))[0] or None


def replica(runner: object) -> int | None:
    """This process's data-parallel replica (``sglang_targets.DP_RANK``), or None when it is not one of
    several: dp_size unknown or 1, the rank unknown or outside it, or DP attention on (then the "DP ranks"
    are attention groups of one TP group, whose TP ranks already tell the files apart)."""
    size = _dp_size(runner)
    if size is None or size < 2:
        return None
    attention, _ = _first(_lookups(runner, ATTENTION_DP_SIZE))
    flag = _attribute(_attribute(_attribute(runner, "model_runner"), "server_args"), ATTENTION_DP_FLAG)
    if (attention or 1) > 1 or flag is True:
        return None
    rank, _ = _first(_lookups(runner, DP_RANK))
    return rank if rank is not None and rank < size else None


@dataclass(frozen=True)
class Sizes:
    """Group sizes of the capturing process; ``None`` = unknown (``check`` then says so)."""

    tp_size: int | None
    dp_size: int | None
    world_size: int | None
    source: str | None  # where tp_size came from: explicit, sglang, runner, torch.distributed, default


def discover_sizes(runner: object, ranks: Ranks, *, tp_size: int | None = None) -> Sizes:
    """tp_size/dp_size/world_size in docs/DESIGN.md §1.1's order; a tp_size not above tp_rank is not believed."""
    world = _torch_dist("get_world_size")
    tp: int | None
    source: str | None
    if tp_size is not None:
        tp, source = _as_rank(tp_size, "tp_size", ranks.tp_rank + 1), "explicit"
    else:
        tp, source = _first([
            *_lookups(runner, "tp_size", RUNNER_SIZE_OWNERS),
            ("torch.distributed", lambda: world if ranks.source == "torch.distributed" else None),
            ("default", lambda: 1 if ranks.source == "default" else None),
        ], lambda value: value > ranks.tp_rank)
        source = None if tp is None else source
    return Sizes(tp_size=tp, dp_size=_dp_size(runner), world_size=world or None, source=source)


# -- per-process numbering ---------------------------------------------------------------------------


class _CaptureNumbers:
    """Second, third ... capture with the same name in one process and directory gets -2, -3 ...

    Only this process's own captures count: a file an earlier process left is replaced, as upstream.
    A number is spent even when its export fails, so the n-th capture is ``-n`` on every rank.
    """

    def __init__(self) -> None:
        self._lock = threading.Lock()
        self._counts: dict[tuple[str, str], int] = {}
        os.register_at_fork(after_in_child=self._forget_the_parents)

    def _forget_the_parents(self) -> None:
        """A forked child numbers its own captures, and a lock a parent thread held at the fork is not its own."""
        self._lock = threading.Lock()
        self._counts.clear()

    def reserve(self, directory: Path, stem: str, suffix: str = TRACE_SUFFIX) -> tuple[Path, int]:
        key = (os.path.realpath(directory), stem)
        with self._lock:
            index = self._counts.get(key, 0) + 1
            self._counts[key] = index
        number = "" if index == 1 else f"-{index}"
        return directory / f"{stem}{number}{suffix}", index


capture_numbers = _CaptureNumbers()
