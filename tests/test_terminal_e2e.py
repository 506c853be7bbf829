"""What a user's terminal shows during a run: the real `lm_eval` command on a pseudo-terminal (so lm-eval's
and our progress bars draw as they do for a person), its bytes played back on a small screen model."""

from __future__ import annotations

import json
import os
import re
import select
import subprocess
import time
from pathlib import Path

import pytest

from tests.conftest import SHARED_DATA, read_jsonl
from tests.e2e import exact_match_judge, question_of, run_env
from tests.loopback import ChatCompletionsServer

LM_EVAL = str(Path(os.environ.get("VIRTUAL_ENV", "")) / "bin" / "lm_eval")
_CSI = re.compile(r"\x1b\[(\d*)([A-Za-z])")


def screen(raw: str) -> list[str]:
    """The lines a terminal ends up showing: ``\\r`` returns to the line's start and overwrites, ``\\n`` goes
    down, ESC[nA goes up n lines (tqdm's bars), other escape sequences are dropped."""
    lines, row, col = [""], 0, 0
    pos = 0
    while pos < len(raw):
        match = _CSI.match(raw, pos)
        if match:
            if match[2] == "A":
                row = max(0, row - int(match[1] or 1))
            pos = match.end()
            continue
        char = raw[pos]
        pos += 1
        if char == "\r":
            col = 0
        elif char == "\n":
            row, col = row + 1, 0
            if row == len(lines):
                lines.append("")
        else:
            line = lines[row].ljust(col)
            lines[row] = line[:col] + char + line[col + 1:]
            col += 1
    return [line.rstrip() for line in lines]


def run_on_a_terminal(argv: list[str], env: dict[str, str], timeout: float = 600) -> tuple[int, str]:
    import pty

    master, slave = pty.openpty()
    proc = subprocess.Popen(argv, stdin=slave, stdout=slave, stderr=slave, env=run_env({**env, "COLUMNS": "200"}),
                            close_fds=True)
    os.close(slave)
    out, deadline = b"", time.monotonic() + timeout
    try:
        while time.monotonic() < deadline:
            ready, _, _ = select.select([master], [], [], 1)
            if ready:
                try:
                    data = os.read(master, 65536)
                except OSError:  # the child closed the terminal
                    break
                if not data:
                    break
                out += data
            elif proc.poll() is not None:
                break
        return proc.wait(timeout=60), out.decode("utf-8", "replace")
    finally:
        os.close(master)


@pytest.mark.e2e
def test_our_notices_start_on_a_line_of_their_own_beside_lm_evals_bars(tmp_path):
    """A model that takes its time and a judge streaming beside it (loopback servers): the notice that the
    generations are kept comes while lm-eval's bar is drawn, and must not run on from the bar's line."""
    if not Path(LM_EVAL).is_file():
        pytest.skip("the lm_eval console script of this environment is not found")
    with ChatCompletionsServer(model, latency=0.2) as lm, ChatCompletionsServer(exact_match_judge, latency=0.05) as judge:
        code, raw = run_on_a_terminal(
            [LM_EVAL, "--model", "local-chat-completions", "--model_args",
             f"model=loopback-model,base_url={lm.chat_url},num_concurrent=2,max_retries=1", "--apply_chat_template",
             "--tasks", "gsm8k_gpt4em", "--limit", "20", "--log_samples", "--output_path", str(tmp_path / "out"),
             "--metadata", json.dumps({"judge_base_url": judge.url, "judge_concurrency": 4})],
            {"MATHJUDGE_DATA_DIR": str(SHARED_DATA), "MATHJUDGE_CACHE_DIR": str(tmp_path / "cache"),
             "OPENAI_API_KEY": "sk-loopback"})
    shown = screen(raw)
    assert code == 0, "\n".join(shown[-40:])
    ours = [line for line in shown if "mathjudge: " in line]
    assert any("`mathjudge resume " in line for line in ours), "\n".join(shown)
    assert any("each generation of the judged tasks is saved" in line for line in ours), "\n".join(shown)
    glued = [line for line in ours if not line.startswith("mathjudge: ")]
    assert not glued, "notices that run on from another line:\n" + "\n".join(glued)
    assert any("gpt4_exact_match" in line for line in shown)  # the run went to its end, its table shown


ROWS = {r["question"]: r["answer"].split("####")[-1].strip().replace(",", "")
        for r in read_jsonl(SHARED_DATA / "gsm8k" / "test.jsonl")}


def model(body: dict) -> str:
    return f"Adding up the amounts step by step.\n\\boxed{{{ROWS[question_of(body)]}}}"


def test_a_notice_written_while_a_bar_is_drawn_starts_its_own_line(monkeypatch):
    """The seam itself, on the screen model: a bar drawn (as lm-eval's is, by a model that shows it before its
    first reply), then our notice, then the bar goes on."""
    import io

    from tqdm import tqdm

    from lm_eval_mathjudge.calls.workers import notice

    err = io.StringIO()
    monkeypatch.setattr("sys.stderr", err)
    with tqdm(total=10, desc="Running generate_until requests", file=err, mininterval=0, ascii=True) as bar:
        bar.update(3)
        notice("mathjudge: each generation of the judged tasks is saved in FILE as it finishes")
        bar.update(7)
    shown = screen(err.getvalue())
    assert "mathjudge: each generation of the judged tasks is saved in FILE as it finishes" in shown, shown
    assert any(line.startswith("Running generate_until requests: 100%") for line in shown), shown
