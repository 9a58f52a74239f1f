"""A page opened in a real headless Chromium (Debian's ``chromium``; ``.ci/run`` installs it), once:
the DOM after its scripts ran (read with Beautiful Soup), every console message, and a screenshot (Pillow).

One launch gives all three (``--dump-dom`` and ``--screenshot`` together; console messages are logged on
stderr as ``INFO:CONSOLE…] "text", source: …`` with ``--enable-logging=stderr``). Every host name resolves
to nothing, so a page that tried to load anything from the network would miss it: what renders works
offline. The screenshot is taken at a device scale of 0.5 (the CSS layout is unchanged): a small image.
"""

from __future__ import annotations

import json
import os
import re
import shutil
import subprocess
import tempfile
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from bs4 import BeautifulSoup
from PIL import Image

_CONSOLE = re.compile(r':CONSOLE[^\]]*\] "(.*)", source: ', re.DOTALL)
SCALE = 0.5  # Chromium clamps smaller factors to 0.5


def chromium() -> str | None:
    """The browser to test with: ``$CHROMIUM``, else ``chromium`` / ``chromium-browser`` on PATH."""
    return os.environ.get("CHROMIUM") or shutil.which("chromium") or shutil.which("chromium-browser")


@dataclass
class Page:
    dom: str  # document.documentElement.outerHTML after the scripts ran
    console: list[str]  # every console message and uncaught error, in order
    width: int  # screenshot, device pixels
    height: int
    rgb: bytes  # width * height * 3


def open_page(path: Path, window: tuple[int, int] = (1280, 2000)) -> Page:
    browser = chromium()
    assert browser is not None
    with tempfile.TemporaryDirectory(prefix="chromium-") as tmp:
        shot = os.path.join(tmp, "shot.png")
        done = subprocess.run(
            [
                browser, "--headless", "--disable-gpu", "--no-sandbox", "--no-first-run",
                "--disable-extensions", "--disable-background-networking", "--hide-scrollbars",
                f"--user-data-dir={os.path.join(tmp, 'profile')}", "--host-resolver-rules=MAP * ~NOTFOUND",
                "--enable-logging=stderr", "--v=0", "--virtual-time-budget=10000",
                f"--force-device-scale-factor={SCALE}", f"--window-size={window[0]},{window[1]}",
                "--dump-dom", f"--screenshot={shot}", path.resolve().as_uri(),
            ],
            capture_output=True, text=True, timeout=180,
        )
        assert done.returncode == 0, done.stderr[-3000:]
        with Image.open(shot) as image:
            width, height, rgb = *image.size, image.convert("RGB").tobytes()
    console = [m.group(1) for line in done.stderr.splitlines() if (m := _CONSOLE.search(line))]
    return Page(done.stdout, console, width, height, rgb)


def pixels(page: Page) -> list[tuple[int, int, int]]:
    return list(zip(page.rgb[0::3], page.rgb[1::3], page.rgb[2::3], strict=True))


def parse(html: str) -> BeautifulSoup:
    """A page's elements (Beautiful Soup over the stdlib's HTML parser), for CSS selectors."""
    return BeautifulSoup(html, "html.parser")


def text_of(page: BeautifulSoup | str, element_id: str) -> str:
    """The text content of the one element with that id."""
    (element,) = (parse(page) if isinstance(page, str) else page).select(f"#{element_id}")
    return element.get_text()


# Measures the page as laid out once its charts are drawn. It runs right after the page's own scripts:
# Plotly.newPlot draws these charts before it returns, and asking for a box lays the page out. What it
# measures: the page's width against the window's, any element that scrolls sideways, the box of every
# axis tick label of each chart, and the size every text of a chart is drawn at on screen (font size
# times the scale of the transforms around it). Hidden texts (no box) are left out. The result is
# written into the DOM as JSON, which --dump-dom returns.
_PROBE = """
(function () {
  function box(el) { var r = el.getBoundingClientRect(); return [r.left, r.top, r.right, r.bottom]; }
  function drawn(el) {
    var r = el.getBoundingClientRect(), s = getComputedStyle(el);
    return r.width > 0 && r.height > 0 && s.display !== "none" && s.visibility !== "hidden"
      && parseFloat(s.opacity || "1") > 0 && el.textContent.trim() !== "";
  }
  function measure() {
    var out = {inner_width: window.innerWidth, scroll_width: document.documentElement.scrollWidth, charts: {},
               scrollers: []};  // elements that scroll sideways on their own
    document.querySelectorAll("body *").forEach(function (el) {
      var x = getComputedStyle(el).overflowX;
      if ((x === "auto" || x === "scroll") && el.scrollWidth > el.clientWidth)
        out.scrollers.push(el.tagName.toLowerCase() + (el.id ? "#" + el.id : ""));
    });
    document.querySelectorAll(".js-plotly-plot").forEach(function (gd) {
      var ticks = gd.querySelectorAll("g.xtick text, g.ytick text, g.xtick2 text, g.ytick2 text");
      var texts = gd.querySelectorAll("text");
      out.charts[gd.id] = {
        ticks: Array.from(ticks).filter(drawn).map(function (t) { return [t.textContent, box(t)]; }),
        texts: Array.from(texts).filter(drawn).map(function (t) {
          var m = t.getScreenCTM(), scale = Math.sqrt(m.a * m.a + m.b * m.b);
          return [t.textContent, parseFloat(getComputedStyle(t).fontSize) * scale,
                  (t.getAttribute("class") || "")];
        }),
      };
    });
    var pre = document.createElement("pre");
    pre.id = "measured";
    pre.textContent = JSON.stringify(out);
    document.body.appendChild(pre);
  }
  measure();
})();
"""


def measure_page(path: Path, width: int, height: int = 2000) -> tuple[Page, dict[str, Any]]:
    """The page at ``path`` opened at ``width`` CSS px with ``_PROBE`` added (a copy, its hash added to
    the page's Content-Security-Policy so that it may run), and what the probe measured."""
    from mixins.analysis.commands.report_html import csp_hash

    page_text = path.read_text()
    assert page_text.count("script-src ") == 1
    probed = page_text.replace("script-src ", f"script-src {csp_hash(_PROBE)} ", 1).replace(
        "</body>", f"<script>{_PROBE}</script></body>", 1
    )
    with tempfile.TemporaryDirectory(prefix="probe-") as tmp:
        copy = Path(tmp) / path.name
        copy.write_text(probed)
        page = open_page(copy, window=(width, height))
    measured: dict[str, Any] = json.loads(text_of(page.dom, "measured"))
    return page, measured


def overlapping(boxes: list[tuple[str, list[float]]], slack: float = 0.5) -> list[tuple[str, str]]:
    """Pairs of labels whose boxes (left, top, right, bottom) share more than ``slack`` px each way."""
    pairs = []
    for i, (a, (l1, t1, r1, b1)) in enumerate(boxes):
        for b, (l2, t2, r2, b2) in boxes[i + 1 :]:
            if min(r1, r2) - max(l1, l2) > slack and min(b1, b2) - max(t1, t2) > slack:
                pairs.append((a, b))
    return pairs
