"""A media file that fails its format check is that sample's ``bad_media``, never sent; never-transient
statuses are never retried (the File API's 501 included).

The files are the real formats of tests/media_fixtures.py, cut the way an interrupted download or
write leaves them. The judge is the real google-genai (and openai) SDK against the loopback servers.
"""

from __future__ import annotations

import json
from pathlib import Path
from urllib.parse import urlsplit

import pytest

from lm_eval_mathjudge.backends.gemini import files as gemini_files
from lm_eval_mathjudge.backends._http import status_error
from lm_eval_mathjudge.backends.gemini.online import GeminiBackend
from lm_eval_mathjudge.judging.client import JudgeClient
from lm_eval_mathjudge.settings.schema import JudgeSettings
from lm_eval_mathjudge.core.errors import FatalJudgeError, MediaError
from lm_eval_mathjudge.core.judges import JUDGES
from lm_eval_mathjudge.core.media import load_media, media_problem
from lm_eval_mathjudge.core.parsing import parse_vlm
from lm_eval_mathjudge.calls.retry import transient_status
from lm_eval_mathjudge.core.types import JudgeRequest
from tests import media_fixtures as fx
from tests._helpers import isolate_gemini_sdk
from tests.conftest import read_jsonl, write_data_slice
from tests.e2e import run_lm_eval
from tests.loopback import ChatCompletionsServer, GeminiServer

CANARY = "AIza-canary-0123456789abcdefXYZ"
REPLY = "INTERMEDIATE_CORRECT: 1\nFINAL_CORRECT: 1\nACTION_REFLECTION: 0\nEXPLANATION: The picture shows 18."
FORMATS = {  # extension, mime, a whole file of the format
    "png": ("image/png", fx.png(16, 16)),
    "jpeg": ("image/jpeg", fx.jpeg()),
    "gif": ("image/gif", fx.gif()),
    "webp": ("image/webp", fx.webp()),
    "mp4": ("video/mp4", fx.mp4(4096)),
    "mov": ("video/quicktime", fx.mov(4096)),
}
EXT = {"png": ".png", "jpeg": ".jpg", "gif": ".gif", "webp": ".webp", "mp4": ".mp4", "mov": ".mov"}


