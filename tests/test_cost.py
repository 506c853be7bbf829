"""Prices, estimates, the cost of recorded usage, the run ledger, dry run and budget (cost/: prices, estimate, ledger, budget).

Estimates are checked on real GSM8K prompts rendered by the real exact-match
template (the full test set when the shared data are beside the repository,
else the embedded first rows) and real GPT-3 outputs from examples/data.
"""

from __future__ import annotations

import io
import json
import math
import re
import struct
import threading

import pytest

from lm_eval_mathjudge.cost import prices, token_rules
from lm_eval_mathjudge.cost.budget import BudgetExceeded, DryRunDone, check_budget, dry_run_stop
from lm_eval_mathjudge.cost.estimate import Estimate, combine, estimate, expected_thinking, format_estimates
from lm_eval_mathjudge.cost.ledger import Ledger, Tokens, cost_of, tokens_of
from lm_eval_mathjudge.core import data_sets
from lm_eval_mathjudge.settings.layers import resolve_settings
from lm_eval_mathjudge.settings.schema import JudgeSettings
from lm_eval_mathjudge.core.errors import ConfigError, JudgeRunError
from lm_eval_mathjudge.core.judges import JUDGES
from lm_eval_mathjudge.core.media import load_media
from lm_eval_mathjudge.core.types import JudgeRequest
from tests import media_fixtures
from tests.conftest import REPO, SHARED_DATA, read_jsonl

FULL_GSM8K = [p for p in (REPO.parent / "shared" / "data" / "gsm8k" / "test.jsonl",) if p.is_file()]
GSM8K = FULL_GSM8K[0] if FULL_GSM8K else SHARED_DATA / "gsm8k" / "test.jsonl"
OUTPUTS = SHARED_DATA / "gsm8k_outputs" / "gpt3_175b_verifier_first100.jsonl"


def em_settings(**kw) -> JudgeSettings:
    return resolve_settings("exact_match", None, {f"judge_{k}": v for k, v in kw.items()}, environ={})


def vlm_settings(**kw) -> JudgeSettings:
    return resolve_settings("vlm", None, {f"judge_{k}": v for k, v in kw.items()}, environ={})


# ---------------------------------------------------------------------- price table
@pytest.mark.parametrize("model, expected", [
    ("gpt-4-turbo-2024-04-09", (10.0, 30.0)),  # exact-match default
    ("gemini-2.5-pro", (1.25, 10.0)),  # VLM default
    ("gpt-4o-2024-08-06", (2.5, 10.0)),  # VLM default on OpenAI
    ("gpt-4o", (2.5, 10.0)),
    ("gpt-4o-2024-05-13", (5.0, 15.0)),  # a dated snapshot with its own row beats the undated one
    ("gpt-4o-mini-2024-07-18", (0.15, 0.60)),  # dated snapshot -> undated row
    ("gpt-4.1-2025-04-14", (2.0, 8.0)),
    ("gpt-4.1-mini", (0.40, 1.60)),
    ("gpt-4.1-nano", (0.10, 0.40)),
    ("o3", (2.0, 8.0)),
    ("o4-mini-2025-04-16", (1.10, 4.40)),
    ("gpt-5-2025-08-07", (1.25, 10.0)),
    ("gpt-5-mini", (0.25, 2.0)),
    ("gpt-5-nano", (0.05, 0.40)),
    ("gemini-2.5-flash", (0.30, 2.50)),
    ("gemini-2.5-flash-lite", (0.10, 0.40)),
    ("gemini-2.0-flash-001", (0.10, 0.40)),  # a stable Gemini version -> its row
    ("openai/gpt-4o-mini", (0.15, 0.60)),  # provider prefixes
    ("models/gemini-2.5-pro", (1.25, 10.0)),
    ("google/Gemini-2.5-Flash", (0.30, 2.50)),  # case
    ("  gpt-4o  ", (2.5, 10.0)),
    ("gpt-4o-mini-search", None),  # no prefix matching: never another model's price
    ("gemini-2.5-flash-preview-05-20", None),  # previews were priced differently
    ("my-finetune", None),
    ("llama-3-70b", None),
])
def test_lookup(model, expected):
    price = prices.lookup(model)
    assert (None if price is None else (price.input, price.output)) == expected


