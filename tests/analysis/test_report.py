"""``capture-trace report``: the page opened in a real headless Chromium (tests/analysis/browser.py).

Reports of the real vLLM capture/replay pair, of the demo's real CPU traces and of two runs derived from
them, each loaded once: no console message at all, the charts drawn (one SVG bar per runner × shape ×
phase, or per runner × shape × run; one treemap box per module / op / shape node; counted from the JSON
here, not from the report's code; the screenshot shows the phase and op colours), and the numbers in the
page equal what ``time``, ``check`` and ``attribute`` print with ``--json``. Measured in the laid-out page
(``browser.measure_page``) at 900 and 1,600 px: no two axis labels overlap, nothing scrolls sideways, and
no label of the attribution view is drawn under 10 px. A page of hostile names runs no script and shows
the names as written.
"""

from __future__ import annotations

import copy
import json
import os
import re
import shutil
import subprocess
import sys
from collections.abc import Mapping
from pathlib import Path
from typing import Any

import pytest
from browser import SCALE, Page, chromium, measure_page, open_page, overlapping, parse, pixels, text_of
from bs4 import BeautifulSoup
from inprocess import run_analyzer
from pairs import VLLM_CAPTURE, VLLM_REPLAY, load, our_rank, save, slower
from PIL import ImageColor

from mixins.analysis.commands.report_html import DATA_ID, MIN_LABEL_PX, PHASES, render_report
from tests.built_once import built_once
from tests.trace_files import op, span, write_trace

REPO = Path(__file__).resolve().parents[2]
CAPTURE_BLUE = "#3b7dd8"  # the capture phase's bars (report._COLORS) and the largest op's sectors

needs_chromium = pytest.mark.skipif(
    chromium() is None and not os.environ.get("CI"),
    reason="no chromium on PATH (Debian: apt-get install chromium; .ci/run installs it, and CI fails without it)",
)


def _json(*argv: object, rc: int = 0) -> dict[str, Any]:
    got, out, err = run_analyzer(*argv, "--json")
    assert got == rc, err
    doc: dict[str, Any] = json.loads(out)
    return doc


def _report(tmp: Path, *argv: object) -> Path:
    out = tmp / "report.html"
    rc, _, err = run_analyzer("report", *argv, "-o", out)
    assert rc == 0, err
    assert err.startswith(f"capture-trace: report written to {out} (") and err.endswith(" MiB)\n"), err
    return out


def _data(html_or_dom: str) -> dict[str, Any]:
    doc: dict[str, Any] = json.loads(text_of(html_or_dom, DATA_ID))
    return doc


def _startup_numbers(els: BeautifulSoup, time_json: dict[str, Any]) -> None:
    """Every wall and phase cell's exact µs (data-us) equals the JSON, and its text shows that value in
    the unit its header names, to the 3 decimals shown."""
    cells = [(td.get("data-phase"), str(td["data-us"]), td.get_text()) for td in els.select("td[data-us]")]
    expected: list[tuple[str | None, str]] = []
    for t in time_json["traces"]:
        for s in t["segments"]:
            expected.append((None, json.dumps(s["wall_us"])))
            expected += [(p, json.dumps(s["phases"][p])) for p in PHASES]
    assert [c[:2] for c in cells[: len(expected)]] == expected
    header = next(th.get_text() for th in els.select("th") if th.get_text().startswith("wall ("))
    per_unit = {"wall (µs)": 1.0, "wall (ms)": 1e3, "wall (s)": 1e6}[header]
    for _, us, text in cells[: len(expected)]:
        assert abs(float(text.replace(",", "")) * per_unit - json.loads(us)) <= 0.0005 * per_unit, (text, us)


def _bars(els: BeautifulSoup) -> int:
    return len(els.select("#startup g.point"))


def _drawn(report: dict[str, Any]) -> tuple[Page, BeautifulSoup]:
    """The page (at its first width) and its elements, after checking what every one-run report shows: no
    console message, the commands' JSON as printed (after the scripts ran), one SVG bar per segment × phase
    with the JSON's numbers, the check's status, and readable at each width measured."""
    page: Page = report["page"]
    assert page.console == []
    els = parse(page.dom)
    assert _data(page.dom) == {"time": report["time"], "check": report["check"], "attribute": report.get("attribute")}
    assert _bars(els) == sum(len(t["segments"]) for t in report["time"]["traces"]) * len(PHASES)
    _startup_numbers(els, report["time"])
    assert [s.get("data-ok") for s in els.select("p.status")] == [str(report["check"]["ok"]).lower()]
    _readable(report["measured"])
    return page, els


