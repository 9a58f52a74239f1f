"""``report``'s page: one self-contained HTML file drawn from exactly what ``time --json``, ``check --json``
and ``attribute --json`` print (``render_report`` is pure). Charts are plotly's, its bundle embedded (works
offline); untrusted text is escaped for where it lands and a Content-Security-Policy with our two scripts'
hashes stops anything else from running (docs/DESIGN.md §7.3).
"""

from __future__ import annotations

import base64
import hashlib
import html
import json
import os
import re
from collections import Counter, defaultdict
from collections.abc import Iterable
from itertools import cycle
from typing import Any

from mixins.analysis.tables import short_runners, unit_of
from mixins.formats import PHASES  # time --json's phase keys, stacked bottom to top
from mixins.one_line import one_line

__all__ = ["EXTRA", "PHASES", "DATA_ID", "ReportUnavailable", "render_report", "require_plotly", "script_json",
           "csp_hash"]

EXTRA = "report"  # pyproject.toml [project.optional-dependencies]
DATA_ID = "capture-trace-data"  # the <script type="application/json"> holding the three dicts as given
_COLORS = {"warmup": "#f2a541", "capture": "#3b7dd8", "instantiate": "#8e5bd0", "other": "#a0a4ab"}
_PHASE_NAMES = {"warmup": "warm-up", "capture": "capture", "instantiate": "instantiate", "other": "other"}
_MODULE_COLORS = ("#b8c7dc", "#d5c3a5", "#b9d3c2", "#d4b8cf", "#c9c9a3", "#a9cbd2")
_OP_COLORS = (
    "#3b7dd8", "#e4572e", "#29a36a", "#f2a541", "#8e5bd0", "#17a2b8", "#d0427f", "#7a9a01",
    "#b5651d", "#5c6bc0", "#c0392b", "#16a085", "#e67e22", "#6d4c41", "#2e86c1", "#a93226",
)


class ReportUnavailable(Exception):
    """The charting library (the ``[report]`` extra) is not installed."""


def require_plotly() -> tuple[Any, str]:
    """plotly's graph objects (they validate every property against the bundled plotly.js) and that bundle;
    ``ReportUnavailable`` (one line naming the extra) when plotly cannot be imported."""
    try:
        import plotly.graph_objects as go
        from plotly.offline import get_plotlyjs
    except ImportError:
        why = f"report needs plotly: pip install 'sglang-capture-trace[{EXTRA}]' (or pip install plotly)"
        raise ReportUnavailable(why) from None
    # "</script" cannot occur inside a script element; "<\/" is the same text in a JS string or regex.
    return go, re.sub(r"</(script)", r"<\\/\1", get_plotlyjs(), flags=re.IGNORECASE)


_UNSAFE = re.compile("[<>&\u2028\u2029\ud800-\udfff]")


def script_json(value: Any) -> str:
    """JSON that is safe inside ``<script>``: no ``<``, ``>`` or ``&`` (no ``</script>``, no ``<!--``)
    and no U+2028/U+2029; ``JSON.parse`` reads back the same value. Strict: no NaN or Infinity. A lone
    surrogate (an undecodable file-name byte) cannot be UTF-8: it is shown as Python writes it, as the other
    commands show it (``\\udcff`` in JSON is the six characters ``\udcff``)."""
    text = json.dumps(value, allow_nan=False, ensure_ascii=False)
    return _UNSAFE.sub(lambda m: ("\\\\u" if m[0] >= "\ud800" else "\\u") + f"{ord(m[0]):04x}", text)


def _h(value: object) -> str:
    """Untrusted text for HTML text or a quoted attribute: one line (``one_line``), then entities."""
    return html.escape(one_line(value), quote=True)


def _label(value: object) -> str:
    """Untrusted text for a plotly label: plotly.js parses a few tags in text and decodes entities, so
    entity-escaped text is shown exactly as written and no tag is ever interpreted."""
    return html.escape(one_line(value), quote=False)


def _num(value: Any) -> str:
    """A JSON number as the JSON text has it (``data-*`` attributes: read back and compared exactly)."""
    return _h(json.dumps(value))


