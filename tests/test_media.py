"""Media responses: recognising references, and clear per-file errors for bad ones."""

from __future__ import annotations

import base64
import json
import os

import pytest

from lm_eval_mathjudge.core import media
from lm_eval_mathjudge.core.errors import MediaError
from lm_eval_mathjudge.core.judges import VLM
from tests import media_fixtures as fx


@pytest.mark.parametrize("response, is_reference", [
    pytest.param("/runs/veo3/gsm8k_0001.mp4", True, id="absolute-path"),
    pytest.param("  outputs/solution.PNG\n", True, id="relative-path-any-case"),
    pytest.param("file:///runs/sora/aime_07.mov", True, id="file-url"),
    pytest.param("<outputs/solution.webp>", True, id="angle-brackets"),
    pytest.param("data:image/png;base64,iVBORw0KGgo=", True, id="data-url"),
    pytest.param("The answer is 12, see the figure in fig.png", False, id="prose-ending-in-a-filename"),
    pytest.param("x = 5\n\\boxed{5}", False, id="ordinary-solution"),
    pytest.param("/runs/model/answer.txt", False, id="not-a-media-extension"),
    pytest.param("data:text/plain;base64,aGk=", True, id="data-url-of-any-type-is-still-a-reference"),
    pytest.param("https://cdn.example.com/run/q1.mp4", True, id="remote-url-recognised-never-fetched"),
])
def test_media_reference(response, is_reference):
    assert (media.media_reference(response) is not None) is is_reference


@pytest.mark.parametrize("name, payload, mime", [
    ("a.png", fx.png(), "image/png"),
    ("a.jpg", fx.jpeg(), "image/jpeg"),
    ("a.gif", fx.gif(), "image/gif"),
    ("a.webp", fx.webp(), "image/webp"),
    ("a.mp4", fx.mp4(), "video/mp4"),
    ("a.mov", fx.mov(), "video/quicktime"),
    ("a.webm", fx.webm(), "video/webm"),
])
def test_real_files_load_with_their_type_and_hash(tmp_path, name, payload, mime):
    path = tmp_path / name
    path.write_bytes(payload)
    item = media.load_media(str(path))
    assert (item.mime_type, item.size, item.path, item.read()) == (mime, len(payload), str(path), payload)
    assert item.is_video is mime.startswith("video/")


def test_the_hash_follows_the_content_not_the_path(tmp_path):
    (tmp_path / "one.png").write_bytes(fx.png(rgb=(1, 2, 3)))
    (tmp_path / "two.png").write_bytes(fx.png(rgb=(1, 2, 3)))
    (tmp_path / "three.png").write_bytes(fx.png(rgb=(9, 9, 9)))
    one, two, three = (media.load_media(str(tmp_path / n)) for n in ("one.png", "two.png", "three.png"))
    assert one.sha256 == two.sha256 != three.sha256


def test_file_url_and_data_url(tmp_path):
    (tmp_path / "my solution.png").write_bytes(fx.png())
    from_url = media.load_media((tmp_path / "my solution.png").as_uri())
    data_url = "data:image/png;base64," + base64.b64encode(fx.png()).decode()
    from_data = media.load_media(data_url)
    assert from_url.sha256 == from_data.sha256 and from_data.read() == fx.png()


@pytest.mark.parametrize("setup, message", [
    pytest.param(lambda d: None, "no such file", id="missing"),
    pytest.param(lambda d: (d / "s.png").write_bytes(b""), "empty", id="empty"),
    pytest.param(lambda d: (d / "s.png").write_bytes(fx.jpeg()), "named as image/png, but its bytes look like image/jpeg",
                 id="wrong-type"),
    pytest.param(lambda d: (d / "s.png").write_text("<html>404</html>"), "match no supported", id="not-media"),
])
def test_bad_files_name_the_file(tmp_path, setup, message):
    setup(tmp_path)
    path = tmp_path / "s.png"
    with pytest.raises(MediaError) as error:
        media.load_media(str(path))
    assert str(path) in str(error.value) and message in str(error.value)