def _built_report(tmp_path_factory: pytest.TempPathFactory, name: str, commands: Mapping[str, tuple[object, ...]],
                  *argv: object, widths: tuple[int, ...] = (1280,)) -> dict[str, Any]:
    """A report of ``argv``, opened once per run and window width (every xdist worker reads the same:
    tests/built_once.py) and measured there (``measure_page``), and each of ``commands``' ``--json``.
    ``page`` is the page at the first width; ``measured`` maps each width to what was measured."""

    def build(target: Path) -> dict[str, Any]:
        out = _report(target, *argv)
        pages, measured = {}, {}
        for width in widths if chromium() else ():
            page, measured[width] = measure_page(out, width)
            (target / f"page-{width}.rgb").write_bytes(page.rgb)
            pages[width] = {"dom": page.dom, "console": page.console, "width": page.width, "height": page.height}
        return {
            "html": str(out),
            "pages": pages,
            "measured": measured,
            "json": {key: _json(*args) for key, args in commands.items()},
            "size": out.stat().st_size,
        }

    built = built_once(tmp_path_factory, name, build)
    html = Path(built["html"])
    pages = {int(w): Page(**p, rgb=(html.parent / f"page-{w}.rgb").read_bytes()) for w, p in built["pages"].items()}
    return {"html": html.read_text(), "page": pages.get(widths[0]), "pages": pages,
            "measured": {int(w): m for w, m in built["measured"].items()}, "size": built["size"], **built["json"]}


@pytest.fixture(scope="session")
def vllm(tmp_path_factory: pytest.TempPathFactory) -> dict[str, Any]:
    """The real vLLM pair's report (capture + replay), opened once, and the three commands' --json."""
    commands = {"time": ("time", VLLM_CAPTURE), "check": ("check", VLLM_CAPTURE),
                "attribute": ("attribute", VLLM_REPLAY, VLLM_CAPTURE)}
    return _built_report(tmp_path_factory, "report_vllm", commands, "--replay", VLLM_REPLAY, VLLM_CAPTURE,
                         widths=(900,))


@pytest.fixture(scope="session")
def demo(demo_dir: Path, tmp_path_factory: pytest.TempPathFactory) -> dict[str, Any]:
    commands = {"time": ("time", demo_dir), "check": ("check", demo_dir)}
    return _built_report(tmp_path_factory, "report_demo", commands, demo_dir, widths=(1600,))


RANKS = 3  # the demo's four runners × three shapes at TP 0, 1, 2: 36 runner × shape rows
SLOWER = {"DecodeCudaGraphRunner": 1.3, "PrefillCudaGraphRunner": 0.8}  # the second run's changes


def derive_runs(demo_dir: Path, out: Path) -> tuple[Path, Path]:
    """Two runs of a ``RANKS``-rank server made of the demo's real traces (``pairs.our_rank``): ``before/``
    as captured, ``after/`` with the decode runner 30 % slower and the prefill runner 20 % faster
    (``pairs.slower``), the others unchanged."""
    runs = out / "before", out / "after"
    for run in runs:
        run.mkdir()
    for trace in sorted(demo_dir.glob("cuda_graph_capture-*-TP-0.json.gz")):
        doc = load(trace)
        changed = slower(doc, SLOWER.get(doc["capture_trace"]["runner"], 1.0))
        for rank in range(RANKS):
            name = trace.name.replace("-TP-0.", f"-TP-{rank}.")
            save(our_rank(doc, rank, RANKS), runs[0] / name)
            save(our_rank(changed, rank, RANKS), runs[1] / name)
    return runs


@pytest.fixture(scope="session")
def two_runs(demo_dir: Path, tmp_path_factory: pytest.TempPathFactory) -> dict[str, Any]:
    """The report of two runs (``derive_runs``), opened at 900 and 1,600 px, and its commands' --json."""
    made = built_once(tmp_path_factory, "two_runs", lambda out: {"runs": [str(r) for r in derive_runs(demo_dir, out)]})
    before, after = (Path(r) for r in made["runs"])
    commands = {"time": ("time", before, after), "check": ("check", before, after)}
    return _built_report(tmp_path_factory, "report_two_runs", commands, before, after, widths=(900, 1600))