def _fmt(us: float | None, div: float) -> str:
    return "–" if us is None else f"{us / div:,.3f}"


def _td(text: object, cls: str = "") -> str:
    """A cell of untrusted text (``_h``), of class ``cls`` (``num``: right-aligned figures)."""
    return f'<td class="{cls}">{_h(text)}</td>' if cls else f"<td>{_h(text)}</td>"


def _us(us: float | None, div: float = 1.0, phase: str = "") -> str:
    """A time cell: ``us`` in the unit of ``div``, the exact µs in ``data-us`` (read back and compared by the tests)."""
    at = f' data-phase="{phase}"' if phase else ""
    return f'<td class="num"{at} data-us="{_num(us)}">{_fmt(us, div)}</td>'


def _tr(cells: Iterable[str], attrs: str = "") -> str:
    return f"<tr{attrs}>" + "".join(cells) + "</tr>"


def _table(cls: str, heads: Iterable[str], rows: Iterable[str]) -> str:
    """A table of class ``cls``: one row of ``heads`` (HTML), then ``rows`` (``_tr``)."""
    return f'<table class="{cls}">' + _tr(f"<th>{h}</th>" for h in heads) + "".join(rows) + "</table>"


def _ranks(t: dict[str, Any]) -> str:
    """``TP 0``, then ``PP 1`` and ``#2`` where not the first stage and capture."""
    parts = [f"TP {_opt(t.get('tp_rank'))}"]
    if t.get("pp_rank"):
        parts.append(f"PP {t['pp_rank']}")
    if (t.get("capture_index") or 1) > 1:
        parts.append(f"#{t['capture_index']}")
    return " · ".join(parts)


def _trace_names(traces: list[dict[str, Any]], runs: list[str]) -> list[str]:
    """One name per ``time`` trace: runner (or class, or file) and ``_ranks``, told apart within its run only
    (the same runner in two runs is one row of the chart, with a bar per run): a name still shared in its
    run gets the file's name, or its whole path where the files' names are shared too, so two bars never
    merge."""
    names = [f"{t.get('runner') or t.get('runner_class') or os.path.basename(str(t.get('path', '?')))} · {_ranks(t)}"
             for t in traces]
    run = [t.get("run", runs[0]) for t in traces]
    paths = [str(t.get("path", "?")) for t in traces]
    bases = [os.path.basename(p) for p in paths]
    named, named_in = Counter(zip(run, names, strict=True)), Counter(zip(run, names, bases, strict=True))
    out = []
    for i, (r, n) in enumerate(zip(run, names, strict=True)):
        if r not in runs:
            n = ""
        elif named[r, n] > 1:
            n += f" ({paths[i] if named_in[r, n, bases[i]] > 1 else bases[i]})"
        out.append(n)
    return out


MAX_BARS = 40  # runner × shape bars drawn; past this the largest, with a note (every one stays in the data)
MAX_TABLE_ROWS = 200  # rows of each trace's start-up table, of the comparison table and of the op table
ROW_PX = 22  # height of one runner × shape row of the start-up chart, per bar in it (two runs: two bars)
_RUN_COLORS = ("#a0a4ab", "#3b7dd8", "#e4572e", "#29a36a", "#8e5bd0", "#f2a541")  # first run grey: the baseline

Cell = tuple[str, str]  # (runner name within its run, shape label): one row of the start-up chart


def _more(rows: int, shown: int, where: str = "the page's data (time --json)") -> str:
    return f"<p>{rows - shown:,} more rows in {where}.</p>" if rows > shown else ""


def _axis_runner(trace: dict[str, Any], name: str, short: dict[str, str]) -> str:
    """A runner group's label beside its rows: the runner without the tail every runner shares
    (``tables.short_runners``), then its ranks (``Decode · TP 0``), on one line."""
    runner = str(trace.get("runner") or "")
    if runner and name.startswith(runner):
        name = short.get(runner, runner) + name[len(runner):]
    return _label(name)


def _seg(s: dict[str, Any]) -> str:
    return str(s.get("label", "?"))


