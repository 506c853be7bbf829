"""Hostile input through the real lm_eval CLI: invalid Unicode, echoed secrets, credentials in metadata,
a damaged cache. Generations come from replay files (no model server needed). The scenarios run
side by side (tests/e2e.py Scenarios); each test checks its own."""

from __future__ import annotations

import base64
import json
import stat
from pathlib import Path

import pytest

from tests.conftest import read_jsonl, write_data_slice
from tests.e2e import CANARY_KEY, exact_match_judge, run_lm_eval
from tests.loopback import ChatCompletionsServer

pytestmark = pytest.mark.e2e

N = 6
TASK = "gsm8k_gpt4em"
BASIC = "Basic " + base64.b64encode(b"alice:hunter2-basic-secret").decode()
JUDGE_MODELS = ("gpt-4-turbo-2024-04-09",)  # what a preflight model lookup expects to find


def _gsm8k(tmp_path: Path):
    root = write_data_slice(tmp_path / "data", N)
    rows = read_jsonl(root / "gsm8k" / "test.jsonl")
    return root, [(r["question"], r["answer"].split("####")[-1].strip().replace(",", "")) for r in rows]


def _replay_file(path: Path, rows, broken: int | None = 2) -> Path:
    """Right answers for every question; response `broken` carries a lone surrogate (JSON "\\ud800")."""
    with open(path, "w", encoding="ascii") as fh:
        for i, (question, gold) in enumerate(rows):
            noise = " \ud800 " if i == broken else " "
            record = {"question": question, "response": f"Working through it{noise}gives \\boxed{{{gold}}}"}
            fh.write(json.dumps(record, ensure_ascii=True) + "\n")
    return path


def _run(replay: Path, metadata: dict, env: dict, out: Path):
    return run_lm_eval(["--model", "mathjudge-replay", "--model_args", f"path={replay}", "--tasks", TASK,
                        "--log_samples", "--metadata", json.dumps(metadata)], env, out)


def _nothing_leaked(root: Path, *runs, secrets=(CANARY_KEY, BASIC.split()[1])) -> None:
    for run in runs:
        for secret in secrets:
            assert secret not in run.stdout + run.stderr
    for path in root.rglob("*"):
        if path.is_file():
            data = path.read_bytes()
            for secret in secrets:
                assert secret.encode() not in data, path


def _surrogate_run(tmp_path):
    data_dir, rows = _gsm8k(tmp_path)
    replay = _replay_file(tmp_path / "replay.jsonl", rows)
    return _run(replay, {"judge_backend": "local"},
                {"MATHJUDGE_DATA_DIR": str(data_dir), "MATHJUDGE_CACHE_DIR": str(tmp_path / "cache")}, tmp_path / "out")


def test_a_lone_surrogate_in_one_response_is_judged_like_any_other(scenario):
    run = scenario()
    assert run.returncode == 0, run.stderr[-3000:]
    metrics = run.results()["results"][TASK]
    assert metrics["gpt4_exact_match,none"] == 1.0 and metrics["judge_failed,none"] == 0
    samples = sorted(run.samples(TASK), key=lambda s: s["doc_id"])
    assert len(samples) == N
    assert "\ufffd" in json.loads(samples[2]["filtered_resps"][0])["response"]


def _rescue_run(tmp_path):
    data_dir, rows = _gsm8k(tmp_path)
    replay = _replay_file(tmp_path / "replay.jsonl", rows)
    cache = tmp_path / "cache"

    def down(body):
        return {"status": 503, "content": f"overloaded; your key {CANARY_KEY} (Authorization: Bearer {CANARY_KEY}, "
                                          f"Authorization: {BASIC}) will work later"}

    with ChatCompletionsServer(down, models=JUDGE_MODELS) as judge:
        run = _run(replay, {"judge_base_url": judge.url, "judge_max_retries": 1},
                   {"MATHJUDGE_DATA_DIR": str(data_dir), "MATHJUDGE_CACHE_DIR": str(cache),
                    "OPENAI_API_KEY": CANARY_KEY}, tmp_path / "out")
    return tmp_path, rows, run