def test_page_holds_exactly_what_the_commands_print(vllm: dict[str, Any], demo: dict[str, Any]) -> None:
    assert _data(vllm["html"]) == {k: vllm[k] for k in ("time", "check", "attribute")}
    assert _data(demo["html"]) == {"time": demo["time"], "check": demo["check"], "attribute": None}


@needs_chromium
def test_vllm_pair_renders_in_chromium_with_the_json_numbers(vllm: dict[str, Any]) -> None:
    page, els = _drawn(vllm)
    assert sum(len(t["segments"]) for t in vllm["time"]["traces"]) == 1
    # attribution: one sector per node, counted here from the JSON: replay, modules, ops, shapes, reasons
    att = vllm["attribute"]
    nodes: set[tuple[Any, ...]] = {("m", o["module"]) for o in att["ops"]}
    nodes |= {("o", o["module"], o["name"]) for o in att["ops"]}
    nodes |= {("s", o["module"], o["name"], json.dumps(o["input_dims"])) for o in att["ops"]}
    nodes |= {("u", u["reason"]) for u in att["unattributed"]} | ({("u",)} if att["unattributed"] else set())
    assert len(els.select("#attribution-0 g.slice")) == len(nodes) + 1
    (cov,) = els.select("p.coverage")
    assert json.loads(str(cov["data-gpu-us"])) == att["coverage"]["gpu_time_us"] == 10717.708
    assert json.loads(str(cov["data-attributed-us"])) == att["coverage"]["attributed_us"]
    assert json.loads(str(cov["data-graph-kernels-attributed"])) == att["coverage"]["graph_kernels_attributed"] == 421
    shown = [json.loads(str(a["data-us"])) for a in els.select("td[data-us]")][1 + len(PHASES) :]
    assert shown == sorted((o["gpu_time_us"] for o in att["ops"]), reverse=True)
    assert "vllm::moe_forward" in text_of(els, "attribution-0")  # the largest op's label is drawn
    _screenshot_shows_the_charts(page)
    (ops,) = [d for d in els.select("details") if d.get_text().startswith("ops by GPU time")]
    assert ops.has_attr("open")  # the op table is shown, not folded


def _readable(measured: dict[int, dict[str, Any]]) -> None:
    """At each width measured: the page no wider than the window and nothing in it scrolling sideways, no
    two axis labels of a chart overlapping, and no text of a chart drawn under ``MIN_LABEL_PX``."""
    assert measured
    for width, m in measured.items():
        assert m["inner_width"] == width and m["scroll_width"] <= width, (width, m["scroll_width"])
        assert m["scrollers"] == [], (width, m["scrollers"])
        for chart, got in m["charts"].items():
            assert overlapping(got["ticks"]) == [], (width, chart)
            assert [(text, px) for text, px, _ in got["texts"] if px < MIN_LABEL_PX] == [], (width, chart)


def _screenshot_shows_the_charts(page: Page) -> None:
    px = pixels(page)
    assert (page.width, page.height) == (900 * SCALE, 2000 * SCALE)
    assert len(set(px)) > 200  # not blank: text, bars, sectors, anti-aliasing
    mean = sum(sum(p) for p in px) / (3 * len(px))
    assert 0 < sum((sum(p) / 3 - mean) ** 2 for p in px) / len(px)
    blue = ImageColor.getrgb(CAPTURE_BLUE)
    assert sum(p == blue for p in px) > 500  # the capture bar(s) as solid pixels


@needs_chromium
def test_demo_traces_render_in_chromium(demo: dict[str, Any]) -> None:
    page, els = _drawn(demo)
    assert sum(len(t["segments"]) for t in demo["time"]["traces"]) == 4 * 3  # four runners, batch sizes 1, 2, 4
    assert not els.select("#attribution-0 div")  # no replay given: no attribution
    names = text_of(els, "startup")  # runner groups named without the tail they share
    assert all(f"{r} · TP 0" in names for r in ("Decode", "EAGLEDraft", "EAGLEDraftExtend", "Prefill"))
    assert len(set(pixels(page))) > 200
    ticks = [text for text, _ in demo["measured"][1600]["charts"]["startup"]["ticks"]]
    assert sorted(t for t in ticks if "=" in t) == sorted(s["label"] for t in demo["time"]["traces"]
                                                          for s in t["segments"])  # every shape's label is measured


