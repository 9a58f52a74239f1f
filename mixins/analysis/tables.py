"""The one table layout: column specs and rows laid out here to fit a terminal without cutting a number
(docs/DESIGN.md §7, ``tables``); ``unit_of`` is the one time-unit rule (the report page's too)."""

from __future__ import annotations

import os
import re
from collections.abc import Iterable, Iterator, Sequence
from contextlib import contextmanager
from typing import TYPE_CHECKING, Literal, Union

from msgspec import Struct

from mixins.one_line import one_line

if TYPE_CHECKING:
    from rich.console import Console
    from rich.text import Text

__all__ = ["Col", "Us", "Cell", "unit_of", "shown", "duration_text", "short_runners", "print_table",
           "wide_tables", "shows_whole_cells"]

UNITS = ((1e6, "s"), (1e3, "ms"), (1.0, "µs"))
_DECIMALS = {"s": 2, "ms": 2, "µs": 1}
_EDGE = 3  # per column: one space of padding each side and one border; plus one border for the table


def unit_of(values: Iterable[float]) -> tuple[float, str]:
    """(divisor, name) of the unit a group of durations is shown in: the largest in which its largest value is
    at least 1 (999 µs, 1.00 ms, 1.00 s; µs when it has none)."""
    top = max(map(abs, values), default=0.0)
    return next(((div, name) for div, name in UNITS if top >= div), UNITS[-1])


def shown(us: float, unit: tuple[float, str]) -> str:
    """A duration as a cell shows it in ``unit`` (``unit_of``'s pair), without the unit's name."""
    div, name = unit
    return f"{us / div:,.{_DECIMALS[name]}f}"


def duration_text(us: float) -> str:
    """One duration in its own unit, for lines outside tables: ``31.17 s``, ``724.4 µs``."""
    unit = unit_of([us])
    return f"{shown(us, unit)} {unit[1]}"


class Us(Struct, frozen=True):
    """A duration cell (µs): shown in its column's unit, ``after`` appended (`` (45%)``, `` *``)."""

    us: float
    after: str = ""
    style: str = ""


# a cell: plain text (untrusted: escaped here, never read as markup), lines of it, a styled Text,
# a duration in µs (a ``time`` column), or None (blank)
Cell = Union[str, list[str], "Text", float, Us, None]


class Col(Struct, frozen=True):
    """One column. ``kind``: ``key`` (never dropped, folds last), ``num`` (never folded), ``text``.
    ``drop``: the order a narrow terminal leaves it out in (1 first; None: never). ``fold``: the
    narrowest it may fold to (None: never). ``time``: cells are µs, in one unit with every column of the
    same ``time`` name. ``runner``: cells are runner names, shortened together."""

    header: str
    kind: Literal["key", "num", "text"] = "text"
    drop: int | None = None
    fold: int | None = None
    time: str = ""
    runner: bool = False
    justify: Literal["left", "right", "center"] | None = None


UNWRAPPED = 1 << 20  # "no width": piped tables take their natural width, lines are never broken
_WIDE = [False]


@contextmanager
def wide_tables(on: bool) -> Iterator[None]:
    """``--wide``: every column shown, whatever the terminal's width (set per command run)."""
    _WIDE[0], was = on, _WIDE[0]
    try:
        yield
    finally:
        _WIDE[0] = was


def shows_whole_cells(out: Console) -> bool:
    """Whether ``out`` shows every cell whole, at any length: piped (natural widths) or ``--wide``."""
    return out.width >= UNWRAPPED or _WIDE[0]


_WORD = re.compile(r"[A-Z]+(?=[A-Z][a-z])|[A-Z]?[a-z0-9]+|[A-Z]+|[^A-Za-z0-9]+")


