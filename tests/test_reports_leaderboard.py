"""`mathjudge leaderboard` on three real lm_eval runs: table, CSV, chart (PNG, SVG), HTML in a browser."""

from __future__ import annotations

import csv
import hashlib
import io
import json
import os
import shutil
import struct
import subprocess
import sys
import tempfile
import xml.etree.ElementTree as ET
import zlib
from html.parser import HTMLParser
from pathlib import Path

import pytest

from lm_eval_mathjudge.__main__ import main
from tests.conftest import REPO, SHARED_DATA
from tests.reports_fixtures import MODELS, three_runs
from tests.e2e import TIMEOUT_S

DATA_FILE = SHARED_DATA / "gsm8k" / "test.jsonl"  # where the runs' docs come from (MATHJUDGE_DATA_DIR)

NAMES = {m: f"{m}.jsonl" for m in MODELS}  # lm-eval records the replay path as the model name
# By construction (tests/reports_fixtures.py): correct docs 68, 60, 58 of 100; discordant pairs
# against the top model (gpt3-fixed): mixed 6 vs 14, verifier 0 vs 10.
EXPECTED = {"gpt3-fixed": (0.68, None), "gpt3-mixed": (0.60, 2 * 60460 / 2**20), "gpt3-verifier": (0.58, 2 / 1024)}
SVG = "{http://www.w3.org/2000/svg}"


@pytest.fixture(scope="module")
def runs(tmp_path_factory):
    return three_runs(tmp_path_factory)


@pytest.fixture(scope="module")
def board(runs, tmp_path_factory):
    out = tmp_path_factory.mktemp("board")
    assert main(["leaderboard", *(str(runs.run_dir(m)) for m in MODELS), "--out", str(out)]) == 0
    return out


def _csv(board: Path) -> list[dict]:
    return list(csv.DictReader(io.StringIO((board / "leaderboard.csv").read_text())))


@pytest.mark.e2e
def test_csv_has_a_row_per_model_task_metric_ranked_with_tests_against_the_top(board):
    rows = _csv(board)
    assert set(rows[0]) >= {"model", "task", "metric", "n", "value", "ci_low", "ci_high", "p_value"}
    primary = [r for r in rows if r["metric"] == "gpt4_exact_match"]
    assert [r["model"] for r in primary] == [NAMES["gpt3-fixed"], NAMES["gpt3-mixed"], NAMES["gpt3-verifier"]]
    assert len(rows) == 6 and {r["metric"] for r in rows} == {"gpt4_exact_match", "judge_failed"}
    for row in primary:
        value, p = EXPECTED[row["model"].removesuffix(".jsonl")]
        assert (row["task"], row["n"], float(row["value"])) == ("gsm8k_gpt4em", "100", pytest.approx(value))
        assert float(row["ci_low"]) < value < float(row["ci_high"])
        assert row["p_value"] == "" if p is None else float(row["p_value"]) == pytest.approx(p, rel=1e-9)
        assert row["judge"] == "local:math-verify" and row["prompt_version"].startswith("exact_match@")
        # MATHJUDGE_DATA_DIR runs record the local file; the column names its data set and content, not its path
        sha = hashlib.sha256(DATA_FILE.read_bytes()).hexdigest()[:8]
        assert row["data"].startswith(f"local:gsm8k@{sha} main test, 100 docs #") and str(DATA_FILE) not in row["data"]
    verifier = next(r for r in primary if r["model"] == NAMES["gpt3-verifier"])
    assert (float(verifier["ci_low"]), float(verifier["ci_high"])) == pytest.approx((0.4821, 0.6720), abs=5e-5)
    assert float(verifier["diff_vs_top"]) == pytest.approx(-0.10)
    assert float(verifier["diff_ci_low"]) <= -0.10 <= float(verifier["diff_ci_high"]) < 0  # significant


@pytest.mark.e2e
def test_markdown_table_is_ranked_and_names_the_methods(board):
    text = (board / "leaderboard.md").read_text()
    lines = [line for line in text.splitlines() if line.startswith("| ")]
    assert lines[0].startswith("| # | model | gpt4_exact_match [95% CI] | judge_failed [95% CI] |")
    ranked = [NAMES[m] for m in ("gpt3-fixed", "gpt3-mixed", "gpt3-verifier")]
    assert [line.split(" | ")[1] for line in lines[1:]] == ranked
    assert "| top |" in lines[1] and "| 0.002 |" in lines[3]
    assert "McNemar" in text and "seed 0" in text and "Wilson" in text


def _png_chunks(data: bytes):
    pos = 8
    while pos < len(data):
        length, kind = struct.unpack(">I4s", data[pos:pos + 8])
        yield kind, data[pos + 8:pos + 8 + length]
        pos += 12 + length


