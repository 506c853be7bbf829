"""Make the README's example leaderboard (docs/leaderboard_example.*) from the example data, offline.

Three replayed "models" (the real GPT-3 175B + verifier GSM8K solutions and two
variants with some final answers changed; see tests/reports_fixtures.py, which the
test suite uses too) are judged by the real lm_eval CLI with the local judge, then
`mathjudge leaderboard` and `mathjudge diff` run on them.

    MJ_TEST_DATA=examples/data python examples/leaderboard_example.py   # from the repository root
"""

from __future__ import annotations

import shutil
import subprocess
import sys
import tempfile
from pathlib import Path

REPO = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(REPO))

from tests.reports_fixtures import MODELS, ThreeRuns  # noqa: E402  -- the same runs the tests check


def main() -> int:
    docs = REPO / "docs"
    docs.mkdir(exist_ok=True)
    with tempfile.TemporaryDirectory() as tmp:
        runs = ThreeRuns(Path(tmp))
        runs.make(builtin=False)
        board = Path(tmp) / "board"
        mathjudge = str(Path(sys.executable).with_name("mathjudge"))
        subprocess.run([mathjudge, "leaderboard", *(str(runs.run_dir(m)) for m in MODELS), "--out", str(board)],
                       check=True, stdout=subprocess.DEVNULL)
        for suffix in ("md", "csv", "svg", "png"):
            shutil.copy(board / f"leaderboard.{suffix}", docs / f"leaderboard_example.{suffix}")
        diff = subprocess.run([mathjudge, "diff", str(runs.run_dir("gpt3-fixed")), str(runs.run_dir("gpt3-verifier"))],
                              check=True, capture_output=True, text=True).stdout
        (docs / "diff_example.md").write_text(diff)
    print(f"written {docs}/leaderboard_example.{{md,csv,svg,png}} and {docs}/diff_example.md")
    return 0


if __name__ == "__main__":
    sys.exit(main())