def short_runners(names: Iterable[str]) -> dict[str, str]:
    """Each runner name without the CamelCase words every name ends with (``CudaGraphRunner``); names
    that differed still differ, one word or ``?`` map to themselves."""
    distinct = sorted({n for n in names if n})
    split = {n: w for n in distinct if "".join(w := _WORD.findall(n)) == n and len(w) > 1 and n[0].isalpha()}
    if len(split) < 2:  # one name: nothing to tell apart, and its tail may be all that says what it is
        return {n: n for n in distinct}
    tail = min(len(os.path.commonprefix([w[::-1] for w in split.values()])), *(len(w) - 1 for w in split.values()))
    return {n: "".join(split[n][: len(split[n]) - tail]) if tail and n in split else n for n in distinct}


def _plain(cell: Cell, unit: tuple[float, str] | None) -> Text:
    from rich.text import Text

    if isinstance(cell, Text):
        return cell
    if isinstance(cell, list):
        return Text("\n".join(map(one_line, cell)))
    if isinstance(cell, (Us, float, int)) and not isinstance(cell, bool):
        us = cell if isinstance(cell, Us) else Us(float(cell))
        return Text(shown(us.us, unit or UNITS[-1]) + one_line(us.after), style=us.style)
    return Text("" if cell is None else one_line(cell))


def _width(text: Text) -> int:
    from rich.cells import cell_len

    return max((cell_len(line) for line in text.plain.split("\n")), default=0)


# a piece ends after a space, a comma, or one of -./_: not before a digit (file names fold at - and .), else
# before the last character that is not a digit (a number is never split)
_SOFT = re.compile(r".+(?: |,(?=.)|[-./_:](?=\D))")
_HARD = re.compile(r".+\D")


def _fold_points(line: str, width: int) -> list[int]:
    """Where to break one line into pieces of at most ``width`` cells (the last soft break, else hard)."""
    cuts, start = [], 0
    while len(line) - start > width:
        end = start + width
        if soft := _SOFT.match(line, start, end + 1):
            end = soft.end()
        elif hard := _HARD.match(line, start + 1, end + 1):  # no match: a number wider than the column (never)
            end = hard.end() - 1
        cuts.append(end)
        start = end
    return cuts


def _fold(text: Text, width: int) -> Text:
    from rich.text import Text

    if _width(text) <= width:
        return text
    pieces = [p for line in text.split("\n", allow_blank=True) for p in line.divide(_fold_points(line.plain, width))]
    for piece in pieces:
        piece.rstrip()  # in place: a fold after a space leaves none at the line's end
    return Text("\n").join(pieces)


class _Column(Struct):
    spec: Col
    header: str
    cells: list[Text]

    def width(self, least: bool = False, fold_keys: bool = False) -> int:
        """Its natural width, or the narrowest it may be: its longest header word, and its cells unless it
        folds (a key only when ``fold_keys``)."""
        cells = max((_width(c) for c in self.cells), default=0)
        if not least:
            return max(cells, len(self.header))
        fold = self.spec.fold if self.spec.kind != "key" or fold_keys else None
        return max(max(map(len, self.header.split(" "))), cells if fold is None else min(cells, fold))


def _columns(cols: Sequence[Col], rows: Sequence[Sequence[Cell]], names: dict[str, str]) -> list[_Column]:
    groups: dict[str, list[float]] = {}
    for i, spec in enumerate(cols):
        if spec.time:
            us = [v.us if isinstance(v, Us) else v for row in rows if isinstance(v := row[i], (Us, float, int))]
            groups.setdefault(spec.time, []).extend(us)
    out = []
    for i, spec in enumerate(cols):
        values = [row[i] for row in rows]
        unit = unit_of(groups[spec.time]) if spec.time else None
        header = f"{spec.header} {unit[1]}".strip() if unit else spec.header
        for full, short in names.items():
            header = header.replace(full, short)
        if spec.runner:
            values = [names.get(v, v) if isinstance(v, str) else v for v in values]
        out.append(_Column(spec, one_line(header), [_plain(v, unit) for v in values]))
    return out


def _room(width: int, n: int) -> int:
    """Cells of content a table of ``n`` columns has in ``width`` (padding and borders taken off)."""
    return width - _EDGE * n - 1


