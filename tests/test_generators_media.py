"""mathjudge-media: pre-generated files by folder layout or manifest; nothing outside the folder."""

from __future__ import annotations

import json

import pytest

from lm_eval_mathjudge import generators
from lm_eval_mathjudge.core.errors import ConfigError
from lm_eval_mathjudge.generators.pregenerated import PregeneratedMediaLM
from lm_eval_mathjudge.core.media import media_reference
from tests import media_fixtures as fx
from tests.test_generators_openai_wire import Req

TASK = "gsm8k_vlmjudge"


def _kinds(answers: list[str]) -> list[str]:
    return [(generators.generation_failure(a) or ("found",))[0] for a in answers]


def test_folder_layout_finds_each_extension_and_counts_the_rest(tmp_path):
    folder = tmp_path / "media" / TASK
    folder.mkdir(parents=True)
    for _doc_id, name, data in [(0, "0.png", fx.png()), (1, "1.jpeg", fx.jpeg()), (2, "2.webm", fx.webm()),
                               (3, "3.mov", fx.mov()), (4, "4.png", fx.png()), (4, "4.mp4", fx.mp4())]:
        (folder / name).write_bytes(data)
    outside = tmp_path / "elsewhere.png"
    outside.write_bytes(fx.png())
    (folder / "5.png").symlink_to(outside)
    lm = PregeneratedMediaLM(dir=str(tmp_path / "media"), batch_size=1)
    answers = lm.generate_until([Req(f"q{i}", doc_id=i) for i in range(7)])
    assert _kinds(answers) == ["found"] * 4 + ["ambiguous_media", "outside_dir", "missing_media"]
    assert answers[1] == str(folder / "1.jpeg")
    assert generators.provenance(TASK)["run"] == {
        "requests": 7, "found": 4, "failures": {"ambiguous_media": 1, "outside_dir": 1, "missing_media": 1}}


def test_a_manifest_matches_by_question_or_doc_id_and_wins_over_the_layout(tmp_path):
    root = tmp_path / "media"
    (root / "runs").mkdir(parents=True)
    (root / TASK).mkdir()
    (root / "runs" / "a.png").write_bytes(fx.png())
    (root / "runs" / "b.mp4").write_bytes(fx.mp4())
    (root / TASK / "0.png").write_bytes(fx.png(rgb=(1, 2, 3)))
    manifest = tmp_path / "manifest.jsonl"
    manifest.write_text("\n".join(json.dumps(r) for r in [
        {"task": TASK, "question": "What  is\n2+2?", "path": "runs/a.png"},
        {"doc_id": 7, "path": "runs/b.mp4"},
        {"task": TASK, "doc_id": 8, "path": "runs/missing.png"}]) + "\n")
    lm = PregeneratedMediaLM(dir=str(root), manifest=str(manifest))
    answers = lm.generate_until([Req("What is 2+2?", doc_id=0), Req("other", doc_id=7), Req("x", doc_id=8)])
    assert answers[:2] == [str(root / "runs" / "a.png"), str(root / "runs" / "b.mp4")]
    assert generators.generation_failure(answers[2])[0] == "missing_media"


@pytest.mark.parametrize("path", ["../outside.png", "/etc/passwd", "runs/../../x.png"])
def test_a_manifest_path_leaving_the_folder_is_refused_up_front(path, tmp_path):
    (tmp_path / "media").mkdir()
    manifest = tmp_path / "m.jsonl"
    manifest.write_text(json.dumps({"doc_id": 0, "path": path}) + "\n")
    with pytest.raises(ConfigError, match="leaves dir="):
        PregeneratedMediaLM(dir=str(tmp_path / "media"), manifest=str(manifest))


@pytest.mark.parametrize("args,message", [
    ({}, "needs --model_args dir=DIR"),
    ({"dir": "/no/such/folder"}, "no such folder"),
    ({"dir": ".", "manifest": "/no/such.jsonl"}, "cannot read it"),
    ({"dir": ".", "pattern": "x"}, "unknown --model_args pattern"),
])
def test_bad_arguments_say_what_to_do(args, message):
    with pytest.raises(ConfigError, match=message):
        PregeneratedMediaLM(**args)


def test_the_failure_marker_round_trips_and_ordinary_text_is_not_one():
    marker = generators.failure_marker("missing_media", "no media for t doc 3:\nlooked in /x")
    assert generators.generation_failure(marker) == ("missing_media", "no media for t doc 3:\nlooked in /x")
    for text in ("The answer is 4. MATHJUDGE_GENERATION_FAILED [x] y", "MATHJUDGE_GENERATION_FAILED oops", ""):
        assert generators.generation_failure(text) is None
    assert media_reference(marker) is None  # never mistaken for a file to attach