@pytest.mark.parametrize("model", sorted(prices.TABLE))
def test_every_row_has_half_price_batch_and_sane_cache(model):
    price = prices.TABLE[model]
    assert price.batch_input == pytest.approx(price.input / 2)
    assert price.batch_output == pytest.approx(price.output / 2)
    assert price.cached_input is None or price.cached_input < price.input
    assert price.output >= price.input


def test_gemini_pro_long_prompt_tier():
    pro = prices.lookup("gemini-2.5-pro")
    assert pro.rates(batch=False, prompt_tokens=200_000) == (1.25, 10.0)
    assert pro.rates(batch=False, prompt_tokens=200_001) == (2.50, 15.0)
    assert pro.rates(batch=True, prompt_tokens=200_001) == (1.25, 7.5)
    assert pro.rates(batch=True) == (0.625, 5.0)


def test_local_judge_is_free_and_azure_deployments_are_unknown():
    assert prices.price_for(em_settings(backend="local")) == prices.LOCAL_PRICE
    assert prices.LOCAL_PRICE.rates(batch=True) == (0.0, 0.0)
    # Azure judge_model is a deployment name: only an override can price it
    assert prices.price_for(em_settings(backend="azure", model="my-deployment")) is None


# ---------------------------------------------------------------------- overrides
def test_override_from_json_setting_wins_over_the_table():
    s = em_settings(model="gpt-4o", prices='{"gpt-4o": {"input": 1, "output": 2}, "My-Model": {"input": "0.5", '
                    '"output": 1.5, "batch_input": 0.2, "batch_output": 0.6, "cached_input": 0.1}}')
    assert (prices.price_for(s).input, prices.price_for(s).output) == (1.0, 2.0)
    assert prices.price_for(s).source == "judge_prices"
    mine = prices.price_for(em_settings(model="openai/my-model", prices=s.prices))
    assert mine.rates(batch=True) == (0.2, 0.6) and mine.cached_input == 0.1
    # no batch price given: batch cost is unknown, never the online price or a guess
    assert prices.price_for(s).rates(batch=True) is None


@pytest.mark.parametrize("ext, text", [
    (".json", '{"judge-x": {"input": 3, "output": 9, "batch_input": 1.5, "batch_output": 4.5}}'),
    (".yaml", "judge-x:\n  input: 3\n  output: 9\n  batch_input: 1.5\n  batch_output: 4.5\n"),
    (".yml", "judge-x: {input: 3, output: 9, batch_input: 1.5, batch_output: 4.5}\n"),
])
def test_override_from_file(tmp_path, ext, text):
    path = tmp_path / f"prices{ext}"
    path.write_text(text, encoding="utf-8")
    price = prices.price_for(em_settings(model="judge-x", prices=str(path)))
    assert price.rates(batch=False) == (3.0, 9.0) and price.rates(batch=True) == (1.5, 4.5)
    assert str(path) in price.source


@pytest.mark.parametrize("value, says", [
    ("{not json", "not valid JSON"),
    ("[1, 2]", "neither a JSON object nor"),
    ("prices.txt", "neither a JSON object nor a .json/.yaml file"),
    ("/no/such/prices.json", "cannot read /no/such/prices.json"),
    ("{}", "non-empty object"),
    ('{"m": 3}', "must be an object with input and output"),
    ('{"m": {"input": 1}}', "lacks output"),
    ('{"m": {"input": 1, "output": 2, "per_call": 5}}', "unknown field(s) per_call"),
    ('{"m": {"input": -1, "output": 2}}', "0 or more"),
    ('{"m": {"input": "cheap", "output": 2}}', "not a number"),
    ('{"m": {"input": true, "output": 2}}', "not a number"),
    ('{"m": {"input": 1e999, "output": 2}}', "finite"),
])
def test_bad_override_says_what_to_write(value, says):
    with pytest.raises(ConfigError) as info:
        prices.load_overrides(value)
    assert says in str(info.value)
    if "unknown field" not in says and "cannot read" not in says:
        assert '"input"' in str(info.value) or "input" in str(info.value)