def test_unreadable_file(tmp_path, monkeypatch):
    path = tmp_path / "s.png"
    path.write_bytes(fx.png())

    def denied(*args, **kwargs):  # chmod 0 would not stop root, who runs CI
        raise PermissionError(13, "Permission denied")

    monkeypatch.setattr(media, "open", denied, raising=False)
    with pytest.raises(MediaError, match=r"s.png: cannot read it \(Permission denied\)"):
        media.load_media(str(path))


def test_oversized_file(tmp_path, monkeypatch):
    monkeypatch.setattr(media, "MAX_IMAGE_BYTES", 100)
    path = tmp_path / "big.png"
    path.write_bytes(fx.png(width=64, height=64, rgb=(1, 2, 3)) + b"\0" * 200)
    with pytest.raises(MediaError, match=r"big.png: .* MB is more than"):
        media.load_media(str(path))


@pytest.mark.parametrize("url, message", [
    ("https://cdn.example.com/run/q1.mp4", "remote media are not fetched"),
    ("data:text/plain;base64,aGk=", "cannot be judged"),
    ("data:image/png;base64,@@@", "not valid base64"),
])
def test_bad_data_urls(url, message):
    with pytest.raises(MediaError, match=message):
        media.load_media(url)


def _doc():
    return {"mj_question": "q", "mj_reference": r"We get $\frac{1}{2}$, so {{x}} = 1/2.", "mj_answer": "1/2"}


def test_vlm_request_for_text_keeps_latex_braces_and_sends_the_output_fenced():
    request = VLM.request(_doc(), "x = 0.5, so \\boxed{1/2}")
    assert r"We get $\frac{1}{2}$, so {{x}} = 1/2." in request.prompt
    begin, body, end = request.output_text.split("\n")
    assert body == "x = 0.5, so \\boxed{1/2}" and request.media == ()
    assert begin.startswith("<<<BEGIN ANSWER ") and end == begin.replace("BEGIN", "END")
    assert f"the line {begin} and the line {end}" in request.prompt  # the prompt names this request's fence


def test_vlm_request_for_media_attaches_it_instead_of_text(tmp_path):
    (tmp_path / "solution.mp4").write_bytes(fx.mp4())
    request = VLM.request(_doc(), str(tmp_path / "solution.mp4"), media_dirs=[str(tmp_path)])
    assert request.output_text is None and [m.mime_type for m in request.media] == ["video/mp4"]


def test_a_media_request_keys_by_content_not_path(tmp_path):
    """The prompt's fence comes from the media's hash: the same file in another folder renders the same prompt."""
    for name in ("a", "b"):
        (tmp_path / name).mkdir()
        (tmp_path / name / "s.png").write_bytes(fx.png())
    one, two = (VLM.request(_doc(), str(tmp_path / n / "s.png"), media_dirs=[str(tmp_path)]) for n in ("a", "b"))
    assert one.prompt == two.prompt and one.media[0].sha256 == two.media[0].sha256


def _media_folders(tmp_path):
    """A media folder with an image, a symlink out of it, and an image and a secret outside it."""
    folder, outside = tmp_path / "media", tmp_path / "elsewhere"
    folder.mkdir()
    outside.mkdir()
    (folder / "ok.png").write_bytes(fx.png())
    (outside / "secret.png").write_bytes(fx.png(rgb=(1, 2, 3)))
    (folder / "escape.png").symlink_to(outside / "secret.png")
    (folder / "inner.png").symlink_to(folder / "ok.png")
    return folder, outside


