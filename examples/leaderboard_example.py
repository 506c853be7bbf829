"""The example leaderboard, from the shipped data, offline, into a folder you name.

Three replayed "models" (the real GPT-3 175B + verifier GSM8K solutions and two variants
with some final answers changed; tests/reports_fixtures.py makes the same ones for the
test suite) are judged by the real lm_eval CLI with the local judge, then `mathjudge
leaderboard` and `mathjudge diff` run on them. Nothing is written outside OUT.

    python examples/leaderboard_example.py OUT                 # OUT/replays, OUT/runs, OUT/board, OUT/diff.md
    python examples/leaderboard_example.py OUT --replays-only  # only the three replay files, OUT/replays/*.jsonl

Run it from the repository root (it reads examples/data).
"""

from __future__ import annotations

import argparse
import json
import os
import subprocess
import sys
from pathlib import Path

REPO = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(REPO))

from tests.reports_fixtures import MODELS, variants  # noqa: E402  -- the same variants the tests check


def write_replays(folder: Path) -> None:
    folder.mkdir(parents=True, exist_ok=True)
    for name, rows in variants().items():
        with open(folder / f"{name}.jsonl", "w", encoding="utf-8") as fh:
            fh.writelines(json.dumps(r, ensure_ascii=False) + "\n" for r in rows)


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("out", type=Path, help="folder to write into (created if missing)")
    parser.add_argument("--replays-only", action="store_true", help="write only OUT/replays/*.jsonl")
    args = parser.parse_args(argv)
    out = args.out.resolve()
    write_replays(out / "replays")
    if args.replays_only:
        print(f"written {len(MODELS)} replay files in {args.out / 'replays'}")
        return 0
    bin_dir = Path(sys.executable).parent
    env = {**os.environ, "MATHJUDGE_DATA_DIR": str(REPO / "examples" / "data"), "HF_HUB_OFFLINE": "1"}
    for name in MODELS:  # model=NAME: the name lm-eval records, and the leaderboard shows
        subprocess.run([str(bin_dir / "lm_eval"), "--model", "mathjudge-replay", "--model_args",
                        f"path={name}.jsonl,model={name}",
                        "--tasks", "gsm8k_gpt4em", "--metadata", '{"judge_backend": "local"}', "--log_samples",
                        "--output_path", str(out / "runs" / name)], cwd=out / "replays", env=env, check=True,
                       stdout=subprocess.DEVNULL)
    runs = [str(out / "runs" / m) for m in MODELS]
    subprocess.run([str(bin_dir / "mathjudge"), "leaderboard", *runs, "--out", str(out / "board")], check=True,
                   stdout=subprocess.DEVNULL)
    diff = subprocess.run([str(bin_dir / "mathjudge"), "diff", runs[1], runs[0]], check=True, capture_output=True,
                          text=True).stdout
    (out / "diff.md").write_text(diff, encoding="utf-8")
    print(f"written {args.out / 'board'}/leaderboard.{{md,csv,html,svg,png}} and {args.out / 'diff.md'}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