def test_the_rescue_path_writes_a_complete_private_file_and_errors_are_scrubbed(scenario):
    """The judge is down and echoes the key and an Authorization header in its error bodies."""
    tmp_path, rows, run = scenario()
    cache = tmp_path / "cache"
    assert run.returncode != 0
    assert f"{N} of {N} samples got no verdict" in run.stderr and "overloaded" in run.stderr
    [saved] = (cache / "generations").glob("generations-*.jsonl")
    assert str(saved) in run.stderr
    records = read_jsonl(saved)  # every line parses: the file is complete
    assert len(records) == N and {r["question"] for r in records} == {q for q, _ in rows}
    assert stat.S_IMODE(saved.stat().st_mode) == 0o600
    assert stat.S_IMODE((cache / "generations").stat().st_mode) == 0o700
    assert not list((cache / "generations").glob("*.tmp-*"))
    _nothing_leaked(tmp_path, run)


def _echo_run(tmp_path):
    data_dir, rows = _gsm8k(tmp_path)
    replay = _replay_file(tmp_path / "replay.jsonl", rows, broken=None)
    seen: set[str] = set()

    def echoing(body):
        prompt = body["messages"][-1]["content"]
        if prompt not in seen:  # first attempt: an error body quoting the credentials
            seen.add(prompt)
            return {"status": 500, "content": f"internal error for Authorization: Bearer {CANARY_KEY}"}
        verdict = exact_match_judge(body)
        return (f"Request headers: Authorization: Bearer {CANARY_KEY}; Proxy-Authorization: {BASIC}; "
                f"x-api-key: {CANARY_KEY}\n{verdict}")

    env = {"MATHJUDGE_DATA_DIR": str(data_dir), "MATHJUDGE_CACHE_DIR": str(tmp_path / "cache"),
           "OPENAI_API_KEY": CANARY_KEY}
    with ChatCompletionsServer(echoing, models=JUDGE_MODELS) as judge:
        run = _run(replay, {"judge_base_url": judge.url, "judge_max_retries": 2}, env, tmp_path / "out")
        assert judge.call_count == 2 * N  # one 500 and one retry per sample
    return tmp_path, run


def test_secrets_echoed_by_the_judge_never_reach_the_cache_samples_or_logs(scenario):
    tmp_path, run = scenario()
    assert run.returncode == 0, run.stderr[-3000:]
    assert run.results()["results"][TASK]["gpt4_exact_match,none"] == 1.0
    raw = [json.loads(s["filtered_resps"][0])["raw_reply"] for s in run.samples(TASK)]
    assert all("Bearer ***" in r and "x-api-key: ***" in r for r in raw)
    _nothing_leaked(tmp_path, run)


@pytest.mark.parametrize("metadata, named", [
    pytest.param({"api_key": CANARY_KEY}, "api_key", id="api-key-without-judge-prefix"),
    pytest.param({"judge_base_url": f"http://user:{CANARY_KEY}@127.0.0.1:9/v1"}, "judge_base_url", id="url-userinfo"),
    pytest.param({"judge_base_url": f"http://127.0.0.1:9/v1?api_key={CANARY_KEY}"}, "judge_base_url",
                 id="url-api-key"),
    pytest.param({"judge_base_url": f"http://127.0.0.1:9/v1?key={CANARY_KEY}"}, "judge_base_url", id="url-key"),
])
def test_credentials_in_metadata_stop_the_run_before_anything_is_written(scenario, metadata, named):
    tmp_path, run = scenario()
    assert run.returncode != 0
    assert named in run.stderr and "environment variable" in run.stderr
    assert not list((tmp_path / "out").rglob("results_*.json"))
    _nothing_leaked(tmp_path / "out", secrets=(CANARY_KEY,))
    _nothing_leaked(tmp_path / "cache", secrets=(CANARY_KEY,))