def _startup_figure(go: Any, time_json: dict[str, Any]) -> tuple[dict[str, Any] | None, str, str]:
    """The start-up chart (bars per runner × shape: phases stacked, or a bar per run), the note of bars left
    out, and its tables (docs/DESIGN.md §7.3, "Bounded page" and "Readable")."""
    traces = time_json.get("traces") or []
    runs = [str(r) for r in time_json.get("runs") or []] or [str(traces[0].get("run", "")) if traces else ""]
    names = _trace_names(traces, runs)
    short = short_runners(str(t["runner"]) for t in traces if t.get("runner"))
    every = [(i, s) for i, t in enumerate(traces) for s in t.get("segments") or []]
    if not every:
        return None, "", "<p>No capture segment in these traces.</p>"
    runner_of: dict[str, str] = {}
    walls: dict[Cell, float] = {}
    for i, s in every:
        runner_of.setdefault(names[i], _axis_runner(traces[i], names[i], short))
        walls[names[i], _seg(s)] = max(walls.get((names[i], _seg(s)), 0.0), s.get("wall_us") or 0.0)
    # grouped by runner (in order of first appearance), shapes in their order within it
    first = {n: k for k, n in enumerate(dict.fromkeys(c[0] for c in walls))}
    cells = sorted(walls, key=lambda c: first[c[0]])
    largest = set(sorted(cells, key=lambda c: -walls[c])[:MAX_BARS])  # in any run
    kept = [c for c in cells if c in largest]
    note = "" if len(kept) == len(cells) else (
        f"The {len(kept)} largest of {len(cells):,} runner × shape bars by wall time; the others are in the "
        "tables below and in the page's data (time --json).")
    div, unit = unit_of(walls[c] for c in kept)
    at_runner = {n: k for k, n in enumerate(dict.fromkeys(c[0] for c in kept))}
    at_shape = {label: k for k, label in enumerate(dict.fromkeys(c[1] for c in kept))}
    row = {c: k for k, c in enumerate(kept)}
    several = len(runs) > 1
    changes = {  # against the first run, per runner, ranks and shape (``time.compare_runs``)
        (r.get("runner"), r.get("tp_rank"), r.get("pp_rank"), r.get("capture_index"), r.get("label")): r["change"]
        for r in time_json.get("comparison") or []
    }
    bars = []
    for k, run in enumerate(runs if several else [None]):  # None: the one run, its phases stacked
        # the (trace, segment) pairs of this run that have a bar, in row order, and their y
        pairs = sorted(((i, s) for i, s in every if run in (None, traces[i].get("run")) and (names[i], _seg(s)) in row),
                       key=lambda p: row[names[p[0]], _seg(p[1])])
        y = [[at_runner[names[i]] for i, _ in pairs], [at_shape[_seg(s)] for _, s in pairs]]
        if run is None:
            for phase in PHASES:
                us = [(s.get("phases") or {}).get(phase) or 0.0 for _, s in pairs]
                share = [(s.get("shares") or {}).get(phase) or 0.0 for _, s in pairs]
                bars.append(go.Bar(
                    name=_PHASE_NAMES[phase], orientation="h", y=y, x=[v / div for v in us],
                    customdata=[[v, sh] for v, sh in zip(us, share, strict=True)], marker_color=_COLORS[phase],
                    hovertemplate=f"{_PHASE_NAMES[phase]}: %{{customdata[0]:,.3f}} µs (%{{customdata[1]:.1%}})"
                    "<extra></extra>",
                ))
            continue
        hover = []
        for i, s in pairs:
            t = traces[i]
            key = (t.get("runner") or "?", t.get("tp_rank"), t.get("pp_rank") or 0, t.get("capture_index", 1),
                   s.get("label"))
            change = changes.get(key, [None] * len(runs))[k] if k else None
            phases = " · ".join(f"{_PHASE_NAMES[p]} {_fmt((s.get('phases') or {}).get(p), div)}" for p in PHASES)
            moved = "" if change is None else f"<br>change against the first run: {change:+.1%}"
            hover.append(f"{phases} ({unit}){moved}")
        bars.append(go.Bar(
            name=_label(run), orientation="h", y=y, x=[(s.get("wall_us") or 0.0) / div for _, s in pairs],
            customdata=[s.get("wall_us") or 0.0 for _, s in pairs], hovertext=hover,
            marker_color=_RUN_COLORS[k % len(_RUN_COLORS)],
            hovertemplate="%{fullData.name}: %{customdata:,.3f} µs<br>%{hovertext}<extra></extra>",
        ))
    per_row = ROW_PX * (len(runs) if several else 1)
    fig = go.Figure(
        data=bars,
        layout=dict(
            barmode="group" if several else "stack", bargap=0.25, height=len(kept) * per_row + 150,
            margin=dict(l=10, r=20, t=70, b=60),
            xaxis=dict(title=dict(text=f"CPU wall time ({unit})"), automargin=True),
            yaxis=dict(autorange="reversed", automargin=True, tickfont=dict(size=12)),
            legend=dict(orientation="h", x=0, xanchor="left", y=1.0, yanchor="bottom", traceorder="normal"),
            template="plotly_white",
        ),
    )
    figure = fig.to_plotly_json()
    figure["categories"] = [[runner_of[n] for n in at_runner], [_label(x) for x in at_shape]]
    tables = _startup_tables(time_json, names, div, unit)
    if several:
        tables = _comparison_table(time_json, runs, div, unit) + tables
    return figure, note, tables


