"""Judge drift: the model version the judge's API reports is recorded, and the leaderboard refuses to rank
runs whose judges reported different versions (through the real openai SDK and lm_eval CLI)."""

from __future__ import annotations

import contextlib
import json
import sqlite3

import pytest

from lm_eval_mathjudge.__main__ import main
from lm_eval_mathjudge.core.data_sets import gsm8k_answer
from lm_eval_mathjudge.core.types import Reply, clean_reply
from lm_eval_mathjudge.judging.cache import FILE_NAME, REPLY_COLUMNS, ReplyCache, request_key
from tests._helpers import CACHE_SHAPES, older_version_stores, write_cache_file
from tests.conftest import read_jsonl, write_data_slice

TASK = "gsm8k_gpt4em"


def _judged(tmp, root, docs, name, snapshot, cache=None, server=None):
    from tests.e2e import CANARY_KEY, exact_match_judge, run_lm_eval
    from tests.loopback import ChatCompletionsServer

    replay = tmp / f"{name}.jsonl"
    replay.write_text("".join(json.dumps({"question": d["question"],
                                          "response": f"So \\boxed{{{gsm8k_answer(d['answer'])}}}"}) + "\n"
                              for d in docs))
    judge = server or ChatCompletionsServer()
    judge.responder = lambda body: {"content": exact_match_judge(body), "model": snapshot}
    with judge if server is None else contextlib.nullcontext(judge):
        run = run_lm_eval(["--model", "mathjudge-replay", "--model_args", f"path={replay}", "--tasks", TASK,
                           "--log_samples", "--metadata",
                           json.dumps({"judge_base_url": judge.url, "judge_preflight": False, "judge_model": "gpt-4o"})],
                          {"MATHJUDGE_DATA_DIR": str(root), "MATHJUDGE_CACHE_DIR": str(tmp / f"cache-{cache or name}"),
                           "OPENAI_API_KEY": CANARY_KEY}, tmp / name)
    assert run.returncode == 0, run.stderr[-3000:]
    return run


@pytest.mark.e2e
def test_reported_snapshots_are_recorded_and_mixed_ones_are_not_ranked(tmp_path, capsys):
    root = write_data_slice(tmp_path / "data", 3)
    docs = read_jsonl(root / "gsm8k" / "test.jsonl")
    a = _judged(tmp_path, root, docs, "a", "gpt-4o-2024-08-06")
    b = _judged(tmp_path, root, docs, "b", "gpt-4o-2024-11-20")
    c = _judged(tmp_path, root, docs, "c", "gpt-4o-2024-08-06")
    meta = a.results()["configs"][TASK]["metadata"]["judge"]
    assert meta["model"] == "gpt-4o" and meta["run"]["reported_models"] == {"gpt-4o-2024-08-06": 3}
    assert meta["run"]["alias"] is True and meta["run"]["snapshots"] == ["gpt-4o-2024-08-06"]
    assert "judge_model gpt-4o (openai) is an alias" in a.stderr and "judge_model=gpt-4o-2024-08-06" in a.stderr
    assert a.stderr.count("is an alias the provider can move") == 1  # once per run
    from tests.loopback import ChatCompletionsServer

    with ChatCompletionsServer() as server:  # one endpoint, so the rerun's requests have the first run's keys
        _judged(tmp_path, root, docs, "d", "gpt-4o-2024-08-06", server=server)
        rerun = _judged(tmp_path, root, docs, "d-rerun", "gpt-4o-2024-11-20", cache="d", server=server)
    run = rerun.results()["configs"][TASK]["metadata"]["judge"]["run"]
    assert "reported_models" not in run and run["used_models"] == {"gpt-4o-2024-08-06": 3}
    assert run["cache_hits"] == 3 and run["snapshots"] == ["gpt-4o-2024-08-06"]

    assert main(["leaderboard", str(a.out_dir), str(b.out_dir), "--out", str(tmp_path / "board")]) != 0
    err = capsys.readouterr().err
    assert "judge snapshot" in err and "gpt-4o-2024-08-06" in err and "gpt-4o-2024-11-20" in err
    assert main(["leaderboard", str(a.out_dir), str(b.out_dir), "--out", str(tmp_path / "board"),
                 "--allow-mixed"]) == 0
    assert main(["leaderboard", str(a.out_dir), str(c.out_dir), "--out", str(tmp_path / "board")]) == 0


