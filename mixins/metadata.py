"""The ``capture_trace`` object written at the top of every trace, so a trace identifies itself
without trusting its file name (renamed, copied, collected from many hosts)."""

from __future__ import annotations

import datetime
import os
import socket
import sys
from collections.abc import Iterable
from functools import cache
from numbers import Integral
from typing import Any

from mixins.naming import Ranks

PACKAGE = "sglang-capture-trace"


@cache
def distribution_version(name: str) -> str | None:
    from importlib import metadata as importlib_metadata  # only when a trace is really written

    try:
        return importlib_metadata.version(name)
    except importlib_metadata.PackageNotFoundError:
        return None


def _device_name() -> str:
    torch = sys.modules.get("torch")
    if torch is None:
        return "cpu"
    try:  # never initialise CUDA just to name it
        if torch.cuda.is_available() and torch.cuda.is_initialized():
            return str(torch.cuda.get_device_name(torch.cuda.current_device()))
    except Exception:
        pass
    return "cpu"


def _batch_sizes(runner: object) -> list[int] | None:
    values = getattr(runner, "capture_bs", None)
    if values is None or isinstance(values, (str, bytes)) or not isinstance(values, Iterable):
        return None
    try:
        sizes = list(values)
    except Exception:
        return None
    if all(isinstance(v, Integral) and not isinstance(v, bool) for v in sizes):
        return [int(v) for v in sizes]
    return None


def build_metadata(
    runner_name: str, ranks: Ranks, capture_index: int, runner: object = None
) -> dict[str, Any]:
    cls = type(runner) if runner is not None else None
    torch = sys.modules.get("torch")
    return {
        "runner": runner_name,
        "runner_class": f"{cls.__module__}.{cls.__qualname__}" if cls is not None else None,
        "tp_rank": ranks.tp_rank,
        "pp_rank": ranks.pp_rank,
        "pp_size": ranks.pp_size,
        "rank_source": ranks.source,
        "capture_index": capture_index,
        "capture_bs": _batch_sizes(runner) if runner is not None else None,
        "sglang_version": distribution_version("sglang"),
        "torch_version": getattr(torch, "__version__", None),
        "package_version": distribution_version(PACKAGE),
        "pid": os.getpid(),
        "hostname": socket.gethostname(),
        "device": _device_name(),
        "time_utc": datetime.datetime.now(datetime.timezone.utc).isoformat(timespec="seconds"),
    }
