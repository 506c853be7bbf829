"""Fixed costs of a run: no SDK import on a fully cached rerun, a remembered preflight, process_docs once.

End to end through the real ``lm_eval`` CLI with a start-up probe (a ``sitecustomize`` on
PYTHONPATH) that counts process_docs calls and lists the SDK modules loaded when the process
exits; the endpoint the backends name without their SDK is compared with the SDK's own.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
import textwrap
from pathlib import Path

import pytest

from lm_eval_mathjudge.backends.endpoints import sdk_endpoint
from lm_eval_mathjudge.judging import preflight
from lm_eval_mathjudge.backends.gemini.online import GeminiBackend
from lm_eval_mathjudge.backends.openai.chat import OpenAIChatBackend
from lm_eval_mathjudge.judging.cache import ReplyCache
from lm_eval_mathjudge.judging.client import JudgeClient, preflight_once
from lm_eval_mathjudge.settings.schema import JudgeSettings
from lm_eval_mathjudge.core.errors import FatalJudgeError
from lm_eval_mathjudge.core.parsing import parse_exact_match
from lm_eval_mathjudge.core.redact import public_url
from lm_eval_mathjudge.core.types import JudgeRequest, Reply
from tests.conftest import REPO, read_jsonl
from tests.e2e import CANARY_KEY, TIMEOUT_S, boxed, exact_match_judge, run_lm_eval
from tests.loopback import ChatCompletionsServer, GeminiServer

N = 4
GEMINI_CANARY = "AIza-canary-gemini-0123456789abcdef"
SDK_MODULES = ("openai", "google.genai")

# Loaded by every Python start of the lm_eval subprocess (PYTHONPATH): counts the calls of each data
# set's process_docs and, at exit, writes them and the SDK modules present to $MJ_PROBE_OUT.
PROBE = textwrap.dedent("""
    import atexit, json, os, sys
    from lm_eval_mathjudge.core.data_sets import DataSet

    _calls = {}
    _real = DataSet.process_docs

    def _counted(self, dataset):
        _calls[self.name] = _calls.get(self.name, 0) + 1
        return _real(self, dataset)

    DataSet.process_docs = _counted

    @atexit.register
    def _report():
        sdk = sorted(m for m in sys.modules if m in ("openai", "google.genai") or m.startswith(("openai.", "google.genai.")))
        with open(os.environ["MJ_PROBE_OUT"], "w") as fh:
            json.dump({"process_docs": _calls, "sdk_modules": sdk}, fh)
