"""``mathjudge cache --merge``: per-host judge caches folded into one, so a rerun anywhere pays nothing twice
(issue 20). Sources are only read; every row is checked; damaged sources give what can be read."""

from __future__ import annotations

import hashlib
import json
import os
import sqlite3
from pathlib import Path

import pytest

from lm_eval_mathjudge.core import data_sets
from lm_eval_mathjudge.judging.cache import FILE_NAME, ReplyCache, request_key
from lm_eval_mathjudge.core.types import Reply
from tests._helpers import CACHE_SHAPES, older_version_stores, write_cache_file
from tests.conftest import DATASETS, data_rows
from tests.e2e import CANARY_KEY, run_lm_eval, run_mathjudge
from tests.loopback import ChatCompletionsServer

pytestmark = pytest.mark.e2e

N = 3
WRONG = "999999"
JUDGE = "openai:gpt-4-turbo-2024-04-09"


def _judge(body: dict) -> str:
    student = body["messages"][-1]["content"].split("### Student's solution", 1)[1]
    right = WRONG not in student
    return (f"Error Analysis: the student's final answer {'agrees' if right else 'disagrees'} with the "
            f"reference.\nFinal Verdict: {'Correct' if right else 'Incorrect'}")


def _generations(data_dir: Path, path: Path) -> None:
    with open(path, "w", encoding="utf-8") as fh:
        for ds in DATASETS:
            for i, row in enumerate(data_rows(data_dir, ds)):
                answer = WRONG if i % 3 == 0 else "42"
                fh.write(json.dumps({"question": row[data_sets.get(ds).question],
                                     "response": f"So the result is {answer}.\n\\boxed{{{answer}}}"}) + "\n")


def test_caches_of_two_hosts_merged_make_a_rerun_of_both_free(data_slice, tmp_path):
    data_dir = data_slice(N)
    generations = tmp_path / "generations.jsonl"
    _generations(data_dir, generations)

    def run(cache: Path, tasks: str, limit: int | None, name: str):
        args = ["--model", "mathjudge-replay", "--model_args", f"path={generations}", "--tasks", tasks,
                "--metadata", json.dumps({"judge_base_url": server.url})]
        if limit:
            args += ["--limit", str(limit)]
        done = run_lm_eval(args, {"MATHJUDGE_DATA_DIR": str(data_dir), "MATHJUDGE_CACHE_DIR": str(cache),
                                  "OPENAI_API_KEY": CANARY_KEY}, tmp_path / name)
        assert done.returncode == 0, done.stderr[-3000:]
        return done

    with ChatCompletionsServer(_judge) as server:
        # Two hosts, each with its own cache, judging overlapping parts of the work.
        run(tmp_path / "host-a", "gsm8k_gpt4em,math500_gpt4em", 2, "out-a")
        paid_a = server.call_count
        run(tmp_path / "host-b", "math500_gpt4em,aime24_gpt4em", None, "out-b")
        assert paid_a == 4 and server.call_count == 4 + 2 * N
        merged = run_mathjudge(["cache", "--merge", str(tmp_path / "host-a"), str(tmp_path / "host-b"),
                                "--into", str(tmp_path / "merged")], {})
        assert merged.returncode == 0, merged.stdout + merged.stderr
        assert f"{tmp_path / 'host-a' / FILE_NAME}: 4 replies read, 4 added, 0 already there" in merged.stdout
        assert f"{tmp_path / 'host-b' / FILE_NAME}: 6 replies read, 4 added, 2 already there" in merged.stdout
        server.reset()
        again = run(tmp_path / "merged", "gsm8k_gpt4em,math500_gpt4em,aime24_gpt4em", 2, "out-again")
        assert server.call_count == 0  # everything either host paid for is answered by the merged cache
    first = json.loads(next((tmp_path / "out-a").rglob("results_*.json")).read_text())["results"]
    results = again.results()["results"]
    for task in ("gsm8k_gpt4em", "math500_gpt4em"):  # the same verdicts as when they were paid for
        assert results[task]["gpt4_exact_match,none"] == first[task]["gpt4_exact_match,none"] == 0.5
    assert results["aime24_gpt4em"]["gpt4_exact_match,none"] == 0.5


def _key(n: int) -> str:
    return request_key({"n": n})


def _fill(folder: Path, rows: dict[int, str]) -> ReplyCache:
    cache = ReplyCache(str(folder))
    for n, text in rows.items():
        cache.put(_key(n), Reply(text=text, usage={"total_tokens": n}), JUDGE)
    return cache


def _merge(tmp_path: Path, *sources: Path):
    return run_mathjudge(["cache", "--merge", *map(str, sources), "--into", str(tmp_path / "into")], {})


def _replies(folder: Path) -> dict[str, str]:
    with sqlite3.connect(folder / FILE_NAME) as db:
        return dict(db.execute("SELECT key, text FROM replies"))


def test_the_target_keeps_its_reply_the_first_source_wins_and_sources_are_not_changed(tmp_path):
    _fill(tmp_path / "into", {1: "target's reply"}).close()
    _fill(tmp_path / "a", {1: "a's reply", 2: "a's reply"}).close()
    _fill(tmp_path / "b", {2: "b's reply", 3: "b's reply"}).close()
    before = {p: p.read_bytes() for p in (tmp_path / "a").iterdir()}
    done = _merge(tmp_path, tmp_path / "a", tmp_path / "b")
    assert done.returncode == 0, done.stdout + done.stderr
    assert _replies(tmp_path / "into") == {_key(1): "target's reply", _key(2): "a's reply", _key(3): "b's reply"}
    assert "1 with a different reply; the one already there is kept" in done.stdout
    assert {p: p.read_bytes() for p in (tmp_path / "a").iterdir()} == before
    assert _merge(tmp_path, tmp_path / "a", tmp_path / "b").stdout.count(" 0 added") == 2  # a rerun adds nothing