@pytest.mark.parametrize("response, attached", [
    pytest.param("{folder}/ok.png", True, id="inside"),
    pytest.param("file://{folder}/ok.png", True, id="file-url-inside"),
    pytest.param("<{folder}/ok.png>", True, id="angle-brackets-inside"),
    pytest.param("{folder}/inner.png", True, id="symlink-staying-inside"),
    pytest.param("{data_url}", True, id="data-url-carries-its-own-bytes"),
    pytest.param("{outside}/secret.png", False, id="plain-path-outside"),
    pytest.param("file://{outside}/secret.png", False, id="file-url-outside"),
    pytest.param("<{outside}/secret.png>", False, id="angle-brackets-outside"),
    pytest.param("{folder}/../elsewhere/secret.png", False, id="dot-dot-out-of-the-folder"),
    pytest.param("{folder}/escape.png", False, id="symlink-escaping-the-folder"),
    pytest.param("elsewhere/secret.png", False, id="relative-path-outside"),
    pytest.param("{folder}x/ok.png", False, id="sibling-folder-sharing-the-prefix"),
    pytest.param("https://cdn.example.com/run/q1.png", False, id="remote-url"),
    pytest.param("/etc/hostname.png", False, id="system-path"),
])
def test_media_is_attached_only_from_the_media_folders(tmp_path, monkeypatch, response, attached):
    folder, outside = _media_folders(tmp_path)
    (tmp_path / "mediax").mkdir()
    (tmp_path / "mediax" / "ok.png").write_bytes(fx.png())
    monkeypatch.chdir(tmp_path)
    data_url = "data:image/png;base64," + base64.b64encode(fx.png()).decode()
    text = response.format(folder=folder, outside=outside, data_url=data_url)
    assert (media.attachable(text, [str(folder)]) is not None) is attached
    assert media.refused(text, [str(folder)]) is (not attached)
    request = VLM.request(_doc(), text, media_dirs=[str(folder)])
    assert bool(request.media) is attached
    if not attached:  # graded as text, fenced like any other answer
        assert text.strip() in request.output_text and request.media == ()


def test_without_media_folders_no_path_is_ever_read(tmp_path, monkeypatch):
    folder, _ = _media_folders(tmp_path)
    opened = []
    real_open = open
    monkeypatch.setattr("builtins.open", lambda path, *a, **k: opened.append(path) or real_open(path, *a, **k))
    request = VLM.request(_doc(), str(folder / "ok.png"))  # no folders given: a text model's answer
    assert request.media == () and not any(str(folder) in str(p) for p in opened)


def test_saved_generations_and_their_replay_keep_the_media_folders(tmp_path):
    """A media run whose judging failed is resumed by replay: its files must still be attached."""
    from lm_eval_mathjudge import generators
    from lm_eval_mathjudge.harness.recovery import save_generations
    from lm_eval_mathjudge.harness.replay import ReplayLM
    from tests._helpers import Req

    folder = tmp_path / "media"
    folder.mkdir()
    (folder / "0.png").write_bytes(fx.png())
    task = "gsm8k_vlmjudge_replay_test"
    saved = save_generations(str(tmp_path / "cache"), [(task, 0, {"question": "What is 2+2?"}, str(folder / "0.png"),
                                                        (str(folder),)),
                                                       (task, 1, {"question": "What is 3+3?"}, "6", ())])
    rows = [json.loads(line) for line in open(saved, encoding="utf-8")]
    assert rows[0]["media_dirs"] == [str(folder)] and "media_dirs" not in rows[1]
    answers = ReplayLM(path=saved).generate_until([Req("What is 2+2?", task_name=task),
                                                   Req("What is 3+3?", task_name=task, doc_id=1)])
    assert answers == [str(folder / "0.png"), "6"]
    assert generators.media_dirs(task) == (os.path.realpath(folder),)
    assert VLM.request(_doc(), answers[0], generators.media_dirs(task)).media  # attached again


def test_rejudge_takes_the_media_folders_of_the_original_run(tmp_path):
    from lm_eval_mathjudge.reports.rejudge import read_source

    folder = tmp_path / "renders"
    folder.mkdir()
    stamp = "2026-01-01T00-00-00.000000"
    (tmp_path / f"results_{stamp}.json").write_text(json.dumps({
        "results": {"gsm8k_vlmjudge": {}}, "model_name": "veo",
        "configs": {"gsm8k_vlmjudge": {"metadata": {"generator": {"adapter": "mathjudge-media", "dir": str(folder)}}}}}))
    samples = tmp_path / f"samples_gsm8k_vlmjudge_{stamp}.jsonl"
    samples.write_text(json.dumps({"doc_id": 0, "doc": {"question": "q"}, "resps": [[str(folder / "0.png")]]}) + "\n")
    assert read_source(str(samples)).media_dirs == (os.path.realpath(folder),)