""")


@pytest.fixture
def probe(tmp_path):
    folder = tmp_path / "probe"
    folder.mkdir()
    (folder / "sitecustomize.py").write_text(PROBE)

    def env_for(name: str) -> dict[str, str]:
        return {"PYTHONPATH": os.pathsep.join([str(folder), str(REPO)]),
                "MJ_PROBE_OUT": str(tmp_path / f"probe-{name}.json")}

    def read(name: str) -> dict:
        return json.loads((tmp_path / f"probe-{name}.json").read_text())
    env_for.read = read
    return env_for


@pytest.fixture
def gsm8k(data_slice, tmp_path):
    root = data_slice(N)
    rows = read_jsonl(root / "gsm8k" / "test.jsonl")
    replay = tmp_path / "replay.jsonl"
    with open(replay, "w", encoding="utf-8") as fh:  # doc 0 wrong, the others right
        for i, row in enumerate(rows):
            gold = row["answer"].split("####")[-1].strip().replace(",", "")
            answer = f"{gold}1" if i == 0 else gold
            fh.write(json.dumps({"question": row["question"], "response": f"So \\boxed{{{answer}}}"}) + "\n")
    return root, replay


def _run(task, replay, metadata, env, out):
    return run_lm_eval(["--model", "mathjudge-replay", "--model_args", f"path={replay}", "--tasks", task,
                        "--log_samples", "--metadata", json.dumps(metadata)], env, out)


def _nothing_leaked(root: Path, *secrets: str) -> None:
    for path in root.rglob("*"):
        if path.is_file():
            blob = path.read_bytes()
            assert not any(s.encode() in blob for s in secrets), path


# ------------------------------------------------------------------------------ end to end
@pytest.mark.e2e
def test_a_fully_cached_openai_rerun_sends_nothing_and_never_imports_the_sdk(gsm8k, probe, tmp_path):
    data_dir, replay = gsm8k
    env = {"MATHJUDGE_DATA_DIR": str(data_dir), "MATHJUDGE_CACHE_DIR": str(tmp_path / "cache"),
           "OPENAI_API_KEY": CANARY_KEY}
    with ChatCompletionsServer(exact_match_judge, models=("gpt-4-turbo-2024-04-09",)) as judge:
        metadata = {"judge_base_url": judge.url}
        cold = _run("gsm8k_gpt4em", replay, metadata, {**env, **probe("cold")}, tmp_path / "cold")
        assert cold.returncode == 0, cold.stderr[-3000:]
        assert [r.method for r in judge.requests].count("GET") == 1 and judge.call_count == N
        assert "openai" in probe.read("cold")["sdk_modules"]  # the probe sees the SDK when it is used
        sent = len(judge.requests)
        warm = _run("gsm8k_gpt4em", replay, metadata, {**env, **probe("warm")}, tmp_path / "warm")
        assert warm.returncode == 0, warm.stderr[-3000:]
        assert len(judge.requests) == sent  # no preflight, no call
    report = probe.read("warm")
    assert report["sdk_modules"] == []
    assert report["process_docs"] == {"gsm8k": 1} and probe.read("cold")["process_docs"] == {"gsm8k": 1}
    scores = [run.results()["results"]["gsm8k_gpt4em"]["gpt4_exact_match,none"] for run in (cold, warm)]
    assert scores == [pytest.approx((N - 1) / N)] * 2
    assert all(json.loads(s["filtered_resps"][0])["cached"] for s in warm.samples("gsm8k_gpt4em"))
    _nothing_leaked(tmp_path, CANARY_KEY)


def _vlm_judge(body: dict) -> str:
    parts = body["contents"][0]["parts"]
    answer = boxed(parts[1]["text"])
    flag = int(answer is not None and f"Final answer: {answer}" in parts[0]["text"])
    return (f"INTERMEDIATE_CORRECT: {flag}\nFINAL_CORRECT: {flag}\nACTION_REFLECTION: 0\n"
            f"EXPLANATION: the final answer {answer} {'matches' if flag else 'differs from'} the reference.")


@pytest.mark.e2e
def test_a_fully_cached_gemini_rerun_sends_nothing_and_never_imports_the_sdk(gsm8k, probe, tmp_path):
    data_dir, replay = gsm8k
    env = {"MATHJUDGE_DATA_DIR": str(data_dir), "MATHJUDGE_CACHE_DIR": str(tmp_path / "cache"),
           "GEMINI_API_KEY": GEMINI_CANARY}
    with GeminiServer(_vlm_judge) as judge:
        metadata = {"judge_base_url": judge.url}
        cold = _run("gsm8k_vlmjudge", replay, metadata, {**env, **probe("cold")}, tmp_path / "cold")
        assert cold.returncode == 0, cold.stderr[-3000:]
        assert judge.generate_calls == N and "google.genai" in probe.read("cold")["sdk_modules"]
        sent = len(judge.requests)
        warm = _run("gsm8k_vlmjudge", replay, metadata, {**env, **probe("warm")}, tmp_path / "warm")
        assert warm.returncode == 0, warm.stderr[-3000:]
        assert len(judge.requests) == sent
    assert probe.read("warm") == {"process_docs": {"gsm8k": 1}, "sdk_modules": []}
    scores = [run.results()["results"]["gsm8k_vlmjudge"]["final_correct,none"] for run in (cold, warm)]
    assert scores == [pytest.approx((N - 1) / N)] * 2
    _nothing_leaked(tmp_path, GEMINI_CANARY)


@pytest.mark.e2e
def test_another_key_is_checked_again_before_generation(gsm8k, tmp_path):
    """The remembered preflight is bound to the credentials: a new (wrong) key is refused before judging."""
    data_dir, replay = gsm8k
    env = {"MATHJUDGE_DATA_DIR": str(data_dir), "MATHJUDGE_CACHE_DIR": str(tmp_path / "cache"),
           "OPENAI_API_KEY": CANARY_KEY}
    with ChatCompletionsServer(exact_match_judge) as judge:
        metadata = {"judge_base_url": judge.url}
        assert _run("gsm8k_gpt4em", replay, metadata, env, tmp_path / "cold").returncode == 0
        sent = len(judge.requests)
        judge.models_status = 401  # the server now refuses: as it would a revoked or mistyped key
        run = _run("gsm8k_gpt4em", replay, metadata, {**env, "OPENAI_API_KEY": CANARY_KEY + "-rotated"},
                   tmp_path / "rotated")
        assert run.returncode != 0
        assert [r.method for r in judge.requests[sent:]] == ["GET"]  # the preflight, nothing else
        assert "preflight" in run.stderr and "HTTP 401" in run.stderr


# ------------------------------------------------------------------------------ process_docs
def test_process_docs_runs_once_per_task_however_often_lm_eval_asks(data_slice, monkeypatch):
    from lm_eval.evaluator_utils import get_sample_size
    from lm_eval.tasks import TaskManager

    from lm_eval_mathjudge.core import data_sets
    from lm_eval_mathjudge.core.data_sets import DataSet

    calls = []
    real = DataSet.process_docs

    def counted(entry, dataset):
        calls.append(len(dataset))
        return real(entry, dataset)
    monkeypatch.setattr(DataSet, "process_docs", counted)  # the task takes it from the entry when it is built
    monkeypatch.setenv("MATHJUDGE_DATA_DIR", str(data_slice(N)))
    tasks = TaskManager(include_defaults=False, include_path=str(REPO / "task_configs"),  # not lm-eval's 15,000
                        metadata={"judge_backend": "local"})
    task = tasks.load(["gsm8k_gpt4em"])["tasks"]["gsm8k_gpt4em"]
    assert calls == [N]  # building the task asked twice (few-shot pool, doc list)
    docs = task.eval_docs
    assert get_sample_size(task, 2) == 2 and [i for i, _ in task.doc_iterator(limit=2)] == [0, 1]
    assert task.test_docs() is docs is task.task_docs and len(task.eval_docs) == N
    assert docs[0]["mj_answer"] == real(data_sets.get("gsm8k"), task.dataset["test"])[0]["mj_answer"]
    assert calls == [N]
    task.download()  # a new dataset object: processed afresh
    assert len(task.eval_docs) == N and calls == [N, N]


# ------------------------------------------------------------------------------ lazy SDK clients
BUILD_WITHOUT_SDK = textwrap.dedent("""
    import json, sys
    from lm_eval_mathjudge.backends.gemini.online import GeminiBackend
    from lm_eval_mathjudge.backends.openai.chat import OpenAIChatBackend
    from lm_eval_mathjudge.settings.schema import JudgeSettings

    built = [OpenAIChatBackend(JudgeSettings(backend="openai", model="gpt-4o", base_url=sys.argv[1])),
             GeminiBackend(JudgeSettings(backend="gemini", model="gemini-2.5-pro", base_url=sys.argv[1]))]
    endpoints = [b.identity()["endpoint"] for b in built]
    for b in built:
        b.close()
    loaded = sorted(m for m in sys.modules if m.split(".")[0] == "openai" or m.startswith("google.genai"))
    print(json.dumps({"endpoints": endpoints, "loaded": loaded}))
