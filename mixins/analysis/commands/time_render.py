"""``time`` for people: per trace a table with one bar per segment (one scale for every trace shown, so
lengths compare between runners), its top ops, runners side by side."""

from __future__ import annotations

from typing import Any

from rich.text import Text

from mixins.analysis.model.segments import by_size
from mixins.analysis.render import console, safe, who
from mixins.analysis.tables import Cell, Col, Us, print_table, shown, unit_of
from mixins.formats import PHASES

__all__ = ["render_time", "bar", "slowest_cells"]

BAR_WIDTH = 40
_GLYPH = {"warmup": ("░", "yellow"), "capture": ("█", "green"), "instantiate": ("▓", "magenta"), "other": ("·", "")}


def bar(phases: dict[str, float], scale: float, width: int = BAR_WIDTH) -> Text:
    """A stacked bar: ``width`` cells stand for ``scale`` µs; each phase gets its rounded share."""
    text = Text()
    if scale <= 0:
        return text
    done, cum = 0, 0.0
    for p in PHASES:
        cum += phases[p]
        cells = round(width * cum / scale) - done  # cumulative rounding: the bar's length is exact
        glyph, style = _GLYPH[p]
        text.append(glyph * max(0, cells), style=style)
        done += max(0, cells)
    return text


def _cells(row: dict[str, Any]) -> list[Cell]:
    return [Us(row["wall_us"]), *(Us(row["phases"][p], f" ({row['shares'][p]:.0%})") for p in PHASES)]


# the bar goes first at narrow widths: the numbers beside it say the same
_SEGMENT_COLUMNS = (
    Col("segment", "key", fold=8),
    Col("windows", "num", drop=2),
    Col("wall", "num", time="wall"),
    *(Col(p, "num", time="wall") for p in PHASES),
    Col("bar", drop=1),
)
_TOP_COLUMNS = (Col("phase"), Col("op", "key", fold=24), Col("self", "num", time="self"), Col("calls", "num"))


def _segment_rows(t: dict[str, Any], scale: float) -> list[list[Cell]]:
    rows: list[list[Cell]] = [
        [s["label"], str(s["capture_windows"]), *_cells(s), bar(s["phases"], scale)] for s in t["segments"]
    ]
    windows = sum(s["capture_windows"] for s in t["segments"])
    return rows + [[Text("total", style="bold"), str(windows), *_cells(t["totals"]), ""]]


def _side_by_side(traces: list[dict[str, Any]]) -> tuple[list[Col], list[list[Cell]]]:
    """Rows: segment labels (`segments.by_size`: bs, then tokens); columns: traces; the slowest cell of a row marked."""
    labels = by_size(list(dict.fromkeys(s["label"] for t in traces for s in t["segments"])))
    cols = [Col("segment", "key", fold=8)] + [Col(who(t), "num", time="wall") for t in traces]
    table = [
        (label, [next((s["wall_us"] for s in t["segments"] if s["label"] == label), None) for t in traces])
        for label in labels
    ] + [("total", [t["totals"]["wall_us"] for t in traces])]
    unit = unit_of(v for _, values in table for v in values if v is not None)  # as print_table shows them
    rows: list[list[Cell]] = [
        [label, *("-" if v is None else Us(v, " *", "bold") if slow else Us(v)
                  for v, slow in zip(values, slowest_cells(values, unit), strict=True))]
        for label, values in table
    ]
    return cols, rows


def slowest_cells(values: list[float | None], unit: tuple[float, str]) -> list[bool]:
    """Which cells of a row to mark as the slowest: those that read as the largest in ``unit``, and none
    when every cell reads the same (a tie has no slowest)."""
    text = [None if v is None else shown(v, unit) for v in values]
    present = [v for v in values if v is not None]
    if len(present) < 2 or len({t for t in text if t is not None}) == 1:
        return [False] * len(values)
    top = shown(max(present), unit)
    return [t == top for t in text]


def _run_rows(comparison: list[dict[str, Any]], runs: list[str]) -> tuple[list[Col], list[list[Cell]]]:
    """Rows: runner (with its rank) × shape; columns: each run's wall time, then each later run's change."""
    cols = [Col("runner", "key", runner=True), Col("segment", "key", fold=8)]
    cols += [Col(f"run {r}", "num", time="wall") for r in runs]
    cols += [Col(f"change {r}" if len(runs) > 2 else "change", "num") for r in runs[1:]]
    rows: list[list[Cell]] = []
    for row in comparison:
        who_ = row["runner"] + (f" TP {row['tp_rank']}" if row["tp_rank"] is not None else "")
        walls = ["-" if w is None else Us(w) for w in row["wall_us"]]
        changes = ["-" if c is None else f"{c:+.1%}" for c in row["change"][1:]]
        rows.append([who_, row["label"], *walls, *changes])
    return cols, rows


def render_time(doc: dict[str, Any]) -> None:
    """Print ``time``'s result (its ``--json`` document) for a terminal or a pipe; given several runs, the
    runs side by side per runner and shape."""
    traces: list[dict[str, Any]] = doc["traces"]
    comparison: list[dict[str, Any]] | None = doc.get("comparison")
    runs: list[str] | None = doc.get("runs")
    out = console()
    out.print(f"note: {doc['note']}")
    legend = Text("bars: ")
    for p in PHASES:
        glyph, style = _GLYPH[p]
        legend.append(glyph, style=style).append(f" {p}  ")
    legend.rstrip()
    out.print(legend)
    scale = max((s["wall_us"] for t in traces for s in t["segments"]), default=0.0)
    for t in traces:
        run = f"run {safe(t['run'])}  " if runs else ""
        out.print(f"\n{run}[bold]{safe(who(t))}[/bold]  {safe(t['path'])}  (segments: {safe(t['segment_source'])})")
        print_table(out, _SEGMENT_COLUMNS, _segment_rows(t, scale))
        top: list[list[Cell]] = [[r["phase"], r["op"], Us(r["self_us"]), f"{r['count']:,}"] for r in t["totals"]["top"]]
        if top:
            print_table(out, _TOP_COLUMNS, top, title="top CPU ops by self time, over all segments")
    if comparison is not None and runs is not None:  # the same runners in several runs
        out.print()
        cols, rows = _run_rows(comparison, runs)
        title = f"wall time per runner and shape, run {' vs run '.join(runs)} (change against run {runs[0]})"
        print_table(out, cols, rows, title=title, runners=[str(r[0]) for r in rows])
    elif len(traces) > 1:
        out.print()
        cols, rows = _side_by_side(traces)
        print_table(out, cols, rows, title="wall time per segment, runners side by side (* the slowest)",
                    runners=[t.get("runner") or "?" for t in traces])