@pytest.mark.parametrize("reported, kept", [
    ("gpt-4o-2024-08-06", "gpt-4o-2024-08-06"),
    ("x" * 500, "x" * 200),                                   # the provider's text, bounded
    ("sk-proj-abcdefghijklmnopqrstuvwxyz0123456789", None),   # never a credential in the results
])
def test_a_reported_model_version_is_cleaned_like_the_reply(reported, kept):
    cleaned = clean_reply(Reply(text="Final Verdict: Correct", model=reported))
    if kept is None:
        assert "abcdefghijklmnopqrstuvwxyz" not in (cleaned.model or "")
    else:
        assert cleaned.model == kept


# ---------------------------------------------------------------------- every reply carries its snapshot
VERDICT = "Error Analysis: 80 matches the reference.\nFinal Verdict: Correct"
SHAPES = (*CACHE_SHAPES, "this version")
K0, K1, K2, K3 = (request_key({"prompt": n}) for n in range(4))


def _cache_file(folder, shape: str) -> Reply:
    """A cache of ``shape`` holding K0 judged by gpt-4o-2024-08-06; K0's reply as it reads back."""
    if shape == "this version":
        cache = ReplyCache(str(folder))
        cache.put(K0, Reply(VERDICT, {}, "stop", "gpt-4o-2024-08-06", "fp_0"), "openai:gpt-4o")
        cache.close()
    else:
        write_cache_file(folder, shape, [(K0, VERDICT, "gpt-4o-2024-08-06", "fp_0")])
    kept = shape == "this version" or CACHE_SHAPES[shape][1]
    return Reply(VERDICT, {}, "stop", *(("gpt-4o-2024-08-06", "fp_0") if kept else (None, None)))


def _reply_columns(folder) -> tuple[str, ...]:
    with contextlib.closing(sqlite3.connect(folder / FILE_NAME)) as db:
        return tuple(row[1] for row in db.execute("PRAGMA table_info(replies)"))


@pytest.mark.parametrize("shape", SHAPES)
def test_every_cache_file_keeps_its_snapshots_and_stays_writable_by_an_older_version(tmp_path, shape):
    """Released versions store with a positional six-value insert; an eight-column table refused it."""
    first = _cache_file(tmp_path, shape)
    cache = ReplyCache(str(tmp_path))
    assert cache.get(K0) == first
    newer = Reply(VERDICT, {"total_tokens": 9}, "stop", "gpt-4o-2024-11-20", "fp_1")
    assert cache.put(K1, newer, "openai:gpt-4o") and cache.get(K1) == newer
    older_version_stores(tmp_path, K2, VERDICT)  # an older install sharing the folder, while this one has it open
    assert cache.get(K2) == Reply(VERDICT, {}, "stop")  # stored by a version that records no snapshot
    cache.close()
    assert _reply_columns(tmp_path) == REPLY_COLUMNS
    again = ReplyCache(str(tmp_path))
    assert [again.get(k) for k in (K0, K1, K2)] == [first, newer, Reply(VERDICT, {}, "stop")]
    again.close()
    older_version_stores(tmp_path, K3, VERDICT)


