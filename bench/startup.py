"""What the start-up hook costs every Python process: `python -c pass` in a plain virtualenv and in one
with the plugin installed (wheel), measured side by side in one run.

Two fresh virtualenvs are built in a temporary folder (no pip in either; the plugin goes in with
`pip --python ... install --no-deps` of the wheel, so only its .pth file and hook module differ from the plain one).
Then `python -c pass` runs in each in turn, N times, and the medians and their ratio are printed, with
the hook module's own import time from `-X importtime`.

    python bench/startup.py [--n 60]
"""

from __future__ import annotations

import argparse
import statistics
import subprocess
import sys
import tempfile
import time
import venv
from pathlib import Path

REPO = Path(__file__).resolve().parents[1]
HOOK_MODULE = "lm_eval_mathjudge_hook"


def make_venvs(root: Path) -> tuple[Path, Path]:
    plain, plugin = root / "plain", root / "plugin"
    for folder in (plain, plugin):
        venv.EnvBuilder(with_pip=False).create(folder)
    pip = [sys.executable, "-m", "pip"]
    subprocess.run([*pip, "wheel", "-q", "--no-deps", "--no-build-isolation", "-w", str(root), str(REPO)],
                   check=True, capture_output=True)
    [wheel] = root.glob("*.whl")
    subprocess.run([*pip, "--python", str(plugin / "bin" / "python"), "install", "-q", "--no-deps", str(wheel)],
                   check=True, capture_output=True)
    return plain / "bin" / "python", plugin / "bin" / "python"


def once(python: Path, *args: str) -> float:
    start = time.perf_counter()
    subprocess.run([str(python), *args, "-c", "pass"], check=True)
    return time.perf_counter() - start


def hook_import_us(python: Path, n: int) -> float:
    values = []
    for _ in range(n):
        err = subprocess.run([str(python), "-X", "importtime", "-c", "pass"], capture_output=True, text=True,
                             check=True).stderr
        values.extend(int(line.split("|")[1]) for line in err.splitlines() if line.rstrip().endswith(HOOK_MODULE))
    return statistics.median(values)


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--n", type=int, default=60)
    n = parser.parse_args().n
    with tempfile.TemporaryDirectory() as tmp:
        plain, plugin = make_venvs(Path(tmp))
        for python in (plain, plugin):  # write the bytecode caches
            once(python)
        times: dict[str, list[float]] = {"plain": [], "plugin": []}
        for _ in range(n):  # alternate, so a slow spell of the machine hits both
            times["plain"].append(once(plain))
            times["plugin"].append(once(plugin))
        ratios = [b / a for a, b in zip(times["plain"], times["plugin"])]
        hook_ms = hook_import_us(plugin, min(n, 20)) / 1000
    print(f"| `python -c pass` | median of {n} |\n|---|---:|")
    print(f"| plain virtualenv | {statistics.median(times['plain']) * 1000:.1f} ms |")
    print(f"| with the plugin installed | {statistics.median(times['plugin']) * 1000:.1f} ms |")
    print(f"| ratio, median of pairs | {statistics.median(ratios):.3f} |")
    print(f"| hook module import, `-X importtime` | {hook_ms:.2f} ms |")


if __name__ == "__main__":
    main()
