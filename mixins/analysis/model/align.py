"""Sequence alignment behind the one namer (``windows``) and ``diff``'s changed middles. ``SequenceMatcher``
without autojunk is quadratic at worst: past a limit (product of the lengths) nothing is aligned."""

from __future__ import annotations

from collections.abc import Hashable, Sequence
from difflib import SequenceMatcher

__all__ = ["NAMING_LIMIT", "DIFF_LIMIT", "matching_runs", "opcodes"]

# Warm-up naming: an eager pass and a capture of the same ops align block by block, close to linear.
NAMING_LIMIT = 400_000_000
# diff: the differing middles of two op sequences, which may share nothing (the quadratic case).
DIFF_LIMIT = 4_000_000


def matching_runs(a: Sequence[Hashable], b: Sequence[Hashable]) -> list[tuple[int, int, int]] | None:
    """(i, j, n): ``a[i:i+n] == b[j:j+n]``, the exact runs in order; None when past ``NAMING_LIMIT``."""
    if len(a) * len(b) > NAMING_LIMIT:
        return None
    return [(m.a, m.b, m.size) for m in SequenceMatcher(None, a, b, autojunk=False).get_matching_blocks() if m.size]


def opcodes(a: Sequence[Hashable], b: Sequence[Hashable]) -> list[tuple[str, int, int, int, int]] | None:
    """``SequenceMatcher.get_opcodes`` of ``a`` → ``b``; None when past ``DIFF_LIMIT``."""
    if len(a) * len(b) > DIFF_LIMIT:
        return None
    codes = SequenceMatcher(None, a, b, autojunk=False).get_opcodes()
    return [(str(tag), i1, i2, j1, j2) for tag, i1, i2, j1, j2 in codes]