def test_bad_yaml_file(tmp_path):
    path = tmp_path / "p.yaml"
    path.write_text("m: {input: 1, output: [\n", encoding="utf-8")
    with pytest.raises(ConfigError, match="cannot be parsed"):
        prices.load_overrides(str(path))


# ---------------------------------------------------------------------- estimate on real prompts
@pytest.fixture(scope="module")
def gsm8k_requests():
    """(request per doc of the GSM8K test set, with the real GPT-3 output for the first 100 docs)."""
    import datasets

    docs = list(data_sets.get("gsm8k").process_docs(datasets.Dataset.from_list(read_jsonl(GSM8K))))
    outputs = {row["doc_id"]: row["response"] for row in read_jsonl(OUTPUTS)}
    judge = JUDGES["exact_match"]
    return [judge.request(doc, outputs.get(i, doc["answer"])) for i, doc in enumerate(docs)]


def documented_text_tokens(text: str) -> int:
    """The documented rule, counted independently: letters+whitespace / 4.8, digits / 2.5, others 1 each."""
    words = len(re.findall(r"[A-Za-z \t\n\r\x0b\x0c]", text))
    digits = len(re.findall(r"[0-9]", text))
    return math.ceil(words / 4.8 + digits / 2.5 + (len(text) - words - digits))


def documented_prompt_tokens(request: JudgeRequest) -> int:
    return documented_text_tokens(request.prompt) + documented_text_tokens(request.output_text or "") + 7


@pytest.mark.parametrize("text, tokens", [
    ("", 0),
    ("hello world", 3),  # 11 letters and spaces / 4.8
    ("12345", 2),  # 5 digits / 2.5
    ("\\frac{1}{2}", 7),  # 4 letters (0.83) + 2 digits (0.8) + 5 symbols
    ("x = 18.00", 5),  # "x  " 3 -> 0.625; 4 digits -> 1.6; "=" and "." -> 2; ceil(4.225)
    ("日本語", 3),  # other scripts: one token per character
    ("a" * 4800, 1000),
])
def test_text_token_rule(text, tokens):
    assert token_rules.text_tokens(text) == tokens == documented_text_tokens(text)


def test_estimate_exact_match_default_judge_on_gsm8k(gsm8k_requests):
    s = em_settings()
    e = estimate(iter(gsm8k_requests), s, task="mathjudge_gsm8k", cached=5)
    n = len(gsm8k_requests)
    prompt = sum(documented_prompt_tokens(r) for r in gsm8k_requests)
    assert (e.requests, e.cached, e.prompt_tokens) == (n, 5, prompt)
    assert e.completion_tokens == 60 * n and e.completion_tokens_max == 1024 * n
    assert e.usd == pytest.approx((prompt * 10 + 60 * n * 30) / 1e6)
    assert e.usd_max == pytest.approx((prompt * 10 + 1024 * n * 30) / 1e6)
    assert 300 < prompt / n < 900  # the template (~280 tokens) + a GSM8K problem, solution and response
    assert e.judge == "openai:gpt-4-turbo-2024-04-09" and e.unpriced == ()
    if n == 1319:  # the full test set with the default judge, online
        assert 6.0 < e.usd < 16.0  # measured: $13.26 (the fenced prompt with the answer policy; $8.81 before)


def test_estimate_batch_is_half_and_local_is_free(gsm8k_requests):
    online = estimate(gsm8k_requests, em_settings(model="gpt-4o-mini"))
    batch = estimate(gsm8k_requests, em_settings(model="gpt-4o-mini", mode="batch"))
    assert batch.usd == pytest.approx(online.usd / 2) and batch.mode == "batch"
    local = estimate(gsm8k_requests, em_settings(backend="local"))
    assert (local.usd, local.usd_max, local.prompt_tokens, local.requests) == (0.0, 0.0, 0, len(gsm8k_requests))


