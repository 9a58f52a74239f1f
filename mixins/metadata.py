"""The ``capture_trace`` object written at the top of every trace, so a trace identifies itself
without trusting its file name (renamed, copied, collected from many hosts)."""

from __future__ import annotations

import datetime
import json
import os
import re
import socket
import sys
from collections.abc import Iterable
from functools import cache
from numbers import Integral
from typing import Any

from _sglang_capture_trace_switches import DISTRIBUTION as PACKAGE
from mixins.naming import Ranks, discover_sizes


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
    runner_name: str, ranks: Ranks, capture_index: int, runner: object = None, *, tp_size: int | None = None
) -> dict[str, Any]:
    cls = type(runner) if runner is not None else None
    torch = sys.modules.get("torch")
    sizes = discover_sizes(runner, ranks, tp_size=tp_size)
    return {
        "runner": runner_name,
        "runner_class": f"{cls.__module__}.{cls.__qualname__}" if cls is not None else None,
        "tp_rank": ranks.tp_rank,
        "pp_rank": ranks.pp_rank,
        "pp_size": ranks.pp_size,
        "dp_rank": ranks.dp_rank,
        "tp_size": sizes.tp_size,
        "dp_size": sizes.dp_size,
        "world_size": sizes.world_size,
        "rank_source": ranks.source,
        "size_source": sizes.source,
        "capture_index": capture_index,
        "capture_bs": _batch_sizes(runner) if runner is not None else None,
        "sglang_version": distribution_version("sglang"),
        "torch_version": getattr(torch, "__version__", None),
        "package_version": distribution_version(PACKAGE),
        "pid": os.getpid(),
        "hostname": socket.gethostname(),
        "device": _device_name(),
        "time_utc": datetime.datetime.now(datetime.timezone.utc).isoformat(timespec="seconds"),
        "memory_snapshot": _memory_snapshot(runner),
    }


def _memory_snapshot(runner: object) -> str | None:
    """The file name of the memory snapshot saved beside this trace during the runner's hook, if any."""
    module = sys.modules.get("mixins.memory_snapshot")  # loaded only when a hook saved one
    return module.saved_for(runner) if module is not None and runner is not None else None


# -- the top of the file: our metadata, and distributedInfo when Kineto wrote none ---------------------

KINETO_DISTRIBUTED_KEY = b'"distributedInfo"'


def distributed_info(metadata: dict[str, Any]) -> dict[str, Any] | None:
    """HTA's ``distributedInfo`` from our ranks: the rank in the (tp x pp) world, as sglang numbers it, which
    HTA keys traces by (docs/DESIGN.md §1.1); None when it is unknown (pipeline stages, no tp_size)."""
    tp_rank, pp_rank, pp_size, tp_size = (metadata.get(k) for k in ("tp_rank", "pp_rank", "pp_size", "tp_size"))
    if not isinstance(tp_rank, int) or not isinstance(pp_rank, int):
        return None
    if tp_size is None and pp_rank != 0:
        return None
    info: dict[str, Any] = {"rank": tp_rank + pp_rank * (tp_size or 0)}
    if tp_size is not None and isinstance(pp_size, int):
        info["world_size"] = tp_size * pp_size
    info["source"] = PACKAGE  # not Kineto's: no backend, no process groups
    return info


# How every trace we write begins: our metadata is its first key (readers look for it there).
HEADER_PREFIX = b'{"capture_trace": '

_SURROGATE = re.compile("[\ud800-\udfff]")


def _escaped(match: re.Match[str]) -> str:
    code = ord(match[0])
    return f"\\x{code - 0xDC00:02x}" if 0xDC80 <= code <= 0xDCFF else f"\\u{code:04x}"


def trace_text(text: str) -> str:
    """``text`` as valid Unicode, for every string we put into a trace: a file name's undecodable byte
    (Python's surrogate escape, ``\\udcff``) is written ``\\xff``, any other lone surrogate ``\\udXXX``,
    as text. JSON's escape of a lone surrogate is refused by strict readers, our analyzer among them."""
    return _SURROGATE.sub(_escaped, text)


def _trace_texts(value: Any) -> Any:
    if isinstance(value, str):
        return trace_text(value)
    if isinstance(value, dict):
        return {_trace_texts(k): _trace_texts(v) for k, v in value.items()}
    if isinstance(value, (list, tuple)):
        return [_trace_texts(v) for v in value]
    return value


def trace_header(metadata: dict[str, Any], kineto_head: bytes) -> bytes:
    """What goes before Kineto's first key, on one line: ``{"capture_trace": ..., ["distributedInfo": ...,]``,
    the latter unless ``kineto_head`` (Kineto's JSON after its ``{``) has its own (docs/DESIGN.md §1.1)."""
    head = HEADER_PREFIX.decode() + json.dumps(_trace_texts(metadata)) + ", "
    before_events = kineto_head.split(b'"traceEvents"', 1)[0]
    info = None if KINETO_DISTRIBUTED_KEY in before_events else distributed_info(metadata)
    if info is not None:
        head += '"distributedInfo": ' + json.dumps(info) + ", "
    return head.encode()
