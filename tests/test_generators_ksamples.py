"""k samples per problem with a media generator: each sample its own file, several asked for in one call.

The generators see what lm-eval hands them for ``repeats: k`` (the same Instance k times in a row) and
talk through the real SDKs to the loopback media servers, which honour ``n`` / ``sampleCount``, return
distinct bytes per output and can return fewer than asked. The lm_eval run at the end is the whole path:
task YAML repeats -> k requests per doc -> k files -> k judged responses per doc in the samples file.
"""

from __future__ import annotations

import base64
import errno
import itertools
import json
import math
import sqlite3
from pathlib import Path

import pytest
from lm_eval.api.instance import Instance

from lm_eval_mathjudge.core import files
from lm_eval_mathjudge.core.errors import GenerationRunError
from lm_eval_mathjudge.generators import store as store_module
from lm_eval_mathjudge.generators.base import chunks
from lm_eval_mathjudge.generators.job import resumable_positions
from lm_eval_mathjudge.generators.store import MediaStore, request_key
from tests import media_fixtures as fx
from tests.conftest import write_data_slice
from tests.e2e import CANARY_KEY, run_lm_eval
from tests.loopback import GeminiServer
from tests.loopback.google_media_server import GoogleMediaServer
from tests.loopback.media_outputs import sample_index
from tests.loopback.openai_media_server import OpenAIMediaServer
from tests.test_generators_google_wire import google_env  # noqa: F401  (autouse: the SDK sees loopback only)

PNG, MP4 = fx.png(rgb=(30, 60, 90)), fx.mp4(payload_bytes=3000)
TASK = "gsm8k_vlmjudge"


def requests(k: int, docs: int = 1, task: str = TASK) -> list[Instance]:
    """What lm-eval's evaluator passes for ``repeats: k``: each doc's Instance k times in a row."""
    out = []
    for doc_id in range(docs):
        instance = Instance("generate_until", {"mj_question": f"What is {doc_id} + 7?"}, ("prompt", {}), 0,
                            (task, doc_id, k))
        out += [instance] * k
    return out


# ----------------------------------------------------------------------------- the key and the chunks
def test_sample_zero_keeps_the_key_every_k1_store_has_and_the_others_differ():
    import hashlib

    options = {"quality": "low"}
    recipe = json.dumps({"schema": 1, "adapter": "a", "model": "m", "options": options, "prompt": "p"},
                        sort_keys=True, ensure_ascii=False)
    assert request_key("a", "m", options, "p") == request_key("a", "m", options, "p", 0) == \
        hashlib.sha256(recipe.encode()).hexdigest()
    keys = {request_key("a", "m", options, "p", i) for i in range(8)}
    assert len(keys) == 8


# keys missing (in sample order), max per call, recorded jobs, expected calls
CHUNKS = [
    ("k=4, n up to 10", list("abcd"), 10, {}, [("a", "b", "c", "d")]),
    ("k=12, n up to 10", list("abcdefghijkl"), 10, {}, [tuple("abcdefghij"), ("k", "l")]),
    ("k=5, Imagen up to 4", list("abcde"), 4, {}, [tuple("abcd"), ("e",)]),
    ("no n (Sora, dall-e-3)", list("abc"), 1, {}, [("a",), ("b",), ("c",)]),
    ("one sample left", ["c"], 4, {}, [("c",)]),
    ("a recorded job stays whole", list("abcdef"), 4, {"b": "op1", "d": "op1", "f": "op2"},
     [("b", "d"), ("f",), ("a", "c", "e")]),
    ("nothing missing", [], 4, {}, []),
]


@pytest.mark.parametrize("name,keys,most,jobs,expected", CHUNKS, ids=[c[0] for c in CHUNKS])
def test_missing_samples_are_chunked_to_the_vendors_limit(name, keys, most, jobs, expected):
    assert chunks(keys, most, jobs) == expected


# positions recorded for the keys of a job (in sample order) -> the output each takes (None: a new job makes it)
POSITIONS = [
    ("recorded before positions were: the order of the keys", [None, None, None], [0, 1, 2]),
    ("the later samples of a job after a full disk", [2, 3], [2, 3]),
    ("one position lost", [0, None, 2, 3], [0, None, 2, 3]),
    ("two samples claim one output", [0, 1, 2, 2], [0, 1, None, None]),
    ("a negative position", [-1, 1], [None, 1]),
    ("no keys", [], []),
]


@pytest.mark.parametrize("name,recorded,expected", POSITIONS, ids=[c[0] for c in POSITIONS])
def test_a_resumed_job_gives_each_sample_its_recorded_output_or_none(name, recorded, expected):
    assert resumable_positions(recorded) == expected