def _comparison_table(time_json: dict[str, Any], runs: list[str], div: float, unit: str) -> str:
    """``comparison`` as a table: per runner, ranks and shape, the wall time in each run and its change
    against the first run."""
    rows = time_json.get("comparison") or []
    if not rows:
        return ""
    heads = ["runner", "ranks", "shape", *(f"{_h(r)} ({unit})" for r in runs), *(f"{_h(r)} vs {_h(runs[0])}"
                                                                                for r in runs[1:])]
    body = []
    for r in rows[:MAX_TABLE_ROWS]:
        body.append(_tr([_td(r.get("runner")), _td(_ranks(r)), _td(r.get("label")),
                         *(_us(w, div) for w in r.get("wall_us") or []),
                         *(_td("–" if c is None else f"{c:+.1%}", "num") for c in (r.get("change") or [])[1:])]))
    return (
        '<details open id="comparison"><summary>runs side by side: wall time per runner × shape</summary>'
        + _table("comparison", heads, body) + _more(len(rows), MAX_TABLE_ROWS) + "</details>\n"
    )


def _startup_tables(time_json: dict[str, Any], names: list[str], div: float, unit: str) -> str:
    heads = ["segment", f"wall ({unit})", *(f"{_PHASE_NAMES[p]} ({unit})" for p in PHASES), "capture windows"]
    out = []
    for i, (name, t) in enumerate(zip(names, time_json.get("traces") or [], strict=True)):
        segments = t.get("segments") or []
        body = []
        for j, s in enumerate(segments[:MAX_TABLE_ROWS]):
            phases = s.get("phases") or {}
            body.append(_tr([_td(s.get("label", "?")), _us(s.get("wall_us"), div),
                             *(_us(phases.get(p), div, p) for p in PHASES), _td(s.get("capture_windows", ""), "num")],
                            f' data-trace="{i}" data-segment="{j}"'))
        out.append(f'<details><summary>{_h(name)} — {_h(t.get("path", "?"))}</summary>'
                   + _table("startup", heads, body) + _more(len(segments), MAX_TABLE_ROWS) + "</details>")
    return "\n".join(out)


