"""Start-up cost of the .pth hook, measured in fresh interpreters.

Every Python start in an environment with the plugin installed runs the hook,
so it must stay in the low milliseconds. This times, in N fresh interpreters
each, (a) a bare start (``-S -c pass``) and (b) a start that runs exactly what
the .pth line runs, and (c) the hook's own import time from ``-X importtime``. Both skip site-packages' other .pth files so that only the
hook differs. With bytecode caching allowed (as after a normal install).

    python bench/startup.py [--n 40]
"""

from __future__ import annotations

import argparse
import os
import statistics
import subprocess
import sys
import time
from pathlib import Path

REPO = Path(__file__).resolve().parents[1]
HOOK = (REPO / "lm_eval_mathjudge_startup.pth").read_text().strip()


def median_ms(code: str, n: int) -> float:
    env = {k: v for k, v in os.environ.items() if k != "PYTHONDONTWRITEBYTECODE"}
    env["PYTHONPATH"] = str(REPO)
    times = []
    for _ in range(n):
        start = time.perf_counter()
        subprocess.run([sys.executable, "-S", "-c", code], env=env, check=True)
        times.append(time.perf_counter() - start)
    return statistics.median(times) * 1000


def hook_import_us(n: int) -> float:
    """Median cumulative import time of the hook module, from ``-X importtime``."""
    env = {k: v for k, v in os.environ.items() if k != "PYTHONDONTWRITEBYTECODE"}
    env["PYTHONPATH"] = str(REPO)
    values = []
    for _ in range(n):
        err = subprocess.run([sys.executable, "-X", "importtime", "-c", "import os; " + HOOK], env=env,
                             capture_output=True, text=True, check=True).stderr
        line = next(l for l in err.splitlines() if l.rstrip().endswith("lm_eval_mathjudge._startup"))
        values.append(int(line.split("|")[1]))
    return statistics.median(values)


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--n", type=int, default=40)
    n = parser.parse_args().n
    median_ms(HOOK, 3)  # warm the bytecode cache
    bare = median_ms("import os", n)  # site imports os anyway; -S would not
    hooked = median_ms("import os; " + HOOK, n)
    print(f"| interpreter start | median of {n} |\n|---|---:|")
    print(f"| bare (`python -S -c 'import os'`) | {bare:.1f} ms |")
    print(f"| with the mathjudge hook | {hooked:.1f} ms |")
    print(f"| difference | {hooked - bare:+.1f} ms |")
    print(f"| hook import, `-X importtime` cumulative | {hook_import_us(n) / 1000:.2f} ms |")


if __name__ == "__main__":
    main()