# ----------------------------------------------------------------------------- OpenAI Images: n
@pytest.fixture
def openai_env(monkeypatch):
    def point_at(server) -> None:
        monkeypatch.setenv("OPENAI_API_KEY", CANARY_KEY)
        monkeypatch.setenv("OPENAI_BASE_URL", server.url)
    return point_at


def _image_lm(tmp_path: Path, model: str = "gpt-image-1"):
    from lm_eval_mathjudge.generators.openai_image import OpenAIImageLM

    return OpenAIImageLM(model=model, media_dir=str(tmp_path / "media"), quality="low")


# model, k, the n of each call
IMAGE_CALLS = [("gpt-image-1", 4, [4]), ("gpt-image-1", 12, [10, 2]), ("dall-e-3", 3, [1, 1, 1]),
               ("gpt-image-1", 1, [1])]


@pytest.mark.parametrize("model,k,ns", IMAGE_CALLS, ids=[f"{m}-k{k}" for m, k, _ in IMAGE_CALLS])
def test_openai_images_asks_for_the_k_samples_with_n(model, k, ns, tmp_path, openai_env):
    colours = iter(range(1, 250))  # each call its own picture, as a sampling model draws
    with OpenAIMediaServer(image_responder=lambda body: fx.png(rgb=(next(colours), 0, 0))) as server:
        openai_env(server)
        lm = _image_lm(tmp_path, model)
        answers = lm.generate_until(requests(k, docs=2), disable_tqdm=True)
        assert sorted(r.body["n"] for r in server.requests) == sorted(ns * 2)
        assert server.outputs.count("images") == 2 * k
        for doc in range(2):
            files = answers[doc * k:(doc + 1) * k]
            assert len(set(files)) == k and all(Path(f).read_bytes().startswith(b"\x89PNG") for f in files)
        run = _provenance(TASK)["run"]
        assert run == {**run, "requests": 2 * k, "unique_prompts": 2, "samples": 2 * k,
                       "generation_calls": 2 * len(ns), "outputs": 2 * k, "generated_files": 2 * k}

        again = _image_lm(tmp_path, model).generate_until(requests(k, docs=2), disable_tqdm=True)
        assert again == answers and len(server.requests) == 2 * len(ns)  # every sample found again: no call


def test_a_short_return_keeps_what_came_and_asks_once_more_for_the_rest(tmp_path, openai_env):
    with OpenAIMediaServer(image_responder=lambda body: PNG) as server:
        openai_env(server)
        server.outputs.limit(2)  # the server gives 2 of the 4 asked for
        lm = _image_lm(tmp_path)
        answers = lm.generate_until(requests(4), disable_tqdm=True)
        assert [r.body["n"] for r in server.requests] == [4, 2] and len(set(answers)) == 4
        assert lm.stats["short_returns"] == 1 and lm.stats["outputs"] == 4
        assert _provenance(TASK)["run"]["generation_calls"] == 2


def test_k_samples_resume_after_a_partial_run_making_only_the_missing_ones(tmp_path, openai_env):
    with OpenAIMediaServer(image_responder=lambda body: PNG) as server:
        openai_env(server)
        first = _image_lm(tmp_path).generate_until(requests(2), disable_tqdm=True)  # samples 0 and 1 exist
        answers = _image_lm(tmp_path).generate_until(requests(5), disable_tqdm=True)
        assert [r.body["n"] for r in server.requests] == [2, 3]  # only samples 2, 3, 4 were asked for
        assert answers[:2] == first and len(set(answers)) == 5


def test_a_prompt_two_tasks_share_is_made_once_per_sample(tmp_path, openai_env):
    with OpenAIMediaServer(image_responder=lambda body: PNG) as server:
        openai_env(server)
        answers = _image_lm(tmp_path).generate_until(requests(3) + requests(3, task="gsm8k_vlmjudge_b"),
                                                     disable_tqdm=True)
        assert [r.body["n"] for r in server.requests] == [3] and answers[:3] == answers[3:]


# ----------------------------------------------------------------------------- Sora: no n
def test_sora_makes_one_job_per_sample(tmp_path, openai_env):
    from lm_eval_mathjudge.generators.sora import SoraLM

    with OpenAIMediaServer(video_responder=lambda form: MP4, polls=1) as server:
        openai_env(server)
        lm = SoraLM(model="sora-2", media_dir=str(tmp_path / "media"), poll_interval=0.01)
        answers = lm.generate_until(requests(3), disable_tqdm=True)
        assert server.count("create") == 3 and len(server.jobs) == 3 and server.count("download") == 3
        assert len(answers) == 3 and _provenance(TASK)["run"]["outputs"] == 3
        assert _provenance(TASK)["run"]["samples"] == 3