@needs_chromium
def test_two_runs_are_paired_bars_with_the_change_readable_at_900_and_1600_px(two_runs: dict[str, Any]) -> None:
    """Two runs of 36 runner × shape rows each: one bar per run in every row (one plotly trace per run),
    the change against the first run in each bar's hover and in the open comparison table, equal to
    ``time --json``'s; at 900 and 1,600 px no tick label overlaps another (the x axis once drew runner +
    path labels over each other into a smear) and the page does not scroll sideways (it once did)."""
    time_json = two_runs["time"]
    assert _data(two_runs["html"]) == {"time": time_json, "check": two_runs["check"], "attribute": None}
    runs, rows = time_json["runs"], time_json["comparison"]
    assert len(runs) == 2 and len(rows) == 4 * 3 * RANKS
    assert {r["runner"]: r["change"] for r in rows} == {
        r: [0.0, round(SLOWER.get(r, 1.0) - 1.0, 4)]
        for r in ("DecodeCudaGraphRunner", "EAGLEDraftCudaGraphRunner", "EAGLEDraftExtendCudaGraphRunner",
                  "PrefillCudaGraphRunner")
    }
    assert two_runs["check"]["ok"] is True and {g["run"] for g in two_runs["check"]["groups"]} == set(runs)
    figures = json.loads(text_of(two_runs["html"], "capture-trace-figures"))
    bars = figures["startup"]["data"]
    assert [b["name"] for b in bars] == runs and [b["orientation"] for b in bars] == ["h", "h"]
    assert figures["startup"]["layout"]["barmode"] == "group"
    hovered = {(us, float(m[1]) / 100 if (m := re.search(r"first run: ([-+][0-9.]+)%", h)) else None)
               for us, h in zip(bars[1]["customdata"], bars[1]["hovertext"], strict=True)}
    assert hovered == {(r["wall_us"][1], r["change"][1]) for r in rows}
    assert len(bars[0]["customdata"]) == len(bars[1]["customdata"]) == len(rows)
    for width, page in two_runs["pages"].items():
        assert page.console == [], width
        els = parse(page.dom)
        assert _bars(els) == len(runs) * len(rows)
        table = els.select("td[data-us]")[: 2 * len(rows)]
        assert [json.loads(str(a["data-us"])) for a in table] == [w for r in rows for w in r["wall_us"]]
    (comparison,) = parse(two_runs["html"]).select("details#comparison")
    assert comparison.has_attr("open")  # the table of the changes is shown, not folded
    _readable(two_runs["measured"])
    for m in two_runs["measured"].values():
        ticks = [text for text, _ in m["charts"]["startup"]["ticks"]]
        assert sum("=" in t for t in ticks) == len(rows)  # every shape label, each measured
        assert sum(" · TP " in t for t in ticks) == 4 * RANKS  # every runner group's label


def test_check_of_files_given_one_by_one_is_the_check_of_their_folder(
    cpu_traces: dict[str, Path], tmp_path: Path
) -> None:
    """``check`` takes one folder; the report's traces may be files: the ranks still meet in one group."""
    files = sorted(f for f in cpu_traces["same"].iterdir() if not f.name.startswith("."))  # as check lists them
    page = _data(_report(tmp_path, *files).read_text())
    folder = _json("check", cpu_traces["same"])
    assert page["check"]["groups"] == folder["groups"] and page["check"]["ok"] is True
    assert page["check"]["dir"] == [str(f) for f in files]
    diverged = _data(_report(tmp_path, cpu_traces["diverged"]).read_text())
    assert diverged["check"] == _json("check", cpu_traces["diverged"], rc=1) and diverged["check"]["ok"] is False


HOSTILE = '</script><img src=x onerror="console.error(\'pwned\')"><b>bold</b>&amp;\u2028<!--'