def _check_section(check_json: dict[str, Any]) -> str:
    ok = bool(check_json.get("ok"))
    status = "consistent" if ok else "FAILED"
    parts = [f'<p class="status {"ok" if ok else "bad"}" id="check-status" data-ok="{str(ok).lower()}">'
             f"cross-rank check: {status}</p>"]
    bad = check_json.get("bad_files") or []
    if bad:
        parts.append("<p>Files that could not be read:</p><ul>" + "".join(f"<li>{_h(f)}</li>" for f in bad) + "</ul>")
    rows = []
    groups = check_json.get("groups") or []
    several = len({g.get("run") for g in groups}) > 1  # ranks are checked within a run: say which
    for g in groups:
        ranks = ", ".join("?" if r is None else str(r) for r in g.get("ranks") or [])
        why = [*map(_h, g.get("problems") or []), *(_h(_divergence_text(d)) for d in g.get("divergences") or []),
               *("note: " + _h(n) for n in g.get("notes") or [])]
        bs = f" bs={g['bs']}" if g.get("bs") is not None else ""  # one of upstream's per-batch-size files
        rows.append(_tr([
            *([_td(g.get("run"))] if several else []), _td(str(g.get("runner") or "?") + bs),
            *(_td(_opt(g.get(k))) for k in ("pp_rank", "capture_index")), _td(ranks), _td(_opt(g.get("tp_size"))),
            _td("ok" if g.get("ok") else "FAILED"), f"<td>{'<br>'.join(why)}</td>",
        ], f' class="{"ok" if g.get("ok") else "bad"}" data-ok="{str(bool(g.get("ok"))).lower()}"'))
    if rows:
        heads = [*(["run"] if several else []), "runner", "PP", "capture #", "TP ranks", "TP size", "result", "why"]
        parts.append(_table("check", heads, rows))
    return "\n".join(parts)


def _opt(value: Any) -> str:
    return "?" if value is None else str(value)


def _divergence_text(d: dict[str, Any]) -> str:
    if d.get("position") is None:
        return (f"segment {d.get('segment')!r} present on only one side "
                f"(reference {d.get('ops_reference')} ops, TP {_opt(d.get('rank'))} {d.get('ops_other')} ops)")
    ref, other = d.get("reference") or {}, d.get("other") or {}
    return (f"TP {_opt(d.get('rank'))} diverges in {d.get('segment')!r} at op #{d.get('position')}: "
            f"reference {ref.get('op', '(end)')} {ref.get('input_dims', '')}, "
            f"this rank {other.get('op', '(end)')} {other.get('input_dims', '')}")


def _shape(op: dict[str, Any]) -> str:
    dims = op.get("input_dims")
    return "no shapes" if dims is None else json.dumps(dims, separators=(",", ":"))


def _tree(res: dict[str, Any]) -> dict[str, Any]:
    """The treemap's nodes replay → module → op → shape, with values summed as plotly adds them
    (docs/DESIGN.md §7.3, "Attribution sums": ``branchvalues="total"`` hides a box whose children add up to more),
    coloured: modules in muted tones, each op its own colour (largest first) and its shapes the same, unattributed
    work grey."""
    leaves: defaultdict[tuple[str, ...], float] = defaultdict(float)
    for op in res.get("ops") or []:
        leaves[str(op.get("module")), str(op.get("name")), _shape(op)] += float(op.get("gpu_time_us") or 0.0)
    for u in res.get("unattributed") or []:
        leaves["(unattributed)", str(u.get("reason"))] += float(u.get("gpu_time_us") or 0.0)
    weight: defaultdict[tuple[str, ...], float] = defaultdict(float)  # for ordering only: biggest first
    for key, us in leaves.items():
        for depth in range(1, len(key) + 1):
            weight[key[:depth]] += us
    order = sorted(weight, key=lambda k: (len(k), -weight[k], k))
    index = {path: n for n, path in enumerate([(), *order])}
    values = [0.0, *(leaves.get(path, 0.0) for path in order)]
    for depth in (3, 2, 1):  # deepest first; siblings in their order, as plotly adds them
        for path in order:
            if len(path) == depth:
                values[index[path[:-1]]] += values[index[path]]
    total, kinds = values[0], ("module", "op", "shape")
    palette = {1: cycle(_MODULE_COLORS), 2: cycle(_OP_COLORS)}
    colors: dict[tuple[str, ...], str] = {(): "#ffffff"}
    for p in order:
        if p[0] == "(unattributed)":
            colors[p] = "#c8c8c8" if len(p) == 1 else "#9a9a9a"
        else:
            colors[p] = colors[p[:2]] if len(p) == 3 else next(palette[len(p)])
    return dict(
        ids=["r"] + [f"n{index[p]}" for p in order],
        parents=[""] + [("r" if len(p) == 1 else f"n{index[p[:-1]]}") for p in order],
        labels=[_label(os.path.basename(str(res.get("replay"))))] + [_label(p[-1]) for p in order],
        values=values,
        customdata=[[total, 1.0, "replay"]] + [
            [values[index[p]], values[index[p]] / total if total else 0.0, kinds[len(p) - 1]] for p in order],
        marker=dict(colors=list(colors.values()), line=dict(color="#ffffff", width=1)),
    )