# ----------------------------------------------------------------------------- Imagen and Veo: sampleCount
class Spec:
    def __init__(self, spec: dict):
        self.spec = spec

    def __call__(self, kind, model, body):
        return dict(self.spec)


def _sample_counts(server: GoogleMediaServer, kind: str) -> list[int]:
    paths = set(server.calls(kind))
    return [r.body["parameters"]["sampleCount"] for r in server.requests
            if r.method == "POST" and r.path.split("?")[0] in paths]


def test_imagen_asks_number_of_images_and_asks_again_after_a_short_return(tmp_path, monkeypatch):
    from lm_eval_mathjudge.generators.gemini_image import GeminiImageLM

    with GoogleMediaServer(Spec({"image": PNG})) as server:
        monkeypatch.setenv("GOOGLE_VERTEX_BASE_URL", server.url)
        server.outputs.limit(2)  # the first call gets 2 of the 4
        lm = GeminiImageLM(model="imagen-4.0-generate-001", media_dir=str(tmp_path / "media"), num_concurrent=1)
        answers = lm.generate_until(requests(5), disable_tqdm=True)
        assert _sample_counts(server, "imagen") == [4, 2, 1]  # 4 (2 came), the other 2, then the fifth
        assert len(set(answers)) == 5 and server.outputs.count("imagen") == 5


def test_veo_renders_the_samples_in_one_operation_and_a_rerun_resumes_it_without_paying_again(tmp_path,
                                                                                              monkeypatch):
    from lm_eval_mathjudge.generators.veo import VeoLM

    with GoogleMediaServer(Spec({"video": MP4, "polls": 10_000})) as server:
        monkeypatch.setenv("GOOGLE_VERTEX_BASE_URL", server.url)
        args = dict(model="veo-3.0-generate-001", media_dir=str(tmp_path / "media"), poll_interval=0.01,
                    poll_timeout=0.2)
        timed_out = VeoLM(**args).generate_until(requests(4), disable_tqdm=True)
        assert all("[timeout]" in a for a in timed_out) and _sample_counts(server, "veo") == [4]
        [operation] = server.operation_names()
        assert MediaStore(str(tmp_path / "media")).counts()["jobs"] == 4  # one job, under each sample's key

        server.finish_operations()
        lm = VeoLM(**args)
        answers = lm.generate_until(requests(4), disable_tqdm=True)
        assert _sample_counts(server, "veo") == [4] and server.operation_names() == [operation]
        assert lm.stats["jobs_resumed"] == 1 and len(set(answers)) == 4
        assert MediaStore(str(tmp_path / "media")).counts() == {"media": 4, "failures": 0, "jobs": 0}


def test_veo_short_return_starts_one_operation_for_the_rest(tmp_path, monkeypatch):
    from lm_eval_mathjudge.generators.veo import VeoLM

    with GoogleMediaServer(Spec({"video": MP4, "polls": 0})) as server:
        monkeypatch.setenv("GOOGLE_VERTEX_BASE_URL", server.url)
        server.outputs.limit(2)
        lm = VeoLM(model="veo-3.0-generate-001", media_dir=str(tmp_path / "media"), poll_interval=0)
        answers = lm.generate_until(requests(4), disable_tqdm=True)
        assert _sample_counts(server, "veo") == [4, 2] and len(set(answers)) == 4
        assert MediaStore(str(tmp_path / "media")).counts() == {"media": 4, "failures": 0, "jobs": 0}


VEO = "veo-3.0-generate-001"
FOREVER = 10_000  # polls: the job outlives poll_timeout


def _veo(tmp_path: Path):
    from lm_eval_mathjudge.generators.veo import VeoLM

    return VeoLM(model=VEO, media_dir=str(tmp_path / "media"), poll_interval=0.01, poll_timeout=0.2)


def _outputs(answers: list[str]) -> list[int | str]:
    """Which output of the prompt's jobs each sample's file is (the server numbers them), or the failure kind."""
    return [sample_index(Path(a).read_bytes()) if Path(a).is_file() else a.split("]")[0].split("[")[-1]
            for a in answers]


def _disk_fills_at(monkeypatch, write: int | None) -> None:
    """The media folder's disk is full from its ``write``-th file on (ENOSPC); None: it has room."""
    writes = itertools.count(1)

    def write_atomic(path, data, **kwargs):
        if write is not None and next(writes) >= write:
            raise OSError(errno.ENOSPC, "No space left on device", path)
        return files.write_atomic(path, data, **kwargs)

    monkeypatch.setattr(store_module, "write_atomic", write_atomic)