def _hostile(vllm: dict[str, Any]) -> tuple[dict[str, Any], dict[str, Any], dict[str, Any]]:
    t, c, a = (copy.deepcopy(vllm[k]) for k in ("time", "check", "attribute"))
    t["traces"][0]["runner"] = HOSTILE
    t["traces"][0]["segments"][0]["label"] = HOSTILE
    t["note"] = HOSTILE
    c["groups"][0]["runner"] = HOSTILE
    c["groups"][0]["notes"] = [HOSTILE]
    c["bad_files"] = [HOSTILE]
    top = max(a["ops"], key=lambda o: o["gpu_time_us"])
    top["name"], top["module"], top["segment"] = HOSTILE, HOSTILE, HOSTILE
    a["replay"] = HOSTILE
    a["unattributed"] = [{"source": HOSTILE, "reason": HOSTILE, "launches": 1, "kernels": 1, "gpu_time_us": 1.5,
                          "example_correlation": 7}]
    return t, c, a


def test_hostile_names_never_leave_their_text_and_several_replays_each_get_a_chart(vllm: dict[str, Any]) -> None:
    """Without a browser: the page's only tags are ours, and ``{"replays": [...]}`` (attribute given a
    folder of replays) draws one sunburst per replay."""
    t, c, a = _hostile(vllm)
    page = render_report(t, c, {"replays": [a, vllm["attribute"]]}, inputs=[HOSTILE], version=HOSTILE)
    low = page.lower()
    assert low.count("</script") == 4 and low.count("<script") == 4
    ours = page.split("</script>", 1)[1].lower()  # after plotly.js (whose source has "<img" strings)
    assert "<img" not in ours and "<!--" not in ours and "<b>bold" not in ours and "\u2028" not in ours
    assert _data(page)["attribute"] == {"replays": [a, vllm["attribute"]]}
    assert 'id="attribution-0"' in page and 'id="attribution-1"' in page and 'id="attribution-2"' not in page


@needs_chromium
def test_hostile_names_are_text_and_run_nothing(vllm: dict[str, Any], tmp_path: Path) -> None:
    """Names from a trace in every place the page shows one: no element, no script, no CSP report (a
    blocked inline handler would log one); the data block reads back the same strings."""
    dicts = _hostile(vllm)
    page_path = tmp_path / "hostile.html"
    page_path.write_text(render_report(*dicts, inputs=[HOSTILE], version=HOSTILE))
    page = open_page(page_path)
    assert page.console == []
    els = parse(page.dom)
    assert els.select("img") == [] and els.select("#attribution-0 b") == []
    assert len(els.select("script")) == 4  # plotly.js, the data, the figures, their init
    assert _data(page.dom) == dict(zip(("time", "check", "attribute"), dicts, strict=True))
    # shown as written (one line: U+2028 as Python escapes it) in the tables and in plotly's labels
    visible = HOSTILE.replace("\u2028", "\\u2028")
    assert visible in text_of(els, "startup") and visible in text_of(els, "attribution-0")
    assert sum(visible in td.get_text() for td in els.select("td")) >= 3


def test_missing_plotly_is_one_line_naming_the_extra(cpu_traces: dict[str, Path], tmp_path: Path) -> None:
    """plotly made unimportable (``sys.modules['plotly'] = None``, how Python marks a module absent):
    exit 2, one line naming the extra, no file; the other commands never import plotly."""
    out = tmp_path / "r.html"
    code = (
        "import sys; sys.modules['plotly'] = None\n"
        "from mixins.cli import main\n"
        f"sys.exit(main(['report', {str(cpu_traces['same'])!r}, '-o', {str(out)!r}]))"
    )
    env = dict(os.environ, PYTHONPATH=str(REPO))
    done = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, env=env, timeout=120)
    assert (done.returncode, done.stdout) == (2, "")
    assert done.stderr == (
        "capture-trace: error: report needs plotly: "
        "pip install 'sglang-capture-trace[report]' (or pip install plotly)\n"
    )
    assert not out.exists() and os.listdir(tmp_path) == []
    light = (
        "import sys\nfrom mixins.cli import main\n"
        f"rc = main(['time', '--json', {str(cpu_traces['same'])!r}])\n"
        "assert 'plotly' not in sys.modules, 'plotly imported'\nsys.exit(rc)"
    )
    done = subprocess.run([sys.executable, "-c", light], capture_output=True, text=True, env=env, timeout=120)
    assert done.returncode == 0, done.stderr