@pytest.mark.parametrize("overrides, thinking", [
    ({"model": "gpt-4-turbo-2024-04-09"}, 0),
    ({"model": "o3"}, 1000),  # OpenAI's default effort: medium
    ({"model": "o4-mini", "reasoning_effort": "low"}, 400),
    ({"model": "gpt-5", "reasoning_effort": "high"}, 3000),
    ({"model": "gpt-5-chat-latest"}, 0),  # a chat model
    ({"backend": "gemini", "model": "gemini-2.5-pro"}, 1000),
    ({"backend": "gemini", "model": "gemini-2.5-flash", "thinking_budget": 0}, 0),
    ({"backend": "gemini", "model": "gemini-2.5-flash", "thinking_budget": 256}, 256),
    ({"backend": "gemini", "model": "gemini-2.5-flash-lite"}, 0),  # does not think unless asked
    ({"backend": "gemini", "model": "gemini-2.5-flash-lite", "thinking_budget": -1}, 1000),
    ({"backend": "local"}, 0),
])
def test_expected_thinking(overrides, thinking):
    assert expected_thinking(em_settings(**overrides)) == thinking


def test_estimate_vlm_on_gemini_counts_thinking_and_separate_output_part(gsm8k_requests):
    import datasets

    docs = list(data_sets.get("gsm8k").process_docs(datasets.Dataset.from_list(read_jsonl(GSM8K)[:20])))
    requests = [JUDGES["vlm"].request(doc, doc["answer"]) for doc in docs]
    assert all(r.output_text for r in requests)
    e = estimate(requests, vlm_settings())  # gemini-2.5-pro, max_tokens 8192
    prompt = sum(documented_prompt_tokens(r) for r in requests)
    assert e.prompt_tokens == prompt and e.completion_tokens == 20 * (100 + 1000)
    assert e.usd == pytest.approx((prompt * 1.25 + 20 * 1100 * 10) / 1e6)
    assert e.usd_max == pytest.approx((prompt * 1.25 + 20 * 8192 * 10) / 1e6)


def test_estimate_unknown_model_is_unknown_not_guessed(gsm8k_requests):
    e = estimate(gsm8k_requests[:10], em_settings(model="my-finetune"))
    assert e.usd is None and e.usd_max is None and e.unpriced == ("openai:my-finetune",)
    assert e.prompt_tokens > 0  # tokens are still counted
    nothing = estimate([], em_settings(model="my-finetune"), cached=10)  # all cached: free, known
    assert (nothing.usd, nothing.unpriced) == (0.0, ())
    total = combine([e, estimate(gsm8k_requests[:10], em_settings())])
    assert total.usd == pytest.approx(estimate(gsm8k_requests[:10], em_settings()).usd)
    assert total.unpriced == ("openai:my-finetune",) and total.requests == 20
    assert combine([e]).usd is None


# ---------------------------------------------------------------------- media rules
def _pil(fmt: str, size: tuple[int, int]) -> bytes:
    from PIL import Image

    buf = io.BytesIO()
    Image.new("RGB", size, (200, 10, 10)).save(buf, format=fmt)
    return buf.getvalue()


def _mp4(seconds: float, moov_last: bool = False, version: int = 0) -> bytes:
    def box(kind: bytes, body: bytes) -> bytes:
        return struct.pack(">I", 8 + len(body)) + kind + body
    scale = 600
    if version == 1:
        mvhd = bytes([1, 0, 0, 0]) + bytes(16) + struct.pack(">IQ", scale, int(seconds * scale)) + bytes(80)
    else:
        mvhd = bytes(4) + bytes(8) + struct.pack(">II", scale, int(seconds * scale)) + bytes(80)
    parts = [box(b"ftyp", b"isom\x00\x00\x02\x00isomiso2mp41"), box(b"mdat", bytes(4096)),
             box(b"moov", box(b"mvhd", mvhd))]
    if not moov_last:
        parts[1], parts[2] = parts[2], parts[1]
    return b"".join(parts)


@pytest.mark.parametrize("fmt, size, openai_tokens, gemini_tokens", [
    ("PNG", (1024, 1024), 765, 4 * 258),  # OpenAI's documented example: 4 tiles
    ("JPEG", (2048, 4096), 1105, 3 * 6 * 258),  # OpenAI's documented example: 6 tiles
    ("WEBP", (300, 200), 85 + 170, 258),
    ("GIF", (384, 384), 85 + 170, 258),
    ("PNG", (600, 100), 85 + 170 * 2, 258),  # short side below 768 is kept: 2x1 tiles; one 768-px Gemini tile
])
def test_image_tokens(tmp_path, fmt, size, openai_tokens, gemini_tokens):
    path = tmp_path / f"out.{fmt.lower().replace('jpeg', 'jpg')}"
    path.write_bytes(_pil(fmt, size))
    media = load_media(str(path))
    assert token_rules.image_size(media) == size
    assert token_rules.media_tokens(media, "openai") == openai_tokens
    assert token_rules.media_tokens(media, "gemini") == gemini_tokens