# Runs over one media folder, each (k, polls of the jobs it starts, the file the disk fills at, what each
# sample gets: its output's number among the prompt's outputs, a failure kind, or the run's error); then the
# sampleCount of every job paid for.
RESUMES = [
    ("the disk fills at the third of four videos",
     [(4, 0, 3, "1 of 1 prompts got no media (disk_full: 2)"), (4, 0, None, [0, 1, 2, 3])], [4]),
    ("the disk fills at the first video",
     [(4, 0, 1, "1 of 1 prompts got no media (disk_full: 4)"), (4, 0, None, [0, 1, 2, 3])], [4]),
    ("timed out, rerun with k=2, then k=4",
     [(4, FOREVER, None, ["timeout"] * 4), (2, 0, None, [0, 1]), (4, 0, None, [0, 1, 2, 3])], [4]),
    ("timed out, rerun with k=3, then k=4",
     [(4, FOREVER, None, ["timeout"] * 4), (3, 0, None, [0, 1, 2]), (4, 0, None, [0, 1, 2, 3])], [4]),
    ("timed out with k=2, rerun with k=4",
     [(2, FOREVER, None, ["timeout"] * 2), (4, 0, None, [0, 1, 2, 3])], [2, 2]),
    ("timed out, rerun with k=2 on a disk full at its second video, then k=4",
     [(4, FOREVER, None, ["timeout"] * 4), (2, 0, 2, "1 of 1 prompts got no media (disk_full: 1)"),
      (4, 0, None, [0, 1, 2, 3])], [4]),
]


@pytest.mark.parametrize("name,runs,paid", RESUMES, ids=[c[0] for c in RESUMES])
def test_a_veo_job_resumed_after_some_of_its_samples_were_stored_gives_each_sample_its_own_video(
        name, runs, paid, tmp_path, monkeypatch):
    spec = Spec({"video": MP4})
    with GoogleMediaServer(spec) as server:
        monkeypatch.setenv("GOOGLE_VERTEX_BASE_URL", server.url)
        for k, polls, full_at, expected in runs:
            spec.spec["polls"] = polls
            server.finish_operations()  # the jobs of earlier runs are done by now
            _disk_fills_at(monkeypatch, full_at)
            if isinstance(expected, str):
                with pytest.raises(GenerationRunError) as caught:
                    _veo(tmp_path).generate_until(requests(k), disable_tqdm=True)
                assert expected in str(caught.value)
            else:
                assert _outputs(_veo(tmp_path).generate_until(requests(k), disable_tqdm=True)) == expected
        assert _sample_counts(server, "veo") == paid  # the rerun polled the job it had: nothing paid twice
        assert MediaStore(str(tmp_path / "media")).counts() == {"media": 4, "failures": 0, "jobs": 0}


# What happens to the recorded positions of a timed-out job of 4 before its rerun; then the output each
# sample gets (4 and up: a new job's), the sampleCount of every job paid for, whether the rerun resumed it.
TAMPERED = [
    ("recorded before positions were", ["DELETE FROM job_outputs"], [0, 1, 2, 3], [4], True),
    ("one position lost", ["DELETE FROM job_outputs WHERE position = 2"], [0, 1, 4, 3], [4, 1], True),
    ("two samples claim one output", ["UPDATE job_outputs SET position = 2 WHERE position = 3"], [0, 1, 4, 5],
     [4, 2], True),
    ("a position past the job's outputs", ["UPDATE job_outputs SET position = 7 WHERE position = 3"],
     [0, 1, 2, 4], [4, 1], True),
    ("every sample claims the first output", ["UPDATE job_outputs SET position = 0"], [4, 5, 6, 7], [4, 4], False),
    ("every position past the job's outputs", ["UPDATE job_outputs SET position = position + 4"], [4, 5, 6, 7],
     [4, 4], True),
]


@pytest.mark.parametrize("name,statements,expected,paid,resumed", TAMPERED, ids=[c[0] for c in TAMPERED])
def test_samples_whose_output_in_a_recorded_veo_job_is_unknown_get_a_new_job(name, statements, expected, paid,
                                                                            resumed, tmp_path, monkeypatch):
    spec = Spec({"video": MP4, "polls": FOREVER})
    with GoogleMediaServer(spec) as server:
        monkeypatch.setenv("GOOGLE_VERTEX_BASE_URL", server.url)
        assert _outputs(_veo(tmp_path).generate_until(requests(4), disable_tqdm=True)) == ["timeout"] * 4
        with sqlite3.connect(tmp_path / "media" / store_module.INDEX_NAME) as db:
            for statement in statements:
                db.execute(statement)
        spec.spec["polls"] = 0
        server.finish_operations()
        lm = _veo(tmp_path)
        assert _outputs(lm.generate_until(requests(4), disable_tqdm=True)) == expected
        assert _sample_counts(server, "veo") == paid and (lm.stats["jobs_resumed"] == 1) == resumed
        assert MediaStore(str(tmp_path / "media")).counts() == {"media": 4, "failures": 0, "jobs": 0}