def _credentials_run(tmp_path, metadata, named):
    data_dir, rows = _gsm8k(tmp_path)
    replay = _replay_file(tmp_path / "replay.jsonl", rows, broken=None)
    return tmp_path, _run(replay, {"judge_backend": "local", **metadata},
                          {"MATHJUDGE_DATA_DIR": str(data_dir), "MATHJUDGE_CACHE_DIR": str(tmp_path / "cache")},
                          tmp_path / "out")


def _damaged_run(tmp_path):
    data_dir, rows = _gsm8k(tmp_path)
    replay = _replay_file(tmp_path / "replay.jsonl", rows, broken=None)
    cache = tmp_path / "cache"
    cache.mkdir()
    damaged = b"SQLite format 3\x00" + b"\xff" * 4096  # a header, then garbage: not a usable database
    (cache / "judge_cache.sqlite3").write_bytes(damaged)
    run = _run(replay, {"judge_backend": "local"}, {"MATHJUDGE_DATA_DIR": str(data_dir),
                                                    "MATHJUDGE_CACHE_DIR": str(cache)}, tmp_path / "out")
    return cache, damaged, run


def test_a_damaged_cache_is_moved_aside_before_judging_and_the_run_goes_on(scenario):
    cache, damaged, run = scenario()
    assert run.returncode == 0, run.stderr[-3000:]
    [moved] = [p for p in cache.iterdir() if ".damaged-" in p.name]
    assert moved.read_bytes() == damaged
    assert str(moved) in run.stderr and str(cache / "judge_cache.sqlite3") in run.stderr
    assert run.results()["results"][TASK]["gpt4_exact_match,none"] == 1.0


def _backends_have_preflight() -> bool:
    from lm_eval_mathjudge.backends.openai.chat import OpenAIChatBackend

    return hasattr(OpenAIChatBackend, "preflight")


def _wrong_model_run(tmp_path):
    data_dir, rows = _gsm8k(tmp_path)

    def model(body):
        return "\\boxed{1}"

    with ChatCompletionsServer(model) as generator, ChatCompletionsServer(exact_match_judge,
                                                                          models=("some-other-model",)) as judge:
        run = run_lm_eval(["--model", "local-chat-completions", "--model_args",
                           f"model=loopback-model,base_url={generator.chat_url},num_concurrent=2,max_retries=1",
                           "--apply_chat_template", "--tasks", TASK, "--metadata",
                           json.dumps({"judge_base_url": judge.url})],
                          {"MATHJUDGE_DATA_DIR": str(data_dir), "MATHJUDGE_CACHE_DIR": str(tmp_path / "cache"),
                           "OPENAI_API_KEY": CANARY_KEY}, tmp_path / "out")
        assert run.returncode != 0
        assert generator.call_count == 0 and judge.call_count == 0  # no generation, no paid judge call
        assert judge.url.split("//")[1].split("/")[0] in run.stderr  # the message names the endpoint


@pytest.mark.skipif(not _backends_have_preflight(), reason="the openai backend has no preflight() yet")
def test_a_wrong_judge_model_is_found_before_any_generation(scenario):
    """The judge's preflight runs where lm-eval builds the requests: before the model generates anything."""
    scenario()


SCENARIOS = {"test_a_lone_surrogate_in_one_response_is_judged_like_any_other": _surrogate_run,
             "test_the_rescue_path_writes_a_complete_private_file_and_errors_are_scrubbed": _rescue_run,
             "test_secrets_echoed_by_the_judge_never_reach_the_cache_samples_or_logs": _echo_run,
             "test_credentials_in_metadata_stop_the_run_before_anything_is_written": _credentials_run,
             "test_a_damaged_cache_is_moved_aside_before_judging_and_the_run_goes_on": _damaged_run,
             "test_a_wrong_judge_model_is_found_before_any_generation": _wrong_model_run}
