"""Read a CUDA memory snapshot (torch's ``_snapshot()`` pickled) without ever unpickling an object: the
unpickler admits no global at all, and torch's layout needs none (docs/DESIGN.md §7.5)."""

from __future__ import annotations

import io
import os
import pickle
from typing import Any

from mixins.analysis.read.errors import TraceError
from mixins.analysis.read.safe_io import open_input

__all__ = ["MAX_SNAPSHOT_BYTES", "load_snapshot"]

#: A real snapshot of a whole capture is tens of MiB; past this it is refused before reading.
MAX_SNAPSHOT_BYTES = 2 << 30


class _Refused(pickle.UnpicklingError):
    """The pickle names something a snapshot never holds."""


class _BuiltinsOnly(pickle.Unpickler):
    """Refuses every global (every opcode naming one goes through ``find_class``) and persistent id."""

    def find_class(self, module: str, name: str) -> Any:
        raise _Refused(
            f"refused to load {module}.{name}: a memory snapshot holds only dicts, lists, strings and numbers"
        )

    def persistent_load(self, pid: Any) -> Any:
        raise _Refused("refused a persistent id: a memory snapshot has none")


def load_snapshot(path: str) -> dict[str, Any]:
    """The snapshot at ``path``: a dict with a ``segments`` list and a ``device_traces`` list of lists.
    Anything else (another pickle, a hostile one, a truncated file) is a TraceError naming the file."""
    fd, st = open_input(path)
    with os.fdopen(fd, "rb") as handle:
        if st.st_size > MAX_SNAPSHOT_BYTES:
            limit = f"{MAX_SNAPSHOT_BYTES:,}-byte limit for a memory snapshot"
            raise TraceError(path, f"{st.st_size:,} bytes: over the {limit}")
        data = handle.read(MAX_SNAPSHOT_BYTES + 1)
    try:
        snapshot = _BuiltinsOnly(io.BytesIO(data)).load()
    except _Refused as exc:
        raise TraceError(path, f"not a memory snapshot: {exc}") from None
    except pickle.UnpicklingError as exc:
        raise TraceError(path, f"not a memory snapshot (unreadable pickle: {exc})") from None
    except (EOFError, ValueError, TypeError, KeyError, IndexError, AttributeError, OverflowError, MemoryError,
            RecursionError) as exc:
        raise TraceError(path, f"not a memory snapshot (unreadable pickle: {type(exc).__name__})") from None
    if not (
        isinstance(snapshot, dict)
        and isinstance(snapshot.get("segments"), list)
        and isinstance(snapshot.get("device_traces", []), list)
        and all(isinstance(t, list) for t in snapshot.get("device_traces", []))
    ):
        raise TraceError(path, "not a memory snapshot (expected a dict with 'segments' and 'device_traces' lists)")
    return snapshot
