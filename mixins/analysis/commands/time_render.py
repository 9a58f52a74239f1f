"""``time`` for people: per trace a table with one bar per segment, its top ops, runners side by side.

Why bars: with dozens of batch sizes and three runners, the slow runner and its slow sizes are seen
faster than read. Bars share one scale across every trace shown, so lengths compare between runners.
"""

from __future__ import annotations

from typing import Any

from rich.table import Table
from rich.text import Text

from mixins.analysis.commands.time import NOTE, PHASES
from mixins.analysis.model.segments import by_size
from mixins.analysis.render import console, safe, who

__all__ = ["render_time", "bar"]

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


def _ms(us: float) -> str:
    ms = us / 1000
    return f"{ms:,.1f}" if ms >= 10 or ms == 0 else f"{ms:.2f}"


def _cells(row: dict[str, Any]) -> list[str]:
    return [_ms(row["wall_us"])] + [f"{_ms(row['phases'][p])} ({row['shares'][p]:.0%})" for p in PHASES]


def _segment_table(t: dict[str, Any], scale: float) -> Table:
    table = Table(title_justify="left")
    table.add_column("segment")
    table.add_column("windows", justify="right")
    table.add_column("wall ms", justify="right")
    for p in PHASES:
        table.add_column(f"{p} ms", justify="right")
    table.add_column("")
    for s in t["segments"]:
        table.add_row(safe(s["label"]), str(s["capture_windows"]), *_cells(s), bar(s["phases"], scale))
    tot = t["totals"]
    windows = sum(s["capture_windows"] for s in t["segments"])
    table.add_row("[bold]total[/bold]", str(windows), *_cells(tot), "")
    return table


def _top_table(t: dict[str, Any]) -> Table | None:
    rows = t["totals"]["top"]
    if not rows:
        return None
    table = Table(title="top CPU ops by self time, over all segments", title_justify="left")
    for col, just in (("phase", "left"), ("op", "left"), ("self ms", "right"), ("calls", "right")):
        table.add_column(col, justify=just)  # type: ignore[arg-type]
    for r in rows:
        name = r["op"] if len(r["op"]) <= 80 else r["op"][:77] + "..."
        table.add_row(r["phase"], safe(name), f"{r['self_us'] / 1000:,.2f}", f"{r['count']:,}")
    return table


def _side_by_side(traces: list[dict[str, Any]]) -> Table:
    """Rows: segment labels (`segments.by_size`: bs, then tokens); columns: traces; the slowest cell of a row marked."""
    labels: list[str] = []
    for t in traces:
        labels += [s["label"] for s in t["segments"] if s["label"] not in labels]
    labels = by_size(labels)  # decode (bs=) and prefill (tokens=) runners: each unit's rows together
    table = Table(title="wall ms per segment, runners side by side (* the slowest)", title_justify="left")
    table.add_column("segment")
    for t in traces:
        table.add_column(safe(who(t)), justify="right")
    for label in labels + ["total"]:
        values = [
            t["totals"]["wall_us"] if label == "total"
            else next((s["wall_us"] for s in t["segments"] if s["label"] == label), None)
            for t in traces
        ]
        worst = max((v for v in values if v is not None), default=None)
        table.add_row(
            safe(label),
            *(
                "-" if v is None else f"[bold]{_ms(v)} *[/bold]" if v == worst and len(traces) > 1 else _ms(v)
                for v in values
            ),
        )
    return table


def render_time(traces: list[dict[str, Any]]) -> None:
    """Print ``time``'s result (the ``--json`` objects) for a terminal or a pipe."""
    out = console()
    out.print(f"note: {NOTE}")
    legend = Text("bars: ")
    for p in PHASES:
        glyph, style = _GLYPH[p]
        legend.append(glyph, style=style).append(f" {p}  ")
    out.print(legend)
    scale = max((s["wall_us"] for t in traces for s in t["segments"]), default=0.0)
    for t in traces:
        out.print(f"\n[bold]{safe(who(t))}[/bold]  {safe(t['path'])}  (segments: {safe(t['segment_source'])})")
        out.print(_segment_table(t, scale))
        top = _top_table(t)
        if top is not None:
            out.print(top)
    if len(traces) > 1:
        out.print()
        out.print(_side_by_side(traces))