""")


@pytest.mark.e2e
def test_building_a_backend_and_its_identity_import_no_sdk():
    env = {**os.environ, "OPENAI_API_KEY": CANARY_KEY, "GEMINI_API_KEY": GEMINI_CANARY,
           "PYTHONPATH": str(REPO)}
    out = subprocess.run([sys.executable, "-c", BUILD_WITHOUT_SDK, "http://127.0.0.1:9/v1/"], env=env,
                         capture_output=True, text=True, timeout=TIMEOUT_S, check=True).stdout
    assert json.loads(out) == {"endpoints": ["http://127.0.0.1:9/v1"] * 2, "loaded": []}


OPENAI_CASES = [
    # backend, base_url setting, environment
    pytest.param("openai", None, {}, id="default"),
    pytest.param("openai", None, {"OPENAI_BASE_URL": "http://vllm.lan:8000/v1/"}, id="sdk-variable"),
    pytest.param("openai", "http://judge:8000/v1", {"OPENAI_BASE_URL": "http://other/v1"}, id="setting-wins"),
    pytest.param("openai", "HTTPS://User:pw@Proxy.Example.com:443/v1?key=sk-abc#frag", {}, id="odd-url"),
    pytest.param("openai", "https://proxy.example.com:443/v1/", {}, id="default-port-and-slash"),
    pytest.param("openai", "http://127.0.0.1:8080/a b/v1", {}, id="space-in-path"),
    pytest.param("azure", None, {"AZURE_OPENAI_ENDPOINT": "https://res.openai.azure.com/",
                                 "OPENAI_API_VERSION": "2024-10-21"}, id="azure-variable"),
    pytest.param("azure", "https://res2.openai.azure.com", {"OPENAI_API_VERSION": "2024-10-21"}, id="azure-setting"),
]


@pytest.mark.parametrize("backend, base_url, environ", OPENAI_CASES)
def test_the_openai_endpoint_without_the_sdk_is_the_sdks(backend, base_url, environ, monkeypatch):
    import openai

    for name in ("OPENAI_BASE_URL", "AZURE_OPENAI_ENDPOINT", "OPENAI_API_VERSION"):
        monkeypatch.delenv(name, raising=False)
    for name, value in {**environ, "OPENAI_API_KEY": CANARY_KEY, "AZURE_OPENAI_API_KEY": CANARY_KEY}.items():
        monkeypatch.setenv(name, value)
    settings = JudgeSettings(backend=backend, model="gpt-4o", base_url=base_url)
    kwargs = {"azure_endpoint" if backend == "azure" else "base_url": base_url} if base_url else {}
    sdk = (openai.AzureOpenAI if backend == "azure" else openai.OpenAI)(**kwargs)
    assert sdk_endpoint(settings) == public_url(str(sdk.base_url))
    assert OpenAIChatBackend(settings).identity()["endpoint"] == public_url(str(sdk.base_url))


def test_an_azure_client_that_cannot_exist_still_fails_when_the_backend_is_built(monkeypatch):
    monkeypatch.delenv("AZURE_OPENAI_ENDPOINT", raising=False)
    monkeypatch.setenv("AZURE_OPENAI_API_KEY", CANARY_KEY)
    monkeypatch.setenv("OPENAI_API_VERSION", "2024-10-21")
    settings = JudgeSettings(backend="azure", model="my-deployment")
    assert sdk_endpoint(settings) is None  # the SDK decides, at once
    with pytest.raises(FatalJudgeError, match="cannot build the azure client.*AZURE_OPENAI_ENDPOINT"):
        OpenAIChatBackend(settings)


GEMINI_CASES = [
    pytest.param(None, {}, id="default"),
    pytest.param(None, {"GOOGLE_GEMINI_BASE_URL": "http://127.0.0.1:9000/"}, id="sdk-variable"),
    pytest.param("http://127.0.0.1:9001", {"GOOGLE_GEMINI_BASE_URL": "http://127.0.0.1:9000"}, id="setting-wins"),
    pytest.param(None, {"GOOGLE_GENAI_USE_VERTEXAI": "false"}, id="vertex-off"),
    pytest.param(None, {"GOOGLE_GENAI_USE_VERTEXAI": "true", "GOOGLE_CLOUD_PROJECT": "evals",
                        "GOOGLE_CLOUD_LOCATION": "us-central1"}, id="vertex"),
    pytest.param(None, {"GOOGLE_GENAI_USE_ENTERPRISE": "1", "GOOGLE_GENAI_USE_VERTEXAI": "false",
                        "GOOGLE_CLOUD_PROJECT": "evals", "GOOGLE_CLOUD_LOCATION": "europe-west4"},
                 id="enterprise-wins"),
]


@pytest.mark.parametrize("base_url, environ", GEMINI_CASES)
def test_the_gemini_endpoint_without_the_sdk_is_the_sdks(base_url, environ, monkeypatch):
    for name in [n for n in os.environ if n.startswith("GOOGLE_")]:
        monkeypatch.delenv(name)
    monkeypatch.setenv("GEMINI_API_KEY", GEMINI_CANARY)
    for name, value in environ.items():
        monkeypatch.setenv(name, value)
    settings = JudgeSettings(backend="gemini", model="gemini-2.5-pro", base_url=base_url)
    lazy = GeminiBackend(settings)
    eager = GeminiBackend(settings)
    eager.connect()
    try:
        built = eager.client_endpoint()  # what the SDK client says
        assert lazy.identity()["endpoint"] == built
        assert sdk_endpoint(settings) in (built, None)
    finally:
        lazy.close()
        eager.close()


@pytest.mark.parametrize("base_url, environ", [
    pytest.param(None, {"GOOGLE_GENAI_USE_VERTEXAI": "true"}, id="project-from-default-credentials"),
    pytest.param(None, {"GOOGLE_GENAI_USE_VERTEXAI": "1", "GOOGLE_CLOUD_LOCATION": "global"}, id="express-mode"),
    pytest.param("http://127.0.0.1:9/", {"GOOGLE_GENAI_USE_VERTEXAI": "true", "GOOGLE_CLOUD_PROJECT": "p",
                                         "GOOGLE_CLOUD_LOCATION": "l"}, id="vertex-behind-a-proxy"),
])
def test_vertex_cases_only_the_sdk_can_resolve_are_left_to_it(base_url, environ):
    settings = JudgeSettings(backend="gemini", model="gemini-2.5-pro", base_url=base_url)
    assert sdk_endpoint(settings, environ) is None  # so the backend builds its client at once


# ------------------------------------------------------------------------------ the preflight memory
class CountingBackend:
    """A backend stand-in at our own seam: counts preflights, answers or refuses calls."""

    def __init__(self, fatal: bool = False):
        self.preflights, self.fatal = 0, fatal

    def identity(self):
        return {"backend": "openai", "model": "fake-judge", "endpoint": "http://127.0.0.1:9/v1"}

    def preflight(self):
        self.preflights += 1

    def complete(self, request):
        if self.fatal:
            raise FatalJudgeError("judge returned HTTP 401: invalid key", kind="http_401", status=401)
        return Reply(text="Error Analysis: fine.\nFinal Verdict: Correct")

    def close(self):
        pass


def _new_process(monkeypatch):
    """What another process sees: nothing checked in memory, only the cache."""
    from lm_eval_mathjudge.judging import client as client_module
    monkeypatch.setattr(client_module, "_PREFLIGHTED", set())


@pytest.fixture
def memo(tmp_path, monkeypatch):
    monkeypatch.setenv("OPENAI_API_KEY", CANARY_KEY)
    _new_process(monkeypatch)
    cache = ReplyCache(str(tmp_path / "cache"))
    yield cache
    cache.close()


SETTINGS = JudgeSettings(backend="openai", model="fake-judge")


def test_a_passed_preflight_is_remembered_in_the_cache_for_the_next_process(memo, monkeypatch, tmp_path):
    backend = CountingBackend()
    assert preflight_once(backend, SETTINGS, memo) is True
    _new_process(monkeypatch)
    assert preflight_once(backend, SETTINGS, memo) is False and backend.preflights == 1
    _new_process(monkeypatch)
    assert preflight_once(backend, SETTINGS, None) is True  # no cache: no memory
    for path in (tmp_path / "cache").iterdir():
        assert CANARY_KEY.encode() not in path.read_bytes()  # only a digest is stored


@pytest.mark.parametrize("change", [
    pytest.param(lambda mp: mp.setenv("OPENAI_API_KEY", CANARY_KEY + "x"), id="another-key"),
    pytest.param(lambda mp: mp.setenv("OPENAI_ORG_ID", "org-other"), id="another-organisation"),
    pytest.param(lambda mp: mp.setattr(preflight, "MEMO_SECONDS", 0), id="older-than-the-window"),
])
def test_the_memory_does_not_cover_other_credentials_or_an_old_check(memo, monkeypatch, change):
    backend = CountingBackend()
    preflight_once(backend, SETTINGS, memo)
    _new_process(monkeypatch)
    change(monkeypatch)
    assert preflight_once(backend, SETTINGS, memo) is True and backend.preflights == 2


def test_a_fatal_judge_error_forgets_the_check(memo, monkeypatch):
    backend = CountingBackend(fatal=True)
    preflight_once(backend, SETTINGS, memo)
    client = JudgeClient(backend, parse_exact_match, JudgeSettings(backend="openai", model="fake-judge",
                                                                   max_retries=0), "v1", memo, progress=False)
    request = JudgeRequest(prompt="Is 2 + 2 = 4?")
    [outcome] = client.judge_all([request])
    assert outcome.failure == "http_401" and client.fatal_error is not None
    client.close()
    cache = ReplyCache(os.path.dirname(memo.path))  # the next process
    try:
        assert preflight_once(backend, SETTINGS, cache) is True and backend.preflights == 2
    finally:
        cache.close()


def test_with_preflight_off_the_client_is_still_built_before_generation(monkeypatch):
    monkeypatch.delenv("AZURE_OPENAI_ENDPOINT", raising=False)
    monkeypatch.setenv("AZURE_OPENAI_API_KEY", CANARY_KEY)
    monkeypatch.delenv("OPENAI_API_VERSION", raising=False)
    settings = JudgeSettings(backend="azure", model="dep", base_url="https://res.openai.azure.com", preflight=False)
    backend = OpenAIChatBackend(settings)  # the endpoint is known without the SDK
    with pytest.raises(FatalJudgeError, match="OPENAI_API_VERSION"):
        preflight_once(backend, settings)


# ------------------------------------------------------------------------------ redaction per sample
def test_the_remembered_secret_values_follow_every_change_of_the_environment(monkeypatch):
    from lm_eval_mathjudge.core.redact import redact

    monkeypatch.setenv("MJ_PROXY_TOKEN", "first-secret-value-1")
    assert redact("a first-secret-value-1 b") == "a *** b"
    assert redact("a first-secret-value-1 b") == "a *** b"  # the second call reads the memory
    monkeypatch.setenv("MJ_PROXY_TOKEN", "second-secret-value-2")  # same name, same count of variables
    assert redact("first-secret-value-1 second-secret-value-2") == "first-secret-value-1 ***"
    monkeypatch.delenv("MJ_PROXY_TOKEN")
    assert redact("second-secret-value-2") == "second-secret-value-2"