@pytest.mark.parametrize("blob, seconds", [
    (_mp4(8.0), 8), (_mp4(4.2, moov_last=True), 5), (_mp4(12.0, version=1), 12),
    (media_fixtures.webm(), 10),  # no duration read from WebM: the documented default
])
def test_video_tokens(tmp_path, blob, seconds):
    ext = ".webm" if blob.startswith(b"\x1a\x45\xdf\xa3") else ".mp4"
    path = tmp_path / f"clip{ext}"
    path.write_bytes(blob)
    media = load_media(str(path))
    assert token_rules.media_tokens(media, "gemini") == seconds * 300
    assert token_rules.media_tokens(media, "openai") == 0  # refused before sending: the openai judge takes no video
    request = JudgeRequest(prompt="p" * 48, media=(media,))  # 48 letters: 10 tokens
    assert token_rules.prompt_tokens(request, "gemini") == 10 + 7 + seconds * 300


# ---------------------------------------------------------------------- cost of usage
@pytest.mark.parametrize("model, backend, usage, batch_usage, online, batch", [
    # OpenAI chat: 1,000 prompt + 100 completion at gpt-4o
    ("gpt-4o", "openai", {"prompt_tokens": 1000, "completion_tokens": 100, "total_tokens": 1100}, None,
     (1000 * 2.5 + 100 * 10) / 1e6, 0.0),
    # o3: reasoning tokens are inside completion_tokens, billed once as output
    ("o3", "openai", {"prompt_tokens": 800, "completion_tokens": 1500, "reasoning_tokens": 1400}, None,
     (800 * 2 + 1500 * 8) / 1e6, 0.0),
    # Gemini: thoughts are billed on top of the candidates
    ("gemini-2.5-pro", "gemini", {"prompt_tokens": 900, "completion_tokens": 60, "thoughts_tokens": 700,
                                  "total_tokens": 1660}, None, (900 * 1.25 + 760 * 10) / 1e6, 0.0),
    # cached prompt tokens at the cached rate
    ("gpt-4.1", "openai", {"prompt_tokens": 2000, "cached_tokens": 1024, "completion_tokens": 50}, None,
     (976 * 2 + 1024 * 0.5 + 50 * 8) / 1e6, 0.0),
    # batch replies at batch rates, online ones at online rates
    ("gemini-2.5-flash", "gemini", {"prompt_tokens": 100, "completion_tokens": 10},
     {"prompt_tokens": 10_000, "completion_tokens": 1000, "thoughts_tokens": 3000},
     (100 * 0.3 + 10 * 2.5) / 1e6, (10_000 * 0.15 + 4000 * 1.25) / 1e6),
    ("my-model", "openai", {"prompt_tokens": 10, "completion_tokens": 1}, None, None, 0.0),
    ("my-model", "openai", {}, {}, 0.0, 0.0),  # nothing spent costs 0 even without a price
    ("math-verify", "local", {}, None, 0.0, 0.0),
])
def test_cost_of(model, backend, usage, batch_usage, online, batch):
    s = em_settings(backend=backend, model=model) if backend != "local" else em_settings(backend="local")
    c = cost_of(usage, batch_usage, s)
    assert c.online == (None if online is None else pytest.approx(online))
    assert c.batch == pytest.approx(batch)
    assert c.total == (None if online is None else pytest.approx(online + batch))


def test_tokens_of_splits_visible_and_thinking():
    assert tokens_of({"prompt_tokens": 5, "completion_tokens": 30, "reasoning_tokens": 20}) == \
        Tokens(prompt=5, completion=10, thinking=20)
    assert tokens_of({"prompt_tokens": 5, "completion_tokens": 30, "thoughts_tokens": 20}) == \
        Tokens(prompt=5, completion=30, thinking=20)
    assert tokens_of({"prompt_tokens": True, "completion_tokens": "9"}) == Tokens()


