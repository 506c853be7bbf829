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
COLUMNS = 200
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


def run_on_a_terminal(argv: list[str], env: dict[str, str], timeout: float = 600,
                      columns: int = COLUMNS) -> tuple[int, str]:
    import fcntl
    import pty
    import struct
    import termios

    master, slave = pty.openpty()
    # a new pseudo-terminal is 0 columns wide, and tqdm draws a bar as wide as the terminal: nothing at all
    fcntl.ioctl(slave, termios.TIOCSWINSZ, struct.pack("HHHH", 50, columns, 0, 0))
    proc = subprocess.Popen(argv, stdin=slave, stdout=slave, stderr=slave, env=run_env({**env, "COLUMNS": str(columns)}),
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


JUDGING = re.compile(r"^(judging[^:]*): (\d+)/(\d+), (\d+) failed, (USD unknown|\d+\.\d{4} USD)(.*)$")
JUDGE_CONCURRENCY, JUDGE_LATENCY = 4, 0.05
NARROW = 80  # a terminal as narrow as people use: the counts must fit before the bar


def frames(raw: str) -> list[str]:
    """Every state a line was drawn in, in order (each ``\\r`` or ``\\n`` ends one), escape sequences dropped."""
    return [_CSI.sub("", frame).rstrip() for frame in re.split(r"[\r\n]", raw) if frame.strip()]


def judging_frames(raw: str) -> list[re.Match]:
    return [m for m in (JUDGING.match(f) for f in frames(raw)) if m]


@pytest.mark.e2e
def test_one_judging_line_from_the_first_streamed_call_with_cached_replies_apart(tmp_path):
    """A model that takes its time, a judge streaming beside it, an 80-column terminal: the judging line
    counts requests while the model still generates, counts each once up to an exact total, shows failures,
    spend and a rate no faster than the judge can answer, fits the width; a second run, all from the
    cache, counts its replies as cached and shows no rate."""
    if not Path(LM_EVAL).is_file():
        pytest.skip("the lm_eval console script of this environment is not found")
    runs = []
    with ChatCompletionsServer(model, latency=0.2) as lm, \
            ChatCompletionsServer(exact_match_judge, latency=JUDGE_LATENCY) as judge:
        for _ in range(2):
            runs.append(run_on_a_terminal(
                [LM_EVAL, "--model", "local-chat-completions", "--model_args",
                 f"model=loopback-model,base_url={lm.chat_url},num_concurrent=2,max_retries=1", "--apply_chat_template",
                 "--tasks", "gsm8k_gpt4em", "--limit", "20", "--output_path", str(tmp_path / "out"),
                 "--metadata", json.dumps({"judge_base_url": judge.url, "judge_concurrency": JUDGE_CONCURRENCY})],
                {"MATHJUDGE_DATA_DIR": str(SHARED_DATA), "MATHJUDGE_CACHE_DIR": str(tmp_path / "cache"),
                 "OPENAI_API_KEY": "sk-loopback"}, columns=NARROW))
    for code, raw in runs:
        assert code == 0, "\n".join(screen(raw)[-40:])
        drawn = frames(raw)
        lines = judging_frames(raw)
        assert lines, "no judging line:\n" + "\n".join(drawn[-40:])
        assert all(len(m[0]) <= NARROW for m in lines)
        assert [f for f in drawn if f.startswith("judging ")] == [m[0] for m in lines]  # every state drawn whole
        # requests are counted on the line while the model generates, before lm-eval's bar is full
        generated = next(i for i, f in enumerate(drawn) if f.startswith("Requesting API: 100%"))
        streamed = [m for m in lines if drawn.index(m[0]) < generated]
        assert streamed and streamed[0][1] == "judging (streamed)" and max(int(m[2]) for m in streamed) > 0
        counts = [(int(m[2]), int(m[3])) for m in lines]
        assert all(done <= total for done, total in counts), counts
        assert [done for done, _ in counts] == sorted(done for done, _ in counts)  # never counts back
        assert counts[-1] == (20, 20) and lines[-1][4] == "0" and lines[-1][1] == "judging gsm8k_gpt4em"
        shown = screen(raw)  # what stays on the screen: the finished line once, right above the cost table
        finished = [i for i, line in enumerate(shown) if JUDGING.match(line)]
        assert len(finished) == 1 and shown[finished[0] + 1].startswith("judge cost"), "\n".join(shown[-30:])
    fresh, again = (judging_frames(raw) for _, raw in runs)
    rates = [float(r) for m in fresh for r in re.findall(r"([\d.]+) req/s", m[6])]
    assert rates and max(rates) <= 1.2 * JUDGE_CONCURRENCY / JUDGE_LATENCY, rates  # no faster than the judge answers
    assert any("ETA " in m[6] for m in fresh) and not any("cached" in m[6] for m in fresh)
    assert "20 cached" in again[-1][6] and not any("req/s" in m[6] or "ETA" in m[6] for m in again)
