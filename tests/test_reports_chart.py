"""The leaderboard chart keeps its title, its legend and its plot whole, whatever the model names.

The PNG is measured on matplotlib's own layout (the drawn extents of the title, legend and axes);
the SVG is measured in a headless browser (the text's real rendered boxes against the canvas).
"""

from __future__ import annotations

import json
import shutil
import subprocess
import tempfile
import warnings
from pathlib import Path

import pytest

from lm_eval_mathjudge.reports import chart
from lm_eval_mathjudge.reports.leaderboard import Board, Row

TASKS = ("gsm8k_gpt4em", "math500_gpt4em", "aime24_gpt4em", "aime25_gpt4em", "omnimath_gpt4em")
# Names as users give them: a replay file's path (what lm-eval records without model=), hub ids, one name
BOARDS = {
    "paths": (TASKS[:1], [f"out/example/replays/{m}.jsonl" for m in ("gpt3-fixed", "gpt3-mixed", "gpt3-verifier")]),
    "hub-ids": (TASKS, [f"Qwen/Qwen2.5-{size}B-Instruct" for size in ("0.5", "1.5", "3", "7", "14", "32", "72")]),
    "one": (TASKS[:1], ["a"]),
    "very-long": (TASKS[:2], ["meta-llama/Llama-3.1-405B-Instruct-FP8-dynamic-quantised-by-someone-with-a-long-name",
                              "b"]),
}
MIN_AXES_SHARE = 0.5  # the plot keeps at least half of the figure's width


def _board(tasks, models) -> Board:
    rows = []
    for j, task in enumerate(tasks):
        for i, model in enumerate(models):
            value = max(0.05, 0.9 - 0.1 * i - 0.05 * j)
            rows.append(Row(model=model, task=task, metric="gpt4_exact_match", n=100, value=value, ci_low=value - 0.08,
                            ci_high=min(1.0, value + 0.07), ci_method="wilson", p_value=None, diff_vs_top=None,
                            diff_ci_low=None, diff_ci_high=None, rank=i + 1, judge="local:math-verify",
                            prompt_version="exact_match@0", data="local:gsm8k", primary=True, is_top=i == 0))
    return Board(rows, [])


def _inside(inner, outer, slack: float = 0.5) -> bool:
    return (inner.x0 >= outer.x0 - slack and inner.y0 >= outer.y0 - slack and inner.x1 <= outer.x1 + slack
            and inner.y1 <= outer.y1 + slack)


@pytest.mark.parametrize("name", BOARDS)
def test_png_layout_keeps_title_legend_and_plot_whole(name):
    pytest.importorskip("matplotlib")
    import matplotlib.pyplot as plt

    with warnings.catch_warnings():
        warnings.simplefilter("error")  # e.g. "Tight layout not applied": a layout that gave up
        fig = chart.figure(_board(*BOARDS[name]))
        try:
            fig.canvas.draw()
            renderer = fig.canvas.get_renderer()
            whole = fig.bbox
            title, legend, ax = fig._suptitle, fig.legends[0], fig.axes[0]
            assert title.get_text() == "Leaderboard (primary metric, 95% CI)"
            assert _inside(title.get_window_extent(renderer), whole)
            legend_box = legend.get_window_extent(renderer)
            axes_box = ax.get_window_extent(renderer)
            assert legend_box.y1 <= axes_box.y0  # below the plot, never over it or beside it
            assert [t.get_text() for t in legend.get_texts()] == BOARDS[name][1]
            if name != "very-long":  # a name wider than the widest figure we make: the saved file grows instead
                assert _inside(legend_box, whole)
            assert axes_box.width / whole.width >= MIN_AXES_SHARE
        finally:
            plt.close(fig)


def test_png_file_holds_every_part(tmp_path):
    """The saved file is cropped to what was drawn, not to the figure: a legend wider than it is not cut."""
    pytest.importorskip("matplotlib")
    import matplotlib.image

    path = tmp_path / "chart.png"
    chart.png(_board(*BOARDS["very-long"]), str(path))
    height, width = matplotlib.image.imread(str(path)).shape[:2]
    fig = chart.figure(_board(*BOARDS["very-long"]))
    fig.canvas.draw()
    legend_px = fig.legends[0].get_window_extent(fig.canvas.get_renderer()).width * 120 / fig.dpi
    assert width >= legend_px and height > 300


_MEASURE = """<!DOCTYPE html><html><body style="margin:0">%s<pre id="out"></pre><script>
const svg = document.querySelector("svg"), w = +svg.getAttribute("width"), h = +svg.getAttribute("height");
const box = (el) => { const b = el.getBBox(); return [b.x, b.y, b.x + b.width, b.y + b.height]; };
const texts = [...svg.querySelectorAll("text")].filter((t) => !t.hasAttribute("transform")).map(box);
const bars = [...svg.querySelectorAll("rect.bar")].map(box);
document.getElementById("out").textContent = JSON.stringify({w, h, texts, bars,
  title: box(svg.querySelector("text.title")), legend: [...svg.querySelectorAll("text.legend-label")].map(box)});
</script></body></html>"""


def _browser() -> str:
    browser = shutil.which("chromium") or shutil.which("chromium-browser")
    if browser is None:
        pytest.skip("chromium is not installed (.ci/run installs it: apt-get install -y chromium)")
    return browser


def _measured(svg_text: str, tmp_path: Path) -> dict:
    page = tmp_path / "measure.html"
    page.write_text(_MEASURE % svg_text, encoding="utf-8")
    with tempfile.TemporaryDirectory() as profile:
        dom = subprocess.run([_browser(), "--headless", "--no-sandbox", "--disable-gpu", "--no-first-run",
                              "--disable-background-networking", "--disable-component-update",
                              f"--user-data-dir={profile}", "--dump-dom", page.as_uri()],
                             capture_output=True, text=True, timeout=180).stdout
    found = dom.split('<pre id="out">', 1)[1].split("</pre>", 1)[0]
    return json.loads(found.replace("&quot;", '"').replace("&amp;", "&"))


@pytest.mark.e2e  # starts a browser
def test_svg_text_lies_inside_the_canvas_in_a_browser(tmp_path):
    """Every text of every board (title, tick labels, task names, legend) drawn inside the SVG's canvas."""
    for name, (tasks, models) in BOARDS.items():
        m = _measured(chart.svg(_board(tasks, models)), tmp_path)
        for x0, y0, x1, y1 in m["texts"]:
            assert x0 >= 0 and y0 >= 0 and x1 <= m["w"] and y1 <= m["h"], (name, (x0, y0, x1, y1), m["w"])
        assert len(m["legend"]) == len(models) and len(m["bars"]) == len(models) * len(tasks)
        plot = max(b[2] for b in m["bars"]) - min(b[0] for b in m["bars"])
        assert m["title"][2] <= m["w"] and plot > 0