# ---------------------------------------------------------------------- ledger
def test_ledger_rows_dict_and_table():
    ledger = Ledger()
    em, vlm = em_settings(), vlm_settings()
    ledger.record("mathjudge_gsm8k", em, requests=100, calls=98, cached=2, failed=1,
                  usage={"prompt_tokens": 50_000, "completion_tokens": 6000})
    ledger.record("mathjudge_gsm8k_vlm", vlm, requests=10, calls=10,
                  usage={"prompt_tokens": 5000, "completion_tokens": 900, "thoughts_tokens": 9000},
                  batch_usage={"prompt_tokens": 1000, "completion_tokens": 100, "thoughts_tokens": 900})
    ledger.record("mathjudge_math500", em_settings(model="my-finetune"), requests=3, calls=3,
                  usage={"prompt_tokens": 10, "completion_tokens": 5})
    d = json.loads(json.dumps(ledger.as_dict()))  # JSON-able
    gsm = d["tasks"]["mathjudge_gsm8k"]
    assert (gsm["calls"], gsm["cached"], gsm["failed"]) == (98, 2, 1)
    assert gsm["usd"] == pytest.approx(0.5 + 0.18)
    assert gsm["judges"]["openai:gpt-4-turbo-2024-04-09"]["price"]["input"] == 10.0
    v = d["tasks"]["mathjudge_gsm8k_vlm"]
    assert v["thinking_tokens"] == 9900 and v["prompt_tokens"] == 6000
    assert v["usd_online"] == pytest.approx((5000 * 1.25 + 9900 * 10) / 1e6)
    assert v["usd_batch"] == pytest.approx((1000 * 0.625 + 1000 * 5) / 1e6)
    assert d["tasks"]["mathjudge_math500"]["usd"] is None  # its only judge has no price
    assert d["unpriced"] == ["openai:my-finetune"]
    assert d["total"]["calls"] == 111
    assert d["total"]["usd"] == pytest.approx(gsm["usd"] + v["usd"])
    table = ledger.table().splitlines()
    assert len(table) == 3 + 3 + 2 + 1  # title, header, rule, 3 tasks, rule, total, the unpriced note
    assert table[3].startswith("mathjudge_gsm8k ") and "0.6800" in table[3]
    assert table[5].split()[-1] == "unknown"
    assert table[7].startswith("total") and table[7].endswith("*")
    assert "no price for openai:my-finetune" in table[8]
    assert len({len(line) for line in table[1:8]}) == 1  # fixed width


def test_ledger_never_raises_after_the_calls_were_paid():
    ledger = Ledger()
    bad = em_settings(model="gpt-4o", prices='{"gpt-4o": {"input": 1}}')  # lacks output
    row = ledger.record("t", bad, requests=2, calls=2, usage={"prompt_tokens": 100, "completion_tokens": 10})
    assert row.usd is None and row.prompt_tokens == 100
    d = ledger.as_dict()
    assert "lacks output" in d["price_errors"]["openai:gpt-4o"] and d["unpriced"] == ["openai:gpt-4o"]
    assert "lacks output" in ledger.table().splitlines()[-1]