@pytest.mark.e2e
def test_png_is_a_real_image_with_the_bars(board):
    data = (board / "leaderboard.png").read_bytes()
    assert data[:8] == b"\x89PNG\r\n\x1a\n"
    chunks = list(_png_chunks(data))
    assert chunks[0][0] == b"IHDR" and chunks[-1][0] == b"IEND"
    width, height, depth, colour = struct.unpack(">IIBB", chunks[0][1][:10])
    assert width > 200 and height > 200 and depth == 8
    channels = {2: 3, 6: 4}[colour]
    raw = zlib.decompress(b"".join(body for kind, body in chunks if kind == b"IDAT"))
    assert len(raw) == height * (1 + width * channels)  # a filter byte + the pixels of every row
    image = pytest.importorskip("matplotlib.image").imread(board / "leaderboard.png")
    assert image.shape[:2] == (height, width)
    # the three bar colours of the palette are all there
    colours = {tuple((image[y, x, :3] * 255).round().astype(int))
               for y in range(0, height, 2) for x in range(0, width, 2)}
    for hex_colour in ("#4e79a7", "#f28e2b", "#59a14f"):
        assert tuple(int(hex_colour[i:i + 2], 16) for i in (1, 3, 5)) in colours


@pytest.mark.e2e
def test_svg_parses_and_has_a_bar_and_an_error_bar_per_model(board):
    root = ET.parse(board / "leaderboard.svg").getroot()
    assert root.tag == f"{SVG}svg"
    bars = [e for e in root.iter(f"{SVG}rect") if e.get("class") == "bar"]
    errors = [e for e in root.iter(f"{SVG}g") if e.get("class") == "errorbar"]
    assert sorted(b.get("data-model") for b in bars) == sorted(NAMES.values())
    assert len(errors) == 3 and all(len(list(e.iter(f"{SVG}line"))) == 3 for e in errors)
    for bar, error in zip(bars, errors):
        value = float(bar.get("data-value"))
        assert value == pytest.approx(EXPECTED[bar.get("data-model").removesuffix(".jsonl")][0])
        assert float(error.get("data-low")) < value < float(error.get("data-high"))
        # taller bars for higher values: the bar's height is value x the plot height
        assert float(bar.get("height")) == pytest.approx(value * 240, abs=0.2)


class _Tables(HTMLParser):
    def __init__(self):
        super().__init__()
        self.tables: list[list[list[str]]] = []
        self._cell: list[str] | None = None

    def handle_starttag(self, tag, attrs):
        if tag == "table" and ("class", "leaderboard") in attrs:
            self.tables.append([])
        elif tag == "tr" and self.tables:
            self.tables[-1].append([])
        elif tag in ("td", "th") and self.tables:
            self._cell = []

    def handle_endtag(self, tag):
        if tag in ("td", "th") and self._cell is not None:
            self.tables[-1][-1].append("".join(self._cell).strip())
            self._cell = None

    def handle_data(self, data):
        if self._cell is not None:
            self._cell.append(data)


@pytest.mark.e2e
def test_html_page_renders_the_table_in_a_headless_browser(board):
    browser = shutil.which("chromium") or shutil.which("chromium-browser")
    if browser is None:
        pytest.skip("chromium is not installed (.ci/run installs it: apt-get install -y chromium)")
    page = board / "leaderboard.html"
    assert "http" not in page.read_text().replace("http://www.w3.org/2000/svg", "")  # self-contained
    with tempfile.TemporaryDirectory() as profile:
        dom = subprocess.run([browser, "--headless", "--no-sandbox", "--disable-gpu", "--disable-background-networking",
                              "--disable-component-update", "--no-first-run", f"--user-data-dir={profile}",
                              "--dump-dom", page.as_uri()], capture_output=True, text=True, timeout=TIMEOUT_S).stdout
    parser = _Tables()
    parser.feed(dom)
    assert len(parser.tables) == 1
    header, *body = parser.tables[0]
    assert header[:3] == ["#", "model", "gpt4_exact_match [95% CI]"]
    assert [row[1] for row in body] == [NAMES[m] for m in ("gpt3-fixed", "gpt3-mixed", "gpt3-verifier")]
    assert body[0][2].startswith("0.680 [") and body[2][2].startswith("0.580 [0.482, 0.672]")
    assert "<svg" in dom and dom.count('class="bar"') == 3


@pytest.mark.e2e
def test_the_console_names_each_file_written(runs, tmp_path, capsys):
    out = tmp_path / "board"
    assert main(["leaderboard", *(str(runs.run_dir(m)) for m in MODELS), "--out", f"{out}/"]) == 0
    printed = capsys.readouterr().out.split("\nwritten:\n", 1)[1].split()
    assert sorted(Path(p).name for p in printed) == sorted(f"leaderboard.{x}" for x in ("md", "csv", "html", "svg", "png"))
    assert all(Path(p).is_file() and "//" not in p for p in printed)