def _cases():
    for name, (_mime, data) in FORMATS.items():
        yield pytest.param(name, data, None, id=f"{name}-whole")
        for cut in sorted({len(data) - 1, len(data) - 2, len(data) // 2, 40}):
            if 32 <= cut < len(data):  # enough bytes left for the magic-byte check to pass
                yield pytest.param(name, data[:cut], "cut short", id=f"{name}-cut-to-{cut}")
    yield pytest.param("mp4", fx.mp4(4096) + b"\x00\x00\x01", "stray bytes", id="mp4-stray-tail")
    yield pytest.param("jpeg", fx.jpeg() + b"\x00" * 64, None, id="jpeg-nul-padding")


@pytest.mark.parametrize("name, data, problem", list(_cases()))
def test_the_format_check_in_memory_and_on_disk_is_one_check(tmp_path, name, data, problem):
    mime = FORMATS[name][0]
    found = media_problem(data, mime)
    assert (found is None) if problem is None else (problem in found)
    path = tmp_path / f"answer{EXT[name]}"
    path.write_bytes(data)
    if problem is None:
        assert load_media(str(path)).size == len(data)
        return
    for reference in (str(path), f"file://{path}"):
        with pytest.raises(MediaError) as raised:
            load_media(reference)
        assert raised.value.kind == "bad_media" and str(path) in str(raised.value) and found in str(raised.value)
        assert "not sent to the judge" in str(raised.value)


def test_a_cut_data_url_and_mislabelled_bytes_are_bad_media_too(tmp_path):
    import base64

    cut = base64.b64encode(fx.png()[:-5]).decode()
    with pytest.raises(MediaError, match="no IEND chunk") as raised:
        load_media(f"data:image/png;base64,{cut}")
    assert raised.value.kind == "bad_media"
    (tmp_path / "x.png").write_bytes(fx.jpeg())
    with pytest.raises(MediaError, match="named as image/png, but its bytes look like image/jpeg") as raised:
        load_media(str(tmp_path / "x.png"))
    assert raised.value.kind == "bad_media"


@pytest.mark.parametrize("status, transient", [(500, True), (502, True), (503, True), (504, True), (529, True),
                                               (501, False), (505, False), (506, False), (508, False), (510, False),
                                               (511, False), (400, False), (405, False), (413, False), (415, False),
                                               (422, False), (408, True), (429, True)])
def test_never_transient_statuses_are_not_retried(status, transient):
    assert transient_status(status) is transient
    error = status_error(status, "x", keys="KEY", endpoint="http://127.0.0.1:1")
    assert isinstance(error, FatalJudgeError) is (not transient)
    assert ("not retried" in str(error)) is (not transient)


# ---------------------------------------------------------------------------------------- Gemini, real SDK
@pytest.fixture
def sdk_env(monkeypatch):
    isolate_gemini_sdk(monkeypatch, CANARY)


def _settings(server, **overrides) -> JudgeSettings:
    return JudgeSettings(**{"backend": "gemini", "model": "gemini-2.5-pro", "base_url": server.url,
                            "max_tokens": 8192, "cache": False, "concurrency": 4, "max_retries": 6,
                            "timeout": 10.0, **overrides})


def _judge(server, requests, **overrides):
    settings = _settings(server, **overrides)
    backend = GeminiBackend(settings)
    client = JudgeClient(backend, parse_vlm, settings, "vlm-test", None, progress=False)
    try:
        return client, client.judge_all(requests)
    finally:
        backend.close()


def _vlm_request(path) -> JudgeRequest:
    doc = {"mj_question": "How much does Janet make?", "mj_reference": "9 * 2 = 18\n#### 18", "mj_answer": "18"}
    return JUDGES["vlm"].request(doc, str(path), media_dirs=[str(Path(path).parent)])


def test_a_501_from_the_file_api_is_asked_once_and_stops_the_run(sdk_env, tmp_path, monkeypatch, retry_waits):
    """Before: retried 6 times over 28 s. A proxy without the File API answers 501 every time."""
    monkeypatch.setattr(gemini_files, "INLINE_MAX_BYTES", 1000)
    video = tmp_path / "answer.mp4"
    video.write_bytes(fx.mp4(4096))
    with GeminiServer(lambda body: REPLY) as server:
        server.upload_status = 501
        client, [outcome] = _judge(server, [_vlm_request(video)])
        uploads = [r for r in server.requests if urlsplit(r.path).path.startswith("/upload/")]
        assert len(uploads) == 1 and server.generate_calls == 0  # exactly one request, nothing else
    assert client.stats.retries == 0 and retry_waits == []
    assert outcome.transport_failed and outcome.failure == "http_501"  # not scored: the run stops, says why
    fatal = str(client.fatal_error)
    assert "the File API upload of" in fatal and str(video) in fatal and "HTTP 501" in fatal
    assert "does not implement this request" in fatal and "not retried" in fatal


@pytest.mark.parametrize("status", [501, 505])
def test_a_never_transient_status_on_a_judge_call_is_asked_once(sdk_env, status):
    with GeminiServer(lambda body: REPLY) as server:
        server.inject(status=status, times=20)
        client, outcomes = _judge(server, [JudgeRequest(prompt=f"grade {i}", output_text="18") for i in range(3)],
                                     concurrency=1)
        assert server.generate_calls == 1  # not retried, and the fatal answer stops every other call
    assert client.stats.retries == 0 and all(o.transport_failed for o in outcomes)


def test_openai_judge_does_not_retry_a_501(monkeypatch):
    from lm_eval_mathjudge.backends import build
    from lm_eval_mathjudge.settings.layers import resolve_settings

    with ChatCompletionsServer(lambda body: "Final Verdict: Correct") as server:
        server.inject(status=501, times=20)
        settings = resolve_settings("exact_match", None, {"judge_base_url": server.url, "judge_cache": False,
                                                          "judge_max_retries": 6}, environ={"OPENAI_API_KEY": "sk-x"})
        monkeypatch.setenv("OPENAI_API_KEY", "sk-x")
        client = JudgeClient(build(settings, "exact_match"), JUDGES["exact_match"].parse, settings, "t", None,
                             progress=False)
        [outcome] = client.judge_all([JudgeRequest(prompt="grade")])
        client.close()
        assert server.call_count == 1 and client.stats.retries == 0 and outcome.failure == "http_501"


def test_a_truncated_png_is_never_uploaded_nor_sent(sdk_env, tmp_path, monkeypatch):
    """Through the VLM judge's own request builder: large enough for the File API, cut short, never sent."""
    monkeypatch.setattr(gemini_files, "INLINE_MAX_BYTES", 100)
    good, cut, tiny = tmp_path / "good.png", tmp_path / "cut.png", tmp_path / "tiny.png"
    good.write_bytes(fx.png(64, 64, (10, 200, 30)))
    big = fx.png(256, 256)
    cut.write_bytes(big[: len(big) - 20])
    tiny.write_bytes(fx.png()[:40])  # the 40-byte PNG of the report
    assert good.stat().st_size > 100 and cut.stat().st_size > 100  # both would go through the File API
    for path in (cut, tiny):
        with pytest.raises(MediaError) as raised:
            _vlm_request(path)
        assert raised.value.kind == "bad_media"
    with GeminiServer(lambda body: REPLY) as server:
        _, [outcome] = _judge(server, [_vlm_request(good)])
        assert outcome.verdict.final_correct == 1
        assert len(server.uploaded) == 1 and server.generate_calls == 1  # only the whole file went out


# ---------------------------------------------------------------------------------------- the real CLI
@pytest.mark.e2e
def test_bad_media_are_counted_failures_and_never_reach_the_judge_through_the_cli(tmp_path):
    data_dir = write_data_slice(tmp_path / "data", 4)
    questions = [r["question"] for r in read_jsonl(data_dir / "gsm8k" / "test.jsonl")]
    good, tiny, video, gif = (tmp_path / n for n in ("good.png", "tiny.png", "cut.mp4", "cut.gif"))
    good.write_bytes(fx.png(32, 32))
    tiny.write_bytes(fx.png()[:40])
    whole = fx.mp4(payload_bytes=15 * 1000 * 1000)  # over the inline limit: it would be uploaded
    video.write_bytes(whole[: len(whole) - 4096])  # its mdat box is cut short
    gif.write_bytes(fx.gif()[:-1])
    replay = tmp_path / "generations.jsonl"
    replay.write_text("".join(json.dumps({"question": q, "response": str(p)}) + "\n"
                              for q, p in zip(questions, (good, tiny, video, gif))))
    with GeminiServer(lambda body: REPLY) as judge:
        run = run_lm_eval(["--model", "mathjudge-replay", "--model_args", f"path={replay}", "--tasks",
                           "gsm8k_vlmjudge", "--log_samples", "--metadata",
                           json.dumps({"vlm_judge_base_url": judge.url, "vlm_judge_media_dirs": [str(tmp_path)]})],
                          {"MATHJUDGE_DATA_DIR": str(data_dir), "MATHJUDGE_CACHE_DIR": str(tmp_path / "cache"),
                           "GEMINI_API_KEY": CANARY}, tmp_path / "out")
        assert run.returncode == 0, run.stderr[-3000:]
        assert judge.generate_calls == 1 and judge.uploaded == {}  # only the whole PNG, inline
    results = run.results()
    assert results["results"]["gsm8k_vlmjudge"]["judge_failed,none"] == pytest.approx(3 / 4)
    assert results["configs"]["gsm8k_vlmjudge"]["metadata"]["judge"]["run"]["failures"] == {"bad_media": 3}
    records = {s["doc_id"]: json.loads(s["filtered_resps"][0]) for s in run.samples("gsm8k_vlmjudge")}
    assert records[0]["verdict"]["final_correct"] == 1
    for doc_id, path in ((1, tiny), (2, video), (3, gif)):
        assert records[doc_id]["failure"] == "bad_media" and str(path) in records[doc_id]["error"]
