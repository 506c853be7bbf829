"""One lm_eval subprocess with its own resource usage: wall time, CPU time and peak RSS.

On a shared machine the wall time of a run swings with the load of others; the CPU
time the process itself spent (user + system, from ``os.wait4``) and its peak
resident memory do not. The command is ``_common.run_replay``'s.
"""

from __future__ import annotations

import os
import shutil
import subprocess
import threading
import time
from dataclasses import dataclass
from pathlib import Path

from _common import REPO, lm_eval_exe


@dataclass
class Measured:
    run_dir: Path
    exit_code: int
    wall_s: float
    cpu_s: float  # user + system of the lm_eval process (and any child it waited for)
    max_rss_mib: float
    log: Path


def replay_measured(name: str, task: str, replay: Path, n: int, out_dir: Path, env: dict[str, str],
                    extra: list[str], timeout: float, prefix: tuple[str, ...] = ()) -> Measured:
    """``lm_eval --model mathjudge-replay`` on the first n docs of task, into out_dir/name (emptied first)."""
    run_dir = out_dir / name
    shutil.rmtree(run_dir, ignore_errors=True)
    run_dir.mkdir(parents=True)
    cmd = [*prefix, lm_eval_exe(), "--model", "mathjudge-replay", "--model_args", f"path={replay}",
           "--tasks", task, "--limit", str(n), "--output_path", str(run_dir), "--log_samples", *extra]
    log_path = out_dir / f"{name}.log"
    print(f"[{name}] {' '.join(cmd)}", flush=True)
    with open(log_path, "w", encoding="utf-8") as log:
        start = time.perf_counter()
        proc = subprocess.Popen(cmd, env=env, stdout=log, stderr=subprocess.STDOUT, cwd=str(REPO))
        timer = threading.Timer(timeout, proc.kill)
        timer.start()
        try:
            _, status, usage = os.wait4(proc.pid, 0)
        finally:
            timer.cancel()
        wall = time.perf_counter() - start
    proc.returncode = os.waitstatus_to_exitcode(status)  # reaped here: Popen must not wait again
    return Measured(run_dir, proc.returncode, wall, usage.ru_utime + usage.ru_stime, usage.ru_maxrss / 1024, log_path)