MIN_LABEL_PX = 10  # the attribution view's smallest label: a box too small for it shows none (hover, op table)


def _attribution_figure(go: Any, res: dict[str, Any]) -> dict[str, Any]:
    """A treemap, its labels hidden rather than drawn under ``MIN_LABEL_PX`` (docs/DESIGN.md §7.3, "Readable")."""
    fig = go.Figure(
        go.Treemap(
            **_tree(res), branchvalues="total", maxdepth=-1, tiling=dict(pad=2),
            texttemplate="%{label}<br>%{customdata[0]:,.1f} µs (%{customdata[1]:.1%})",
            hovertemplate="%{customdata[2]}: %{label}<br>%{customdata[0]:,.3f} µs GPU "
            "(%{customdata[1]:.1%} of the replay)<extra></extra>",
        ),
        layout=dict(height=640, margin=dict(l=10, r=10, t=10, b=10),
                    uniformtext=dict(minsize=MIN_LABEL_PX, mode="hide")),
    )
    return fig.to_plotly_json()  # type: ignore[no-any-return]


def _attribution_section(res: dict[str, Any], k: int, top: int) -> str:
    cov = res.get("coverage") or {}
    gpu, done = cov.get("gpu_time_us") or 0.0, cov.get("attributed_us") or 0.0
    share = f"{done / gpu:.1%}" if gpu else "–"
    head = (f'<p class="coverage" data-replay="{k}" data-gpu-us="{_num(cov.get("gpu_time_us"))}" '
        f'data-attributed-us="{_num(cov.get("attributed_us"))}" data-graph-kernels="{_num(cov.get("graph_kernels"))}"'
        f' data-graph-kernels-attributed="{_num(cov.get("graph_kernels_attributed"))}">'
        f"<b>{_h(res.get('replay', '?'))}</b>: {done:,.3f} of {gpu:,.3f} µs GPU time attributed ({share}); "
        f"graph kernels {cov.get('graph_kernels_attributed', 0):,} of {cov.get('graph_kernels', 0):,}</p>")
    ops = sorted(res.get("ops") or [], key=lambda o: -(o.get("gpu_time_us") or 0.0))
    rows = [_tr([_td(o.get("name")), _td(o.get("module")), _td(_shape(o)), _td(o.get("source")), _td(o.get("segment")),
                 _td(o.get("kernels"), "num"), _td(o.get("count"), "num"), _us(o.get("gpu_time_us"))],
                f' data-replay="{k}"') for o in ops[:top]]
    unattr = [_tr([_td(u.get("source")), _td(u.get("reason")), _td(u.get("kernels"), "num"),
                   _us(u.get("gpu_time_us"))]) for u in res.get("unattributed") or []]
    heads = ["op", "module", "input dims", "source", "segment", "kernels", "count", "GPU µs"]
    unattributed = _table("unattributed", ["source", "reason", "kernels", "GPU µs"], unattr)
    return (
        head + f'<div class="chart" id="attribution-{k}"></div>'
        + "<details open><summary>ops by GPU time</summary>" + _table("ops", heads, rows)
        + _more(len(ops), top, "the embedded data (attribute --json)") + "</details>"
        + (f"<details open><summary>unattributed</summary>{unattributed}</details>" if unattr else "")
    )


_STYLE = """
body{font:14px/1.4 system-ui,sans-serif;margin:24px;color:#222;max-width:1400px}
h1{font-size:22px}h2{font-size:18px;margin-top:32px;border-bottom:1px solid #ddd}
table{border-collapse:collapse;margin:8px 0}td,th{border:1px solid #ddd;padding:3px 8px;text-align:left;
vertical-align:top}td.num{text-align:right;font-variant-numeric:tabular-nums}
.status{font-weight:bold;padding:6px 10px;display:inline-block;border-radius:4px}
.ok{background:#e5f5e8}.bad{background:#fbe3e3}.note{color:#555}
td,code,summary,p{overflow-wrap:anywhere}th,td.num{white-space:nowrap}
table.comparison th{white-space:normal;overflow-wrap:anywhere}
"""

