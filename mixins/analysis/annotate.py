"""``attribute --annotate``: the replay trace again, each attributed graph kernel with ``capture_*`` args.

Why the whole document is loaded here (and only here): the output must be the replay unchanged
except for the added args, so every key and event is carried over; the replay profiles this is
meant for are small (a few steps). The file is written beside its destination under a dot name and
renamed into place, so a failure never leaves a half-written trace.
"""

from __future__ import annotations

import gzip
import json
import os
import tempfile
from typing import Any

from mixins.analysis.reader import TraceError

__all__ = ["write_annotated", "write_atomic"]

_DEVICE_CATS = ("kernel", "gpu_memcpy", "gpu_memset")


def _load(path: str) -> dict[str, Any]:
    try:
        with open(path, "rb") as f:
            head = f.read(2)
            f.seek(0)
            raw = gzip.decompress(f.read()) if head == b"\x1f\x8b" else f.read()
        doc = json.loads(raw)
    except (OSError, ValueError, EOFError) as exc:
        raise TraceError(path, f"cannot re-read for --annotate: {exc}") from None
    if not isinstance(doc, dict) or not isinstance(doc.get("traceEvents"), list):
        raise TraceError(path, "cannot re-read for --annotate: no traceEvents list")
    return doc


def _annotate(doc: dict[str, Any], annotations: dict[tuple[int, float, str], dict[str, Any]]) -> int:
    done = 0
    for ev in doc["traceEvents"]:
        if not isinstance(ev, dict) or ev.get("cat") not in _DEVICE_CATS:
            continue
        args = ev.get("args")
        if not isinstance(args, dict):
            continue
        got = annotations.get((args.get("correlation"), ev.get("ts"), ev.get("name") or ""))  # type: ignore[arg-type]
        if got is not None:
            args.update(got)
            done += 1
    return done


def write_atomic(out: str, data: bytes) -> None:
    """Write ``data`` to ``out`` through a dot-named temp file beside it and a rename: all or nothing."""
    directory = os.path.dirname(os.path.abspath(out))
    tmp = None
    try:
        fd, tmp = tempfile.mkstemp(prefix=f".{os.path.basename(out)}.", suffix=".tmp", dir=directory)
        mask = os.umask(0)
        os.umask(mask)
        os.fchmod(fd, 0o666 & ~mask)  # as an ordinary new file, not mkstemp's 0600
        with os.fdopen(fd, "wb") as f:
            f.write(data)
        os.replace(tmp, out)
        tmp = None
    except OSError as exc:
        raise TraceError(out, f"cannot write: {exc.strerror or exc}") from None
    finally:
        if tmp is not None:
            try:
                os.unlink(tmp)
            except OSError:
                pass


def write_annotated(replay: str, out: str, annotations: dict[tuple[int, float, str], dict[str, Any]]) -> int:
    """Write ``replay`` with ``annotations`` added to ``out`` (gzip if it ends in .gz); how many kernels gained args."""
    doc = _load(replay)
    done = _annotate(doc, annotations)
    data = json.dumps(doc).encode()
    write_atomic(out, gzip.compress(data, 6) if out.endswith(".gz") else data)
    return done