def test_replies_still_in_the_write_ahead_log_of_a_live_cache_are_merged(tmp_path):
    live = _fill(tmp_path / "live", {n: f"reply {n}" for n in range(20)})  # open: its WAL is not folded back
    try:
        assert os.path.getsize(tmp_path / "live" / (FILE_NAME + "-wal")) > 0
        done = _merge(tmp_path, tmp_path / "live")
    finally:
        live.close()
    assert done.returncode == 0, done.stdout + done.stderr
    assert len(_replies(tmp_path / "into")) == 20


def test_rows_that_fail_their_checks_are_skipped_and_counted(tmp_path):
    _fill(tmp_path / "a", {1: "good"}).close()
    with sqlite3.connect(tmp_path / "a" / FILE_NAME) as db:
        rows = [("not-a-key", "x", "{}", None, JUDGE, 1.0),  # no key this package makes
                (_key(2), "x", "not json", None, JUDGE, 1.0),
                (_key(3), "x", "[1, 2]", None, JUDGE, 1.0),  # usage is an object
                (_key(4), "x", "{}", None, "", 1.0),  # no judge
                (_key(5), "x", "{}", None, JUDGE, "yesterday")]
        db.executemany("INSERT INTO replies (key, text, usage, finish_reason, judge, created) VALUES (?, ?, ?, ?, ?, ?)", rows)
    done = _merge(tmp_path, tmp_path / "a")
    assert done.returncode == 1
    assert "1 replies read, 1 added" in done.stdout and "5 rows failed their checks and were skipped" in done.stdout
    assert list(_replies(tmp_path / "into")) == [_key(1)]


def test_damaged_or_missing_sources_give_what_can_be_read_with_a_clear_message(tmp_path):
    _fill(tmp_path / "good", {n: f"reply {n}" for n in range(3)}).close()
    for name in ("pages", "torn"):
        _fill(tmp_path / name, {n: "long reply " * 400 + str(n) for n in range(100, 400)}).close()
    data = bytearray((tmp_path / "pages" / FILE_NAME).read_bytes())
    middle = len(data) // 4096 // 2
    data[middle * 4096:(middle + 3) * 4096] = b"\xa5" * 3 * 4096  # three pages overwritten (a bad disk block)
    (tmp_path / "pages" / FILE_NAME).write_bytes(bytes(data))
    torn = (tmp_path / "torn" / FILE_NAME).read_bytes()
    (tmp_path / "torn" / FILE_NAME).write_bytes(torn[: len(torn) // 2])  # cut in half (a copy that stopped)
    (tmp_path / "garbage").mkdir()
    (tmp_path / "garbage" / FILE_NAME).write_bytes(hashlib.sha256(b"x").digest() * 200)
    sources = ("good", "pages", "torn", "garbage", "nowhere")
    done = _merge(tmp_path, *(tmp_path / s for s in sources))
    assert done.returncode == 1
    lines = dict(zip(sources, done.stdout.splitlines()))
    assert "3 replies read, 3 added" in lines["good"] and "NOT READ WHOLE" not in lines["good"]
    assert "NOT READ WHOLE: it is damaged (PRAGMA quick_check:" in lines["pages"]
    assert "rows in damaged pages could not be read" in lines["pages"] and "left as it is" in lines["pages"]
    salvaged = int(lines["pages"].split(": ", 1)[1].split(" replies read")[0])
    assert 290 <= salvaged < 300  # all but the rows in the three bad pages
    assert "NOT READ WHOLE: it is damaged" in lines["torn"] and "reading stopped at damage" in lines["torn"]
    assert "NOT READ WHOLE: it is not a readable judge cache" in lines["garbage"]
    assert "NOT READ WHOLE: no judge cache there" in lines["nowhere"]
    assert len(_replies(tmp_path / "into")) == 3 + salvaged
    assert "Traceback" not in done.stdout + done.stderr
    assert (tmp_path / "pages" / FILE_NAME).read_bytes() == bytes(data)  # sources left as they were


@pytest.mark.parametrize("shape", [*CACHE_SHAPES, "this version"])
def test_a_merge_carries_the_snapshots_of_a_cache_file_of_any_version(tmp_path, shape):
    rows = [(_key(n), f"reply {n}", f"gpt-4o-2024-0{n}-06", f"fp_{n}") for n in (1, 2)] + [(_key(3), "reply 3",
                                                                                              None, None)]
    if shape == "this version":
        source = ReplyCache(str(tmp_path / "source"))
        for key, text, model, fingerprint in rows:
            source.put(key, Reply(text, {}, "stop", model, fingerprint), JUDGE)
        source.close()
    else:
        write_cache_file(tmp_path / "source", shape, rows)
    kept = shape == "this version" or CACHE_SHAPES[shape][1]
    before = {p.name: p.read_bytes() for p in (tmp_path / "source").iterdir()}
    done = _merge(tmp_path, tmp_path / "source")
    assert done.returncode == 0, done.stdout + done.stderr
    assert {p.name: p.read_bytes() for p in (tmp_path / "source").iterdir()} == before  # only read
    merged = ReplyCache(str(tmp_path / "into"))
    try:
        assert [(merged.get(k).model, merged.get(k).fingerprint) for k, *_ in rows] == \
            [(m, f) if kept else (None, None) for _, _, m, f in rows]
    finally:
        merged.close()
    older_version_stores(tmp_path / "into", _key(4), "reply 4")  # the merged file takes an older version's insert
