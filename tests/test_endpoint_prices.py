"""A judge served anywhere but its vendor's own service has no list price: "unknown" unless judge_prices says.

The vendor's own hosts are in its record (``Endpoint.hosts``); ``endpoints.custom_endpoint`` reads the
URL each SDK starts from (judge_base_url, else its variable). The tables below are URLs a user could
write, the real SDKs' reading of them, and what the cost table, the estimate and the budget then say.
"""

from __future__ import annotations

import json

import pytest

from lm_eval_mathjudge import vendors
from lm_eval_mathjudge.backends import endpoints
from lm_eval_mathjudge.core.errors import EXIT_CODES
from lm_eval_mathjudge.core.types import JudgeRequest
from lm_eval_mathjudge.cost import budget, estimate, ledger, prices
from lm_eval_mathjudge.settings.schema import JudgeSettings
from tests._helpers import list_prices

LOOPBACK = "http://127.0.0.1:8000/v1"
MODEL = "gpt-4-turbo"  # a model in the table: what a local vLLM may well call the model it serves

HOSTS = [
    # backend, URL, on the vendor's own service?
    pytest.param("openai", "https://api.openai.com/v1", True, id="openai"),
    pytest.param("openai", "https://api.openai.com/v1/", True, id="openai-trailing-slash"),
    pytest.param("openai", "https://api.openai.com", True, id="openai-no-path"),
    pytest.param("openai", "https://API.OpenAI.COM/v1", True, id="openai-upper-case"),
    pytest.param("openai", "https://api.openai.com:443/v1", True, id="openai-port"),
    pytest.param("openai", "https://api.openai.com./v1", True, id="openai-root-dot"),
    pytest.param("openai", "https://eu.api.openai.com/v1", True, id="openai-data-residency"),
    pytest.param("openai", "http://127.0.0.1:8000/v1", False, id="local-vllm"),
    pytest.param("openai", "http://localhost:11434/v1", False, id="ollama"),
    pytest.param("openai", "https://openrouter.ai/api/v1", False, id="another-provider"),
    pytest.param("openai", "https://api.openai.com.evil.example/v1", False, id="vendor-host-as-a-prefix"),
    pytest.param("openai", "https://evilapi.openai.com/v1", False, id="suffix-without-a-dot"),
    pytest.param("openai", "https://openai.com/v1", False, id="parent-domain"),
    pytest.param("openai", "https://api.openai.com@127.0.0.1:8000/v1", False, id="vendor-host-as-user-name"),
    pytest.param("openai", "https://user:pw@api.openai.com/v1", False, id="any-user-name"),
    pytest.param("openai", "https://api.openai.com\\@127.0.0.1/v1", False, id="backslash"),
    pytest.param("openai", "https://127.0.0.1#@api.openai.com", False, id="vendor-host-in-the-fragment"),
    pytest.param("openai", "https://127.0.0.1/?@api.openai.com", False, id="vendor-host-in-the-query"),
    pytest.param("openai", "https://api.openai.com /v1", False, id="space"),
    pytest.param("openai", "https://api%2eopenai.com/v1", False, id="percent-escaped"),
    pytest.param("openai", "https://api.open\u0430i.com/v1", False, id="cyrillic-look-alike"),
    pytest.param("openai", "api.openai.com/v1", False, id="no-scheme"),
    pytest.param("openai", "ftp://api.openai.com/v1", False, id="not-http"),
    pytest.param("openai", "http://[::1", False, id="broken-ipv6"),
    pytest.param("azure", "https://my-resource.openai.azure.com/", True, id="azure"),
    pytest.param("azure", "https://my-resource.cognitiveservices.azure.com", True, id="azure-cognitive-services"),
    pytest.param("azure", "https://my-resource.services.ai.azure.com", True, id="azure-ai-foundry"),
    pytest.param("azure", "https://my-resource.openai.azure.us", False, id="azure-sovereign-cloud"),
    pytest.param("azure", "https://my-resource-openai.azure.com", False, id="azure-suffix-without-a-dot"),
    pytest.param("azure", "https://api.openai.com/v1", False, id="azure-judge-at-openai"),
    pytest.param("gemini", "https://generativelanguage.googleapis.com", True, id="gemini"),
    pytest.param("gemini", "https://us-central1-aiplatform.googleapis.com/", True, id="vertex-regional"),
    pytest.param("gemini", "https://aiplatform.eu.rep.googleapis.com", True, id="vertex-multi-regional"),
    pytest.param("gemini", "https://evilgoogleapis.com", False, id="gemini-suffix-without-a-dot"),
    pytest.param("gemini", "https://googleapis.com.evil.example", False, id="gemini-host-as-a-prefix"),
    pytest.param("gemini", "http://127.0.0.1:9000", False, id="gemini-proxy"),
    pytest.param("anthropic", "https://api.anthropic.com", True, id="anthropic"),
    pytest.param("anthropic", "HTTPS://API.ANTHROPIC.COM/", True, id="anthropic-upper-case"),
    pytest.param("anthropic", "https://gateway.example.com/anthropic", False, id="anthropic-gateway"),
    pytest.param("anthropic", "https://api.anthropic.com.evil.example", False, id="anthropic-host-as-a-prefix"),
]