@pytest.mark.e2e
def test_runs_judged_differently_are_refused_unless_allowed(runs, tmp_path, capsys):
    # A copy of one run whose judge used another prompt version (as after a prompt edit).
    other = tmp_path / "other"
    shutil.copytree(runs.run_dir("gpt3-mixed"), other)
    results = next(other.rglob("results_*.json"))
    data = json.loads(results.read_text())
    data["model_name"] = "gpt3-mixed-newprompt"
    data["configs"]["gsm8k_gpt4em"]["metadata"]["judge"]["prompt_version"] = "exact_match@000000000000"
    results.write_text(json.dumps(data))
    args = ["leaderboard", str(runs.run_dir("gpt3-verifier")), str(other), "--out", str(tmp_path / "b")]
    assert main(args) == 2
    err = capsys.readouterr().err
    assert "gsm8k_gpt4em: the runs were judged differently" in err and "prompt version differs" in err
    assert "exact_match@000000000000 (gpt3-mixed-newprompt)" in err and "--allow-mixed" in err
    assert not (tmp_path / "b").exists()  # nothing half-written
    assert main([*args, "--allow-mixed"]) == 0
    assert "judged differently" in (tmp_path / "b" / "leaderboard.md").read_text()


@pytest.mark.e2e
def test_without_matplotlib_the_png_is_skipped_with_the_install_hint(runs, tmp_path):
    code = ("import sys; sys.modules['matplotlib'] = None\n"  # import matplotlib -> ImportError
            "from lm_eval_mathjudge.__main__ import main\n"
            f"sys.exit(main(['leaderboard', {str(runs.run_dir('gpt3-fixed'))!r}, '--out', {str(tmp_path)!r}]))")
    proc = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=TIMEOUT_S)
    assert proc.returncode == 0, proc.stderr
    # this test environment is an editable install of the checkout: the hint installs the extra from it
    assert f"pip install -e '{REPO}[report]'" in proc.stderr
    assert sorted(os.listdir(tmp_path)) == ["leaderboard.csv", "leaderboard.html", "leaderboard.md", "leaderboard.svg"]


@pytest.mark.e2e
def test_console_script_runs_the_leaderboard(runs, tmp_path):
    script = Path(sys.executable).with_name("mathjudge")
    proc = subprocess.run([str(script), "leaderboard", str(runs.out), "--out", str(tmp_path)],
                          capture_output=True, text=True, timeout=TIMEOUT_S)
    assert proc.returncode == 0, proc.stderr
    assert proc.stdout.startswith("# Leaderboard") and (tmp_path / "leaderboard.png").is_file()
    # the built-in predict-only run under runs.out has no scores: it is not a row
    assert {r["model"] for r in _csv(tmp_path)} == set(NAMES.values())


class _Wheel:
    """An installed distribution as a wheel leaves it: no direct_url.json (or one of a plain archive)."""

    def __init__(self, direct_url: str | None):
        self._text = direct_url

    def read_text(self, name):
        return self._text if name == "direct_url.json" else None


@pytest.mark.parametrize("direct_url, expected", [
    (None, "pip install 'lm-eval-mathjudge[report]'"),  # from an index
    ('{"url": "file:///tmp/lm_eval_mathjudge-0.1.0-py3-none-any.whl", "archive_info": {}}',
     "pip install 'lm-eval-mathjudge[report]'"),  # a wheel file
    ('{"url": "file:///home/me/src/lm-eval-mathjudge", "dir_info": {"editable": true}}',
     "pip install -e '/home/me/src/lm-eval-mathjudge[report]'"),  # pip install -e CHECKOUT
])
def test_the_matplotlib_hint_fits_how_the_package_was_installed(monkeypatch, direct_url, expected):
    from importlib import metadata

    from lm_eval_mathjudge.reports import chart

    monkeypatch.setattr(metadata, "distribution", lambda name: _Wheel(direct_url))
    assert expected in chart.png_hint()


@pytest.mark.e2e
def test_both_charts_label_the_y_axis_with_the_metric(board, runs, tmp_path, monkeypatch):
    root = ET.parse(board / "leaderboard.svg").getroot()
    [label] = [t for t in root.iter(f"{SVG}text") if t.get("class") == "ylabel"]
    assert label.text == "gpt4_exact_match (95% CI)" and label.get("transform", "").startswith("rotate(-90")
    pytest.importorskip("matplotlib")
    from matplotlib.figure import Figure

    from lm_eval_mathjudge.reports import chart, leaderboard
    from lm_eval_mathjudge.reports.runs import load_runs

    seen = []
    original = Figure.savefig
    monkeypatch.setattr(Figure, "savefig", lambda fig, *a, **k: (seen.append(fig.axes[0].get_ylabel()),
                                                                 original(fig, *a, **k)))
    chart.png(leaderboard.build(load_runs([str(runs.run_dir(m)) for m in MODELS])), str(tmp_path / "c.png"))
    assert seen == ["gpt4_exact_match (95% CI)"]