def test_a_reply_an_older_version_stores_over_one_with_a_snapshot_reports_none(tmp_path):
    cache = ReplyCache(str(tmp_path))
    cache.put(K0, Reply(VERDICT, model="gpt-4o-2024-08-06", fingerprint="fp_0"), "openai:gpt-4o")
    older_version_stores(tmp_path, K0, "Final Verdict: Incorrect")  # INSERT OR REPLACE, knowing no reply_meta
    assert cache.get(K0) == Reply("Final Verdict: Incorrect", {}, "stop")  # not the snapshot of the reply it replaced
    cache.put(K0, Reply(VERDICT, model="gpt-4o-2024-11-20"), "openai:gpt-4o")
    assert cache.get(K0).model == "gpt-4o-2024-11-20"
    cache.close()


@pytest.mark.parametrize("shape", SHAPES)
def test_a_cache_file_of_any_version_only_read_on_a_full_disk_reports_its_snapshots(tmp_path, shape, monkeypatch):
    from lm_eval_mathjudge.core import files

    first = _cache_file(tmp_path, shape)
    columns = _reply_columns(tmp_path)

    def no_room_to_write(path: str, **options):
        if not options.get("uri"):  # a read-write open: SQLite cannot create the -shm file
            raise sqlite3.OperationalError("disk I/O error")
        return sqlite3.connect(path, **options)

    monkeypatch.setattr(files, "open_sqlite", no_room_to_write)
    frozen = ReplyCache(str(tmp_path))
    assert len(frozen) == 1 and frozen.get(K0) == first
    assert frozen.put(K1, Reply(VERDICT, model="gpt-4o-2024-11-20"), "openai:gpt-4o") is False
    assert frozen.get(K1).model == "gpt-4o-2024-11-20"  # kept in memory for this run
    frozen.close()
    assert _reply_columns(tmp_path) == columns  # only read: the file is as it was


def _client(settings, cache_dir):
    from lm_eval_mathjudge import backends
    from lm_eval_mathjudge.core import prompts
    from lm_eval_mathjudge.core.judges import JUDGES
    from lm_eval_mathjudge.judging.cache import ReplyCache
    from lm_eval_mathjudge.judging.client import JudgeClient

    judge = JUDGES["exact_match"]
    return JudgeClient(backends.build(settings, "exact_match"), judge.parse, settings,
                       prompts.load(judge.template).version, ReplyCache(str(cache_dir)), progress=False)


def _even(body: dict) -> dict:
    number = int(body["messages"][-1]["content"].split()[-1])
    return {"content": f"Error Analysis: {number}.\nFinal Verdict: {'Correct' if number % 2 == 0 else 'Incorrect'}",
            "model": "gpt-4o-2024-11-20", "system_fingerprint": "fp_b1c2d3"}


@pytest.mark.parametrize("mode", ["online", "batch"])
def test_replies_paid_online_or_by_a_batch_and_then_read_from_the_cache_report_their_snapshot(tmp_path, mode,
                                                                                              monkeypatch):
    from lm_eval_mathjudge.core.types import JudgeRequest
    from lm_eval_mathjudge.settings.schema import JudgeSettings
    from tests.e2e import CANARY_KEY
    from tests.loopback.openai_batch_server import OpenAIBatchServer

    monkeypatch.setenv("OPENAI_API_KEY", CANARY_KEY)
    requests = [JudgeRequest(prompt=f"Is this even? {i}") for i in range(5)]
    with OpenAIBatchServer(_even) as server:
        settings = JudgeSettings(base_url=server.url, model="gpt-4o", max_retries=0, batch_poll_seconds=0.05,
                                 mode=mode, cache_dir=str(tmp_path))
        first = _client(settings, tmp_path)
        assert [o.verdict.correct for o in first.judge_all(requests)] == [i % 2 == 0 for i in range(5)]
        first.close()
        assert server.batches_created == (mode == "batch") and server.call_count == (5 if mode == "online" else 0)
        rerun = _client(settings, tmp_path)  # every reply from the cache: nothing paid, the snapshot still known
        rerun.judge_all(requests)
        rerun.close()
    paid, cached = first.stats.as_dict(), rerun.stats.as_dict()
    assert paid.get("reported_models") == ({"gpt-4o-2024-11-20": 5} if mode == "online" else None)
    assert paid["used_models"] == cached["used_models"] == {"gpt-4o-2024-11-20": 5}
    assert cached["fingerprints"] == {"fp_b1c2d3": 5} and cached["cache_hits"] == 5 and cached["judge_calls"] == 0