@pytest.mark.parametrize("vendor", [v for v in vendors.VENDORS if v.endpoint is not None], ids=lambda v: v.name)
def test_each_vendor_names_its_own_hosts_and_its_default_is_on_them(vendor):
    assert vendor.endpoint.hosts and all(h == h.lower().strip(".") and "/" not in h for h in vendor.endpoint.hosts)
    if vendor.endpoint.default:  # a judge left at the SDK's default is priced
        assert endpoints.on_hosts(vendor.endpoint.default, vendor.endpoint.hosts)
        assert endpoints.custom_endpoint(JudgeSettings(backend=vendor.name, model="m"), {}) is None


@pytest.mark.parametrize("backend, url, own", HOSTS)
def test_which_urls_are_the_vendors_own(backend, url, own):
    """Through the SDK's variable, which nothing checks before the SDK reads it (judge_base_url must be http)."""
    settings = JudgeSettings(backend=backend, model="m")
    custom = endpoints.custom_endpoint(settings, {vendors.get(backend).endpoint.variable: url})
    assert (custom is None) is own
    assert own or "pw@" not in custom  # shown without its user name and password


SDK_HOSTS = [p for p in HOSTS if p.values[0] in ("openai", "anthropic")]


@pytest.mark.parametrize("backend, url, own", SDK_HOSTS)
def test_a_url_called_the_vendors_goes_to_the_vendor_in_the_sdk_too(backend, url, own):
    """The strict reading is never looser than the SDK's: where we say the vendor's own, the SDK's client
    sends to the vendor's host; a URL whose SDK host is elsewhere is custom for us too."""
    import anthropic
    import openai

    try:
        client = openai.OpenAI(api_key="x", base_url=url) if backend == "openai" else \
            anthropic.Anthropic(api_key="x", base_url=url)
        host = client.base_url.host.lower().rstrip(".")
    except Exception:  # noqa: BLE001 - the SDK refuses the URL: nothing is ever sent there
        return
    on_vendor = endpoints.on_hosts(f"https://{host}/", vendors.get(backend).endpoint.hosts)
    assert not own or on_vendor, (url, host)