def _provenance(task: str) -> dict:
    from lm_eval_mathjudge import generators

    return generators.provenance(task)


# ----------------------------------------------------------------------------- through lm_eval
K, N = 4, 2
GEMINI_CANARY = "AIza-canary-gemini-ksamples-0123456789"


def _judge(body: dict) -> str:
    """Samples 0 and 1 of each doc are right, 2 and 3 wrong (the output index the media server wrote)."""
    parts = body["contents"][0]["parts"]
    inline = [p.get("inlineData") or p.get("inline_data") for p in parts]
    data = [base64.urlsafe_b64decode(i["data"] + "=" * (-len(i["data"]) % 4)) for i in inline if i]
    flag = int(bool(data) and sample_index(data[0]) < 2)
    return f"INTERMEDIATE_CORRECT: {flag}\nFINAL_CORRECT: {flag}\nACTION_REFLECTION: 0\nEXPLANATION: graded."


def _page_per_prompt(body: dict) -> bytes:
    """Each problem its own picture (a colour from the prompt), as a real model draws."""
    import hashlib

    return fx.png(rgb=tuple(hashlib.sha256(body["prompt"].encode()).digest()[:3]))


@pytest.mark.e2e
def test_k_samples_of_an_image_model_through_lm_eval(tmp_path):
    data_dir = write_data_slice(tmp_path / "data", N)
    with OpenAIMediaServer(image_responder=_page_per_prompt) as media, GeminiServer(_judge) as judge:
        env = {"MATHJUDGE_DATA_DIR": str(data_dir), "MATHJUDGE_CACHE_DIR": str(tmp_path / "cache"),
               "OPENAI_API_KEY": CANARY_KEY, "OPENAI_BASE_URL": media.url, "GEMINI_API_KEY": GEMINI_CANARY}
        args = ["--model", "mathjudge-openai-image", "--model_args", "model=gpt-image-1,quality=low",
                "--tasks", TASK, "--limit", str(N), "--log_samples",
                "--metadata", json.dumps({"vlm_judge_base_url": judge.url, "repeats": K})]
        first = run_lm_eval(args, env, tmp_path / "out1")
        assert first.returncode == 0, first.stderr[-4000:]
        assert len(media.requests) == N * math.ceil(K / 10) and {r.body["n"] for r in media.requests} == {K}
        assert media.outputs.count("images") == N * K and judge.generate_calls == N * K

        samples = first.samples(TASK)
        assert len(samples) == N
        for sample in samples:
            responses, judged = _flat(sample["resps"]), [json.loads(r) for r in _flat(sample["filtered_resps"])]
            assert len(responses) == K and len(judged) == K
            assert len(set(responses)) == K and all(Path(f).is_file() for f in responses)
            assert [j["verdict"]["final_correct"] for j in judged] == [1, 1, 0, 0]
        assert len(list((tmp_path / "cache" / "media").glob("*.png"))) == N * K
        metrics = first.results()["results"][TASK]
        assert metrics["final_correct_avg@4,none"] == pytest.approx(0.5)  # 2 of the 4 samples right per problem
        assert metrics["final_correct_pass@4,none"] == 1.0 and metrics["judge_failed,none"] == 0.0
        run = first.results()["configs"][TASK]["metadata"]["generator"]["run"]
        assert run["samples"] == N * K and run["generation_calls"] == N and run["outputs"] == N * K

        second = run_lm_eval(args, env, tmp_path / "out2")
        assert second.returncode == 0, second.stderr[-4000:]
        assert len(media.requests) == N and judge.generate_calls == N * K  # nothing paid for twice
        rerun = second.results()["configs"][TASK]["metadata"]["generator"]["run"]
        assert rerun["generation_calls"] == 0 and rerun["outputs"] == 0 and rerun["reused_files"] == N * K


def _flat(values: list) -> list:
    """The k values of a doc: lm-eval writes them as one list, or as a list holding it (one per request)."""
    return values[0] if len(values) == 1 and isinstance(values[0], list) else values