def test_bad_input_or_output_writes_nothing(cpu_traces: dict[str, Path], tmp_path: Path) -> None:
    missing = tmp_path / "missing.json.gz"
    rc, out, err = run_analyzer("report", missing, "-o", tmp_path / "r.html")
    assert (rc, out) == (2, "") and err.count("\n") == 1 and str(missing) in err
    blocker = tmp_path / "file"
    blocker.write_text("x")
    rc, out, err = run_analyzer("report", cpu_traces["same"], "-o", blocker / "r.html")
    assert (rc, out) == (2, "")
    assert err == f"capture-trace: error: {blocker / 'r.html'}: cannot write: Not a directory\n"
    assert sorted(os.listdir(tmp_path)) == ["file"]


@needs_chromium
def test_the_harness_sees_console_errors_and_blank_pages(tmp_path: Path) -> None:
    """The checks above can fail: an error, a log line and an uncaught exception are all caught, and a
    page with nothing visible is one colour."""
    page_path = tmp_path / "bad.html"
    page_path.write_text(
        '<body style="background:#fff"><script>console.error("e1"); console.log("l1"); nope();</script>'
        '<p id="x" style="color:#fff">ok</p></body>'
    )
    page = open_page(page_path, window=(200, 200))
    assert page.console == ["e1", "l1", "Uncaught ReferenceError: nope is not defined"]
    assert text_of(page.dom, "x") == "ok" and set(pixels(page)) == {(255, 255, 255)}


def test_traces_sharing_a_name_each_get_their_own_bars(cpu_traces: dict[str, Path], tmp_path: Path) -> None:
    """Three runs of one runner and rank (one file name in three folders): the second and third were both
    renamed "(file name)" and their bars stacked into one column. Each run now has its own bar in the
    runner's row."""
    trace = cpu_traces["r0"]
    runs = []
    for n in range(3):
        (tmp_path / f"run{n}").mkdir()
        runs.append(shutil.copy(trace, tmp_path / f"run{n}" / trace.name))
    figures = json.loads(text_of(_report(tmp_path, *runs).read_text(), "capture-trace-figures"))
    assert figures["startup"]["categories"][0] == ["DecodeCudaGraphRunner · TP 0"]
    bars = figures["startup"]["data"]
    assert [b["name"] for b in bars] == [os.path.dirname(r) for r in runs]
    shapes = [sorted(figures["startup"]["categories"][1][n] for n in b["y"][1]) for b in bars]
    assert shapes == [["bs=1", "bs=4"]] * 3


def _many_segments(path: Path, segments: int, runner: str) -> Path:
    """A small capture-like trace: ``segments`` capture ranges of one op each, of growing wall time."""
    events = [e for i in range(segments) for e in (span(f"capture::bs={i + 1}", i * 100, 20 + i % 70),
                                                   op("aten::mm", i * 100 + 1, 10))]
    return write_trace(path, events, {"runner": runner, "tp_rank": 0})


def test_many_bars_show_the_largest_with_a_note_and_names_once(tmp_path: Path) -> None:
    """Before: every bar of every phase held a copy of its runner's name and every segment was drawn (100k
    segments: a 102.6 MiB page, 4,000,240 px wide). Now the 40 largest are drawn with a note, the figure
    holds each name once, and what the page adds beside the commands' JSON does not grow with the input."""
    runner = "R" + "x" * 3000
    pages, copies = {}, {}
    for n in (300, 1200):
        (tmp_path / str(n)).mkdir()
        html = _report(tmp_path / str(n), _many_segments(tmp_path / f"t{n}.json", n, runner)).read_text()
        figures = json.loads(text_of(html, "capture-trace-figures"))
        bars = figures["startup"]["data"]
        assert len(bars) == len(PHASES) and all(len(b["x"]) == 40 for b in bars)
        assert figures["startup"]["categories"][0] == [f"{runner} · TP 0"]
        walls = sorted((s["wall_us"] for s in _data(html)["time"]["traces"][0]["segments"]), reverse=True)
        drawn = sorted((sum(b["customdata"][k][0] for b in bars) for k in range(40)), reverse=True)
        assert drawn == pytest.approx(walls[:40])  # the largest
        assert f"The 40 largest of {n:,} runner × shape bars" in html
        copies[n] = html.count(runner)  # in the data (time, check), the figure's names, a table's heading
        pages[n] = len(html) - len(text_of(html, DATA_ID))
    assert copies[300] == copies[1200] < 8, copies  # never one per bar
    assert abs(pages[1200] - pages[300]) < 1024, pages
