"""What ``attribute`` says beyond its op rows, computed once from the :class:`Attribution`: the
``--group-by`` views and the low-coverage warning (docs/DESIGN.md §7, "Attribution" step 7)."""

from __future__ import annotations

from typing import Any

from mixins.analysis.commands.attribute_match import Attribution, Row
from mixins.analysis.serialise import json_value

__all__ = ["GROUP_BY", "GROUP_KEYS", "group_rows", "WARN_BELOW", "low_coverage"]

# view -> the --json fields of an op row that identify a group (op: every row is its own group)
GROUP_KEYS: dict[str, tuple[str, ...]] = {
    "op": ("name", "module", "input_dims", "input_types", "source", "runner", "segment"),
    "module": ("module",),
    "shape": ("name", "input_dims", "input_types"),  # TraceLens's by-shape summary: op + dims + types
    "segment": ("source", "runner", "segment"),
}
GROUP_BY = tuple(GROUP_KEYS)


def group_rows(res: Attribution, by: str) -> list[dict[str, Any]]:
    """The ``--group-by`` rows: the op rows themselves (``op``), or op rows summed per ``GROUP_KEYS[by]``
    (``ops``: how many each holds)."""
    if by == "op":
        return [r.as_json() for r in res.rows]
    groups: dict[tuple[Any, ...], list[Row]] = {}
    for r in res.rows:  # a Row's attributes are named as its --json fields
        groups.setdefault(tuple(getattr(r, f) for f in GROUP_KEYS[by]), []).append(r)
    out = []
    for key, rows in groups.items():
        us, count = sum(r.gpu_time_us for r in rows), sum(r.count for r in rows)
        row: dict[str, Any] = {f: json_value(v) if f in ("input_dims", "input_types") else v
                               for f, v in zip(GROUP_KEYS[by], key, strict=True)}
        row.update(ops=len(rows), kernels=sum(r.kernels for r in rows), count=count, gpu_time_us=round(us, 3),
                   mean_us=round(us / count, 3) if count else 0.0)
        out.append((-us, repr(key), row))
    return [row for *_, row in sorted(out, key=lambda x: x[:2])]


WARN_BELOW = 0.5  # graph kernels or GPU time attributed below this share: say so, with the likely cause

# a reason attribute_match gives (a substring of it) -> what it most likely means
_CAUSES = (
    ("no capture windows", "the captures hold no CUDA-graph capture window: wrong capture (a trace of "
     "serving, or one profiled without graph capture)?"),
    ("is in no capture window", "the replayed kernels are in none of the captures' windows: wrong capture "
     "or runner (another model, runner or build)?"),
    ("not found in order", "the replayed kernel sequences are not the captured ones: wrong capture or runner "
     "(another model, runner or build)?"),
    ("capture window has", "the replayed graphs are longer than any captured one: wrong capture or runner?"),
    ("no kernel name", "the captured launches have no kernel names: a capture taken without its eager "
     "warm-up pass (which names them)?"),
    ("more than one way", "the replayed graphs run fewer kernels than their capture windows launched, and "
     "which launches they skipped is not clear: a capture of another build?"),
    ("ambiguous", "several capture windows verify each graph: give only the replayed runner's captures, or "
     "mark the replay's iterations with bs=N / runner=NAME ranges"),
    ("work limit", "verification stopped at its work limit: give only the replayed runner's captures"),
    ("no launching runtime call", "device work without its launching runtime call: was the replay "
     "profiled with CPU activity (ProfilerActivity.CPU)?"),
    ("outside any cpu_op", "kernels launched outside any cpu_op: was the replay profiled with CPU ops?"),
)


def low_coverage(res: Attribution, capture_rank: int | None) -> str | None:
    """The warning for a result with under half its graph kernels or GPU time attributed, naming the
    likely cause; None when coverage is fine. ``capture_rank``: the captures' rank."""
    if not res.graph_kernels:  # graph launches without their kernels (``roles``: a replay has launches)
        return (
            f"{res.replay}: no graph kernel recorded for its graph launches: nothing of a CUDA graph to "
            "attribute (was the replay profiled with CUDA activity?)"
        )
    graph = res.graph_kernels_attributed / res.graph_kernels
    share = res.share
    if graph >= WARN_BELOW and share >= WARN_BELOW:
        return None
    said = f"{res.graph_kernels_attributed:,}/{res.graph_kernels:,} graph kernels and "
    head = f"{res.replay}: only {said}{100 * share:.1f} % of GPU time attributed"
    if res.gpu_time_us <= 0:
        return f"{res.replay}: no GPU time to attribute: was the replay profiled with CUDA activity?"
    if res.rank is not None and capture_rank is not None and res.rank != capture_rank:
        return f"{head}: the replay is rank {res.rank}, the captures rank {capture_rank}: wrong rank?"
    missed = [u for u in res.unattributed if graph >= WARN_BELOW or u.source == "graph"] or res.unattributed
    if not missed:
        return head
    top = max(missed, key=lambda u: u.gpu_time_us)
    cause = next((c for s, c in _CAUSES if s in top.reason), f"most unattributed work: {top.reason}")
    return f"{head}: {cause}"
