"""STAND-INS for ``torch.cuda.memory._snapshot()``, which needs a CUDA device (there is none here).

Built in the layout torch documents in ``_snapshot``'s docstring (torch 2.13 ``torch/cuda/memory.py``:
``Snapshot{segments, device_traces}``, ``Segment``, ``Block``, ``Frame``, ``TraceEntry``) plus the
``time_us`` (Unix µs) every real trace entry carries: dicts, lists, tuples, strings and numbers only, as
torch's own ``_dump_snapshot`` pickles it. ``scripts/gpu_check.sh`` checks the real thing on a GPU.
Imported as ``tests.memory_snapshots`` by tests/core, tests/analysis and tests/sglang (stdlib only).
"""

from __future__ import annotations

import itertools
import time
from collections.abc import Callable, Iterable
from typing import Any

MiB = 1 << 20
GRAPH_POOL = (1, 0)  # a CUDA graph's private pool id (the caching allocator's own is (0, 0))


def frame(filename: str, line: int, name: str) -> dict[str, Any]:
    return {"filename": filename, "line": line, "name": name}


def stand_in_snapshot(
    allocations: Iterable[tuple[float, int, tuple[int, int], str]] = (), *, device_traces: bool = True
) -> dict[str, Any]:
    """A snapshot whose allocations are (time_us, size, pool id, allocation site "file.py:line name"): one
    segment per allocation, its one block active, and one ``alloc`` trace entry each."""
    segments, trace = [], []
    address = itertools.count(0x7F0000000000, 0x10000000)
    for time_us, size, pool, site in allocations:
        filename, rest = site.split(":", 1)
        line, name = rest.split(" ", 1)
        frames = [frame("??", 0, "c10::cuda::CUDACachingAllocator::malloc"), frame(filename, int(line), name)]
        addr = next(address)
        segments.append({
            "address": addr, "total_size": size, "stream": 0, "segment_type": "large",
            "segment_pool_id": pool, "allocated_size": size, "active_size": size, "requested_size": size,
            "device": 0, "is_expandable": False, "frames": frames,
            "blocks": [{"address": addr, "size": size, "requested_size": size, "state": "active_allocated",
                        "frames": frames}],
        })
        trace.append({"action": "segment_alloc", "addr": addr, "size": size, "stream": 0, "frames": frames,
                      "time_us": int(time_us), "pool_id": pool, "device_free": 0})
        trace.append({"action": "alloc", "addr": addr, "size": size, "stream": 0, "frames": frames,
                      "time_us": int(time_us), "pool_id": pool, "device_free": 0})
    return {"segments": segments, "device_traces": [trace] if device_traces else [],
            "allocator_settings": {"PYTORCH_CUDA_ALLOC_CONF": "", "max_split_size": -1,
                                   "garbage_collection_threshold": 0.0, "expandable_segments": False,
                                   "pinned_num_register_threads": 1, "release_lock_on_cudamalloc": False,
                                   "pinned_use_host_register": False, "roundup_power2_divisions": {}}}


def recording_snapshot() -> Callable[[], dict[str, Any]]:
    """A stand-in ``_snapshot`` for a hook under test: one graph-pool allocation per call, at the time of
    the call (so it falls inside whatever capture range ran last)."""

    def _snapshot(*args: Any, **kwargs: Any) -> dict[str, Any]:
        now = time.time() * 1e6
        return stand_in_snapshot([(now - 10, 2 * MiB, GRAPH_POOL, "model.py:12 forward")])

    return _snapshot