def _layout(columns: list[_Column], width: int, wide: bool) -> tuple[list[_Column], list[int], list[str], list[str]]:
    """The columns a terminal ``width`` wide shows, their widths, the headers left out and ``header text``
    of the columns moved into the title; chosen here because rich's collapse cuts numbers (docs/DESIGN.md §7)."""
    shown, dropped, constant = list(columns), list[str](), list[str]()

    def need(fold_keys: bool) -> int:
        return sum(c.width(True, fold_keys) for c in shown) - _room(width, len(shown))

    def telling(without: _Column | None = None) -> int:
        """How many rows the text columns (what names a row, not what it measures) tell apart."""
        texts = ([x.plain for x in c.cells] for c in shown if c.spec.kind != "num" and c is not without)
        return len(set(zip(*texts, strict=True)))

    if not wide and need(False) > 0:
        for c in [c for c in shown if c.spec.kind != "key" and len({x.plain for x in c.cells}) == 1 < len(c.cells)]:
            shown.remove(c)
            constant.append(f"{c.header} {c.cells[0].plain}")
    droppable = sorted((c for c in shown if c.spec.drop is not None), key=lambda c: c.spec.drop or 0)
    while not wide and need(False) > 0:
        # a number column may go before keys fold; a text column only when folded keys do not fit either
        candidates = [c for c in droppable if c.spec.kind == "num" or need(True) > 0]
        if not candidates:
            break
        told = telling()
        gone = next((c for c in candidates if c.spec.kind == "num" or telling(c) == told), candidates[0])
        droppable.remove(gone)
        shown.remove(gone)
        dropped.append(gone.header)
    fold_keys = need(False) > 0
    widths = [c.width(True, fold_keys) for c in shown]
    extra = _room(width, len(shown)) - sum(widths)
    # what is left goes back: keys first, then folded text (the nearest to whole first: a folded cell
    # costs a line per row), then wrapped headers (one line per table)
    for i in sorted(range(len(shown)), key=lambda i: (shown[i].spec.kind != "key", shown[i].spec.kind == "num",
                                                       shown[i].width() - widths[i])):
        grow = max(0, min(extra, shown[i].width() - widths[i]))
        widths[i] += grow
        extra -= grow
    return shown, widths, dropped, constant


def print_table(out: Console, cols: Sequence[Col], rows: Sequence[Sequence[Cell]], title: str | None = None,
                runners: Iterable[str] = ()) -> None:
    """Print one table on ``out`` (never cropped), and a note when columns were left out. ``title`` is
    untrusted text; ``runners``: the runner names its cells and headers may hold."""
    from rich.table import Table
    from rich.text import Text

    shown = _columns(cols, rows, {})
    widths, dropped, constant = [c.width() for c in shown], list[str](), list[str]()
    if out.width < UNWRAPPED and sum(widths) > _room(out.width, len(shown)):
        short = {k: v for k, v in short_runners(runners).items() if k != v}
        shown, widths, dropped, constant = _layout(_columns(cols, rows, short), out.width, _WIDE[0])
    if constant:  # one line: "every row:" then each column's header and text
        title = " — ".join(filter(None, [one_line(title or ""), "every row: " + " · ".join(constant)]))
    cells = [[_fold(cell, w) for cell in c.cells] for c, w in zip(shown, widths, strict=True)]
    table = Table(title=Text(one_line(title)) if title else None, title_justify="left",
                  show_lines=out.width < UNWRAPPED and any("\n" in c.plain for col in cells for c in col))
    for c, w in zip(shown, widths, strict=True):
        table.add_column(Text(c.header), justify=c.spec.justify or ("right" if c.spec.kind == "num" else "left"),
                         min_width=w, max_width=w, overflow="fold")
    for row in zip(*cells, strict=True) if cells else ():
        table.add_row(*row)
    out.print(table, crop=False)
    if dropped:
        out.print(Text(f"not shown at {out.width} columns: {', '.join(dropped)} (--wide: all)"), soft_wrap=True)