ENVIRONMENTS = [
    # backend, judge_base_url, environment, the custom endpoint shown (None: the vendor's own)
    pytest.param("openai", None, {}, None, id="openai-default"),
    pytest.param("openai", None, {"OPENAI_BASE_URL": LOOPBACK + "/"}, LOOPBACK, id="openai-variable"),
    pytest.param("openai", None, {"OPENAI_BASE_URL": ""}, None, id="openai-variable-empty"),
    pytest.param("openai", "https://api.openai.com/v1", {"OPENAI_BASE_URL": LOOPBACK}, None,
                 id="setting-wins-over-variable"),
    pytest.param("openai", LOOPBACK, {"OPENAI_BASE_URL": "https://api.openai.com/v1"}, LOOPBACK,
                 id="custom-setting-wins-over-variable"),
    pytest.param("openai", None, {"ANTHROPIC_BASE_URL": LOOPBACK}, None, id="another-vendors-variable"),
    pytest.param("azure", None, {"AZURE_OPENAI_ENDPOINT": "https://res.openai.azure.com"}, None, id="azure"),
    pytest.param("azure", None, {"AZURE_OPENAI_ENDPOINT": "http://127.0.0.1:9/"}, "http://127.0.0.1:9",
                 id="azure-proxy"),
    pytest.param("azure", None, {"OPENAI_BASE_URL": LOOPBACK}, None, id="azure-reads-no-openai-variable"),
    pytest.param("gemini", None, {"GOOGLE_GEMINI_BASE_URL": "http://127.0.0.1:9/"}, "http://127.0.0.1:9",
                 id="gemini-proxy"),
    pytest.param("gemini", None, {"GOOGLE_GENAI_USE_VERTEXAI": "true", "GOOGLE_CLOUD_PROJECT": "p",
                                  "GOOGLE_CLOUD_LOCATION": "us-central1"}, None, id="vertex"),
    pytest.param("gemini", None, {"GOOGLE_GENAI_USE_VERTEXAI": "true", "GOOGLE_GEMINI_BASE_URL": "http://127.0.0.1:9"},
                 "http://127.0.0.1:9", id="vertex-behind-a-proxy"),
    pytest.param("gemini", None, {"GOOGLE_GENAI_USE_VERTEXAI": "true", "GOOGLE_VERTEX_BASE_URL": "http://127.0.0.1:9"},
                 None, id="vertex-variable-the-sdk-does-not-read"),
    pytest.param("anthropic", None, {"ANTHROPIC_BASE_URL": "https://gw.example.com/v1?key=sk-ant-x"},
                 "https://gw.example.com/v1", id="anthropic-gateway"),
    pytest.param("anthropic", "https://u:sk-secret@127.0.0.1:9/", {}, "https://127.0.0.1:9", id="key-in-the-url"),
    pytest.param("openai", "https://gw.example.com/sk-canary-path-0123456789/v1", {}, "https://gw.example.com/***/v1",
                 id="key-in-the-path"),
    pytest.param("anthropic", "http://127.0.0.1:99999", {}, "a URL that does not parse", id="port-out-of-range"),
    pytest.param("local", None, {"OPENAI_BASE_URL": LOOPBACK}, None, id="local-judge"),
]


@pytest.mark.parametrize("backend, base_url, environ, shown", ENVIRONMENTS)
def test_the_endpoint_comes_from_the_setting_or_the_sdks_variable(backend, base_url, environ, shown):
    model = "math-verify" if backend == "local" else MODEL
    settings = JudgeSettings(backend=backend, model=model, base_url=base_url)
    assert endpoints.custom_endpoint(settings, environ) == shown


# ------------------------------------------------------------------------- prices

@pytest.fixture
def at(monkeypatch):
    """Point the OpenAI judge's variable somewhere (None: unset); the cost code reads the environment."""
    def point(url: str | None) -> None:
        for name in ("OPENAI_BASE_URL", "MATHJUDGE_PRICES"):
            monkeypatch.delenv(name, raising=False)
        if url is not None:
            monkeypatch.setenv("OPENAI_BASE_URL", url)
    return point


def test_the_list_price_holds_on_the_vendors_service_only(at):
    settings = JudgeSettings(model=MODEL)
    at(None)
    assert prices.price_for(settings) == prices.TABLE[MODEL]
    at("https://api.openai.com/v1")
    assert prices.price_for(settings) == prices.TABLE[MODEL] and prices.unpriced_because(settings) is None
    at(LOOPBACK)
    assert prices.price_for(settings) is None
    assert prices.price_for(JudgeSettings(model="gpt-4-turbo-2024-04-09")) is None  # nor its undated row
    given = JudgeSettings(model=MODEL, prices='{"gpt-4-turbo": {"input": 0.5, "output": 1}}')
    assert (prices.price_for(given).input, prices.price_for(given).output) == (0.5, 1.0)  # judge_prices: priced
    assert prices.price_for(JudgeSettings(model=MODEL, prices='{"other": {"input": 1, "output": 1}}')) is None
    assert prices.price_for(JudgeSettings(backend="local", model="math-verify")) == prices.LOCAL_PRICE


USAGE = {"prompt_tokens": 1_000_000, "completion_tokens": 100_000}