_INIT = """
(function () {
  var figs = JSON.parse(document.getElementById("capture-trace-figures").textContent);
  var cfg = {displaylogo: false, responsive: true};
  Object.keys(figs).forEach(function (id) {
    var cats = figs[id].categories;  // names stored once: the bars' category axis holds indexes into them
    if (cats) figs[id].data.forEach(function (bar) {
      var axis = bar.orientation === "h" ? "y" : "x";
      bar[axis] = bar[axis].map(function (level, k) { return level.map(function (n) { return cats[k][n]; }); });
    });
    Plotly.newPlot(id, figs[id].data, figs[id].layout, cfg);
  });
})();
"""


def csp_hash(script: str) -> str:
    """A Content-Security-Policy source that lets exactly this inline script run."""
    return "'sha256-" + base64.b64encode(hashlib.sha256(script.encode()).digest()).decode() + "'"


def render_report(time_json: dict[str, Any], check_json: dict[str, Any] | None = None,
                  attribute_json: dict[str, Any] | None = None, *, inputs: Iterable[str] = (),
                  version: str | None = None, top: int = MAX_TABLE_ROWS) -> str:
    """The report page for the dicts ``time --json`` / ``check --json`` / ``attribute --json`` print (the
    last two optional); ``inputs`` are the command line's paths, shown in the header. Raises
    ``ReportUnavailable`` when plotly is not installed."""
    go, plotly_js = require_plotly()
    figures: dict[str, Any] = {}
    startup, left_out, tables = _startup_figure(go, time_json)
    if startup is not None:
        figures["startup"] = startup
    sections = [
        "<h2>Start-up time per runner × shape</h2>",
        f'<p class="note">{_h(time_json.get("note", ""))}</p>',
        f'<p class="note" id="bars-left-out">{_h(left_out)}</p>' if left_out else "",
        '<div class="chart" id="startup"></div>' if startup is not None else "",
        tables,
    ]
    if check_json is not None:
        sections += ["<h2>Cross-rank check</h2>", _check_section(check_json)]
    if attribute_json is not None:
        sections += [
            "<h2>Replay GPU time by module → op → shape</h2>",
            '<p class="note">Click a box to zoom in, the path above it to zoom out; a box too small for a '
            "readable label shows it on hover and in the op table. Graph kernels are attributed "
            "to the capture op that launched them (verified by kernel sequence), eager kernels to their own op.</p>",
        ]
        # one replay's result, or ``{"replays": [...]}`` for several
        for k, res in enumerate(attribute_json["replays"] if "replays" in attribute_json else [attribute_json]):
            figures[f"attribution-{k}"] = _attribution_figure(go, res)
            sections.append(_attribution_section(res, k, top))
    data = {"time": time_json, "check": check_json, "attribute": attribute_json}
    shown = ", ".join(_h(p) for p in inputs)
    scripts = f"script-src {csp_hash(plotly_js)} {csp_hash(_INIT)}"
    csp = f"default-src 'none'; img-src data: blob:; style-src 'unsafe-inline'; {scripts}"
    return "\n".join([
        "<!DOCTYPE html>",
        '<html lang="en"><head><meta charset="utf-8">',
        f'<meta http-equiv="Content-Security-Policy" content="{csp}">',
        "<title>capture-trace report</title>",
        f"<style>{_STYLE}</style>",
        f"<script>{plotly_js}</script>",
        "</head><body>",
        "<h1>capture-trace report</h1>",
        f'<p class="note">{shown}{" — sglang-capture-trace " + _h(version) if version else ""}</p>',
        *sections,
        f'<script type="application/json" id="{DATA_ID}">{script_json(data)}</script>',
        f'<script type="application/json" id="capture-trace-figures">{script_json(figures)}</script>',
        f"<script>{_INIT}</script>",
        "</body></html>",
    ])