def test_ledger_accumulates_across_threads():
    ledger = Ledger()
    s = em_settings(model="gpt-4o-mini")

    def worker():
        for _ in range(200):
            ledger.record("t", s, requests=1, calls=1, usage={"prompt_tokens": 1000, "completion_tokens": 100})
    threads = [threading.Thread(target=worker) for _ in range(8)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    row = ledger.task_row("t")
    assert (row.calls, row.prompt_tokens) == (1600, 1_600_000)
    assert row.usd == pytest.approx(1600 * (1000 * 0.15 + 100 * 0.6) / 1e6)


def test_ledger_from_judge_stats():
    from lm_eval_mathjudge.judging.client import JudgeStats

    stats = JudgeStats(requests=12, unique=10, cache_hits=4, calls=6)
    stats.failures.update({"unparseable": 1})
    stats.usage.update({"prompt_tokens": 3000, "completion_tokens": 300})
    row = Ledger().record_stats("t", em_settings(model="gpt-4o"), stats)
    assert (row.requests, row.calls, row.cached, row.failed) == (12, 6, 4, 1)
    assert row.usd == pytest.approx((3000 * 2.5 + 300 * 10) / 1e6)


# ---------------------------------------------------------------------- budget and dry run
def _estimate(usd: float | None, unpriced=()) -> Estimate:
    return Estimate(task="all tasks", judge="openai:gpt-4o", mode="online", requests=1319, cached=0,
                         prompt_tokens=700_000, completion_tokens=80_000, completion_tokens_max=1_350_000,
                         usd=usd, usd_max=None if usd is None else usd * 5, unpriced=tuple(unpriced))


@pytest.mark.parametrize("budgets, usd, refused", [
    ([None], 100.0, False),  # no budget: never refused
    ([5.0], 4.99, False),
    ([5.0], 5.0, False),  # at the budget: allowed
    ([5.0], 5.01, True),
    ([None, 2.0], 3.0, True),  # one judge's budget (e.g. vlm_judge_budget_usd) binds the run
    ([10.0, 2.0], 3.0, True),  # the smallest budget wins
    ([0.0], 0.0, False),
])
def test_check_budget(budgets, usd, refused):
    settings = [em_settings(**({} if b is None else {"budget_usd": b})) for b in budgets]
    if not refused:
        assert check_budget(_estimate(usd), settings) is None
        return
    with pytest.raises(BudgetExceeded) as info:
        check_budget(_estimate(usd), settings)
    message = str(info.value)
    assert f"judge_budget_usd={min(b for b in budgets if b is not None):g}" in message
    assert f"${usd:,.2f}" in message and "1,319 judge call(s)" in message and "Nothing was sent" in message
    assert "judge_mode=batch" in message and "--limit" in message
    assert isinstance(info.value, ConfigError) and info.value.budget == min(b for b in budgets if b is not None)


def test_budget_refusal_names_where_the_generations_are():
    asked = []

    def saved() -> str:
        asked.append(1)
        return "The generations of 1 task(s) are saved in /tmp/g/generations-1.jsonl: rerun with ..."
    check_budget(_estimate(1.0), [em_settings(budget_usd=2)], saved=saved)
    assert asked == []  # within budget: nothing is written
    with pytest.raises(BudgetExceeded) as info:
        check_budget(_estimate(3.0), [em_settings(budget_usd=2)], saved=saved)
    assert str(info.value).endswith("saved in /tmp/g/generations-1.jsonl: rerun with ...") and asked == [1]


def test_budget_with_an_unpriced_judge_refuses():
    with pytest.raises(BudgetExceeded, match="has no price.*judge_prices"):
        check_budget(_estimate(1.0, unpriced=["openai:my-finetune"]), [em_settings(budget_usd=100)])
    assert check_budget(_estimate(None, unpriced=["openai:my-finetune"]), [em_settings()]) is None


@pytest.mark.parametrize("budget, verdict", [(None, ""), (100.0, "within judge_budget_usd=100"),
                                             (1.0, "NOT within judge_budget_usd=1")])
def test_dry_run_stop(budget, verdict):
    saved = "The generations of 2 task(s) are saved in /tmp/x/generations-1.jsonl: rerun with ..."
    settings = [em_settings(dry_run=True, **({} if budget is None else {"budget_usd": budget}))]
    stop = dry_run_stop(_estimate(6.5), settings, saved=saved)
    assert isinstance(stop, DryRunDone) and isinstance(stop, JudgeRunError)
    message = str(stop)
    assert message.startswith("dry run (judge_dry_run=true): nothing was sent to any judge.")
    assert "about $6.50" in message and "at most $32.50" in message and saved in message
    assert "rerun the same command without judge_dry_run" in message
    assert verdict in message
    assert stop.estimate.usd == 6.5


def test_format_estimates_table(gsm8k_requests):
    rows = [estimate(gsm8k_requests[:50], em_settings(), task="mathjudge_gsm8k"),
            estimate(gsm8k_requests[:50], em_settings(model="my-finetune"), task="mathjudge_gsm8k_mine")]
    lines = format_estimates(rows).splitlines()
    assert lines[3].startswith("mathjudge_gsm8k ") and lines[4].split()[-2:] == ["unknown", "unknown"]
    assert lines[6].startswith("total") and "all judges" in lines[6]
    assert f"{rows[0].usd:.4f}" in lines[6]
    assert "no price for openai:my-finetune" in lines[7]


# ---------------------------------------------------------------- the prices setting as an object
def test_prices_given_as_an_object_in_metadata_is_kept_as_json():
    import json

    from lm_eval_mathjudge.settings.layers import resolve_settings

    table = {"my-judge": {"input": 1.0, "output": 4.0}}
    settings = resolve_settings("exact_match", None, {"judge_prices": table, "judge_model": "my-judge"}, environ={})
    assert json.loads(settings.prices) == table
    assert prices.price_for(settings).input == 1.0


def test_a_bad_price_override_stops_the_task_when_it_is_built(tmp_path, monkeypatch):
    from lm_eval_mathjudge.core.errors import ConfigError
    from lm_eval_mathjudge.harness.task import JudgedTask

    monkeypatch.setenv("MATHJUDGE_DATA_DIR", "examples/data")
    config = {"task": "gsm8k_gpt4em", "mathjudge": {"judge": "exact_match"}, "mathjudge_dataset": "gsm8k",
              "metadata": {"judge_backend": "local", "judge_prices": '{"m": {"input": "cheap"}}'}}
    with pytest.raises(ConfigError, match="prices"):
        JudgedTask(config=config)


def test_answer_tokens_are_priced_as_prompt_tokens_of_every_request(gsm8k_requests):
    s = em_settings()
    plain, longest = estimate(gsm8k_requests, s), estimate(gsm8k_requests, s, answer_tokens=4096)
    n = len(gsm8k_requests)
    assert longest.prompt_tokens == plain.prompt_tokens + 4096 * n
    assert longest.usd == pytest.approx(plain.usd + 4096 * n * 10 / 1e6)  # gpt-4-turbo: $10 per M input


class _Client:
    """What spend reads of a judging client: its settings and whether the cache answers a key."""

    def __init__(self, settings, cached=()):
        self.settings, self._cached = settings, set(cached)

    def settled(self, key):
        return key in self._cached


@pytest.mark.parametrize("budget, answer_tokens, fits", [
    (None, 4096, True),  # no budget: nothing to check
    (1000.0, 4096, True),
    (0.0001, 0, False),
    ("between", 0, True),  # the plain estimate fits this budget ...
    ("between", 4096, False),  # ... answers of 4,096 tokens each would not
])
def test_worst_case_prices_every_request_with_its_longest_answer_and_ignores_the_cache(
        gsm8k_requests, budget, answer_tokens, fits):
    from lm_eval_mathjudge.cost.spend import Part, worst_case

    requests = gsm8k_requests[:20]
    plain = estimate(requests, em_settings()).usd
    limit = 2 * plain if budget == "between" else budget
    client = _Client(em_settings(**({} if limit is None else {"budget_usd": limit})),
                     cached=[f"k{i}" for i in range(20)])  # all cached: the worst case counts them anyway
    part = Part("t", client, lambda: ((f"k{i}", r) for i, r in enumerate(requests)), answer_tokens=answer_tokens)
    ok, worst = worst_case([part])
    assert ok is fits
    if limit is None:
        assert worst is None
    else:
        assert worst.requests == 20 and worst.cached == 0
        assert worst.usd == pytest.approx(plain + 20 * answer_tokens * 10 / 1e6)


@pytest.mark.parametrize("kwargs, longest", [
    ({"max_gen_toks": 4096, "until": []}, 4096),
    ({"max_gen_toks": "2048"}, 2048),
    ({"max_tokens": 100, "max_gen_toks": 300}, 300),  # the largest limit named
    ({"temperature": 0.0}, None),  # none named: the model adapter's own limit, unknown to the task
    (None, None),
    ({"max_gen_toks": "lots"}, None),
])
def test_the_longest_answer_comes_from_the_generation_kwargs(kwargs, longest):
    from lm_eval_mathjudge.harness.render import longest_answer

    assert longest_answer(kwargs) == longest