def test_the_cost_table_says_unknown_and_why_once(at):
    at("http://u:sk-canary-secret@127.0.0.1:8000/v1?api_key=sk-canary-query")
    book = ledger.Ledger()
    for task in ("gsm8k_gpt4em", "math500_gpt4em"):
        book.record(task, JudgeSettings(model=MODEL), requests=3, calls=3, usage=USAGE, batch_usage=USAGE)
    table = book.table()
    rows = [line for line in table.splitlines() if line.startswith(("gsm8k", "math500", "total"))]
    assert len(rows) == 3 and all(line.split()[-3:] == ["unknown"] * 3 for line in rows)
    because = f"openai:{MODEL}: served at {LOOPBACK}, not by its vendor (api.openai.com), so no list price applies"
    assert table.count(because) == 1 and table.count("served at") == 1
    assert '{"gpt-4-turbo": {"input": 0, "output": 0}}' in table  # the override to write, for this model
    block = book.as_dict()
    assert block["unpriced"] == [f"openai:{MODEL}"] and block["total"]["usd"] is None
    assert block["unpriced_because"][f"openai:{MODEL}"].startswith(f"served at {LOOPBACK}, not by its vendor")
    assert "sk-canary" not in table + json.dumps(block)


def test_judge_prices_price_a_custom_endpoint_online_and_in_batch(at):
    at(LOOPBACK)
    settings = JudgeSettings(model=MODEL, prices='{"gpt-4-turbo": {"input": 1, "output": 2, "batch_input": 0.5, '
                                                 '"batch_output": 1}}')
    book = ledger.Ledger()
    row = book.record("gsm8k_gpt4em", settings, requests=3, calls=3, usage=USAGE, batch_usage=USAGE)
    assert (row.usd_online, row.usd_batch) == (pytest.approx(1.2), pytest.approx(0.6))
    assert "unknown" not in book.table() and "served at" not in book.table()
    assert book.as_dict()["unpriced_because"] == {}


REQUESTS = [JudgeRequest(prompt=f"Judge answer {i}: the student wrote 18 and the reference is 18.") for i in range(4)]


def test_the_estimate_and_the_dry_run_table_say_unknown_and_why(at):
    at(LOOPBACK)
    parts = [estimate.estimate(REQUESTS, JudgeSettings(model=MODEL), task=task) for task in ("a", "b")]
    assert all(e.usd is None and e.usd_online is None and e.usd_batch is None for e in parts)
    table = estimate.format_estimates(parts)
    assert table.count(f"served at {LOOPBACK}, not by its vendor") == 1
    assert all(line.split()[-4:] == ["unknown"] * 4 for line in table.splitlines() if line.startswith(("a ", "b ")))
    text = estimate.describe(estimate.combine(parts))
    assert "cost unknown" in text and text.count("served at") == 1 and "add it with judge_prices" not in text
    at(None)  # the vendor's own service: the same requests at the list price
    listed = estimate.estimate(REQUESTS, JudgeSettings(model=MODEL))
    assert listed.usd > 0 and listed.because == () and "served at" not in estimate.describe(listed)


def test_a_judge_without_a_reason_keeps_the_general_hint_beside_one_with(at):
    at(LOOPBACK)
    mixed = estimate.combine([estimate.estimate(REQUESTS, JudgeSettings(model=MODEL)),
                              estimate.estimate(REQUESTS, JudgeSettings(backend="azure", model="my-deployment"))])
    text = estimate.describe(mixed)
    assert "no price for azure:my-deployment (add it with judge_prices" in text
    assert f"no price for openai:{MODEL}: served at {LOOPBACK}" in text
    with pytest.raises(budget.BudgetExceeded) as refused:
        budget.check_budget(mixed, [JudgeSettings(budget_usd=1.0)])
    assert prices.OVERRIDE_EXAMPLE in str(refused.value)  # the general example, for the judge without a reason