def test_a_gemini_batch_records_the_model_version_each_reply_reports(tmp_path, monkeypatch):
    from lm_eval_mathjudge.backends.gemini.online import GeminiBackend
    from lm_eval_mathjudge.core.parsing import parse_vlm
    from lm_eval_mathjudge.core.types import JudgeRequest
    from lm_eval_mathjudge.judging.cache import ReplyCache
    from lm_eval_mathjudge.judging.client import JudgeClient
    from lm_eval_mathjudge.settings.schema import JudgeSettings
    from tests._helpers import isolate_gemini_sdk
    from tests.loopback.gemini_batch_server import GeminiBatchServer

    isolate_gemini_sdk(monkeypatch, "AIza-canary-drift-0123456789")
    text = "INTERMEDIATE_CORRECT: 1\nFINAL_CORRECT: 1\nACTION_REFLECTION: 0\nEXPLANATION: 60 / 0.75 = 80."
    with GeminiBatchServer(responder=lambda body: {"text": text, "model": "gemini-2.5-pro-002"}) as server:
        settings = JudgeSettings(backend="gemini", model="gemini-2.5-pro", base_url=server.url, max_tokens=8192,
                                 cache_dir=str(tmp_path), max_retries=0, timeout=10.0, mode="batch",
                                 batch_poll_seconds=0.05)
        backend = GeminiBackend(settings)
        client = JudgeClient(backend, parse_vlm, settings, "vlm-test-v1", ReplyCache(str(tmp_path)), progress=False)
        outcomes = client.judge_all([JudgeRequest("Grade it.", output_text=f"The answer is {i}.") for i in range(3)])
        client.close()
        assert server.batch_creates == 1 and server.generate_calls == 0
    assert all(o.verdict.final_correct for o in outcomes)
    assert client.stats.as_dict()["used_models"] == {"gemini-2.5-pro-002": 3}


@pytest.mark.parametrize("model, alias", [
    ("gpt-4o", True), ("gpt-4-turbo", True), ("o3", True), ("o4-mini", True), ("gpt-4.1", True),
    ("openai/gpt-4o-mini", True), ("chatgpt-4o-latest", True), ("gpt-5-chat-latest", True),
    ("gemini-2.5-pro", True), ("gemini-2.0-flash", True), ("gemini-1.5-pro-latest", True),
    ("models/gemini-2.5-flash", True),
    ("gpt-4o-2024-08-06", False), ("gpt-4-turbo-2024-04-09", False), ("o3-2025-04-16", False),
    ("gpt-4-0613", False), ("gpt-4-1106-preview", False), ("gpt-3.5-turbo-0125", False),
    ("ft:gpt-4o-2024-08-06:acme::9abc", False), ("gemini-1.5-pro-002", False), ("models/gemini-2.0-flash-001", False),
    ("gemini-2.5-pro-preview-06-05", False), ("math-verify", False), ("claude-3-5-sonnet-20241022", False),
])
def test_which_judge_model_names_are_aliases_that_can_move(model, alias):
    from lm_eval_mathjudge.harness.provenance import is_alias
    from lm_eval_mathjudge.settings.models import moving_alias
    from lm_eval_mathjudge.settings.schema import JudgeSettings

    assert moving_alias(model) is alias
    backend = "gemini" if "gemini" in model else "openai"
    assert is_alias(JudgeSettings(backend=backend, model=model)) is alias
    assert is_alias(JudgeSettings(backend="azure", model=model)) is False  # a deployment name is the user's own