def test_a_budget_with_a_custom_endpoint_refuses_until_judge_prices_price_it(at):
    at(LOOPBACK)
    settings = JudgeSettings(model=MODEL, budget_usd=5.0)
    guess = estimate.estimate(REQUESTS, settings)
    with pytest.raises(budget.BudgetExceeded) as refused:
        budget.check_budget(guess, [settings])
    message = str(refused.value)
    assert "has no price, so the cost cannot be checked" in message and "Nothing was sent" in message
    assert f"served at {LOOPBACK}, not by its vendor" in message and "judge_prices" in message
    assert prices.OVERRIDE_EXAMPLE not in message  # the reason's own example, for this model, is the one to write
    priced = JudgeSettings(model=MODEL, budget_usd=5.0, prices=list_prices(MODEL))
    budget.check_budget(estimate.estimate(REQUESTS, priced), [priced])  # within it: no refusal
    assert "NOT within" in str(budget.dry_run_stop(guess, [settings]))


# ------------------------------------------------------------------------- through the lm_eval CLI

REPLAY = "examples/data/gsm8k_outputs/gpt3_175b_verifier_first100.jsonl"
DEFAULT = vendors.OPENAI.judges["exact_match"].model  # the exact-match judge's model: in the table


def _run(tmp_path, name: str, judge_url: str, **metadata):
    """gsm8k_gpt4em on three replayed answers, its judge found through OPENAI_BASE_URL as a local vLLM's is."""
    from tests.conftest import REPO
    from tests.e2e import CANARY_KEY, run_lm_eval

    return run_lm_eval(["--model", "mathjudge-replay", "--model_args", f"path={REPO / REPLAY}", "--tasks",
                        "gsm8k_gpt4em", "--limit", "3", "--metadata", json.dumps(metadata)],
                       {"MATHJUDGE_DATA_DIR": str(REPO / "examples" / "data"), "OPENAI_API_KEY": CANARY_KEY,
                        "OPENAI_BASE_URL": judge_url, "MATHJUDGE_CACHE_DIR": str(tmp_path / name / "cache")},
                       tmp_path / name / "out")


def _cost_row(stderr: str) -> list[str]:
    """The task's row of the run's cost table (the last table printed)."""
    table = stderr.rsplit("judge cost (USD", 1)[1]
    return next(line for line in table.splitlines() if line.startswith("gsm8k_gpt4em ")).split()


@pytest.mark.e2e
def test_a_run_at_a_custom_endpoint_costs_unknown_until_judge_prices_price_it(tmp_path):
    from tests.e2e import exact_match_judge
    from tests.loopback import ChatCompletionsServer

    with ChatCompletionsServer(exact_match_judge) as judge:
        url = judge.url
        unpriced = _run(tmp_path, "unpriced", url)
        refused = _run(tmp_path, "refused", url, judge_budget_usd=100)
        calls_before = judge.call_count
        priced = _run(tmp_path, "priced", url, judge_budget_usd=100, judge_prices=list_prices(DEFAULT))
    because = f"openai:{DEFAULT}: served at {url}, not by its vendor (api.openai.com), so no list price applies"
    # Judged and paid for, but at no known price: the table says unknown, and why, once.
    assert unpriced.returncode == 0, unpriced.stderr[-3000:]
    row = _cost_row(unpriced.stderr)
    assert row[3] == "3" and row[-3:] == ["unknown"] * 3  # 3 calls at no known price
    assert unpriced.stderr.count(because) == 1
    cost = unpriced.results()["configs"]["gsm8k_gpt4em"]["metadata"]["judge"]["run_cost"]
    assert cost["total"]["usd"] is None and cost["unpriced"] == [f"openai:{DEFAULT}"]
    assert cost["unpriced_because"][f"openai:{DEFAULT}"].startswith(because.split(": ", 1)[1])
    # A budget cannot be checked against an unknown price: refused before any call, saying what to set.
    text = " ".join(refused.stderr.split())
    assert refused.returncode == EXIT_CODES["budget"] and "has no price, so the cost cannot be checked" in text, text[-3000:]
    assert because in text and "judge_prices" in text and "Traceback" not in text
    assert calls_before == 3  # the unpriced run's calls only
    # judge_prices price it: dollars in the table and the results, within the budget.
    assert priced.returncode == 0, priced.stderr[-3000:]
    row = _cost_row(priced.stderr)
    assert row[3] == "3" and float(row[-1]) > 0 and "served at" not in priced.stderr
    cost = priced.results()["configs"]["gsm8k_gpt4em"]["metadata"]["judge"]["run_cost"]
    assert cost["total"]["usd"] > 0 and cost["unpriced"] == [] and cost["unpriced_because"] == {}
