"""The vendor records (lm_eval_mathjudge/vendors): each one whole and consistent, and the one source
the settings, the cost table, the credential check, the endpoint rule and the messages read."""

from __future__ import annotations

import re

import pytest

from lm_eval_mathjudge import vendors
from lm_eval_mathjudge.cost import prices
from lm_eval_mathjudge.judging import preflight
from lm_eval_mathjudge.settings import credentials, models, schema
from tests.conftest import REPO

RECORDS = [pytest.param(v, id=v.name) for v in vendors.VENDORS]
API_RECORDS = [pytest.param(v, id=v.name) for v in vendors.VENDORS if v.credentials is not None]


@pytest.mark.parametrize("vendor", RECORDS)
def test_each_record_names_transports_that_exist(vendor):
    for module in filter(None, (vendor.transport, vendor.batch)):
        path = REPO / "lm_eval_mathjudge" / "backends" / (module.replace(".", "/") + ".py")
        assert path.is_file(), f"{vendor.name}: backends/{module} is not a module"
        assert re.search(r"^def create\(", path.read_text(), re.M), f"backends/{module} has no create()"


@pytest.mark.parametrize("vendor", API_RECORDS)
def test_each_api_record_is_whole(vendor):
    assert vendor.judges and vendor.endpoint is not None and vendor.sdk and vendor.preflight
    assert set(vendor.credentials.keys) <= set(vendor.credentials.variables)
    read = [*vendor.credentials.variables, *filter(None, [vendor.endpoint.variable])]
    assert all(v.startswith(vendor.env_prefixes) for v in read if "GENAI_USE" not in v), \
        "the preflight memory must see every variable the SDK reads"
    if vendor.prices:
        assert vendor.prices_as_of and re.fullmatch(r"\d{4}-\d{2}-\d{2}", vendor.prices_as_of)
        for default in vendor.judges.values():  # a default judge has a price: its dry run is never "unknown"
            assert prices.lookup(default.model) is not None, default.model


@pytest.mark.parametrize("vendor", RECORDS)
def test_the_settings_the_credentials_and_the_cost_table_read_the_records(vendor):
    assert vendor.name in schema.BACKENDS
    for judge, default in vendor.judges.items():
        assert models.DEFAULTS[(judge, vendor.name)] == {"model": default.model, "max_tokens": default.max_tokens}
    if vendor.credentials is not None:
        assert credentials.SERVICES[vendor.name] is vendor.credentials
        assert set(vendor.credentials.keys) <= set(credentials.KEY_VARIABLES)
        assert set(vendor.env_prefixes) <= set(preflight.SDK_ENV_PREFIXES)
    for model, price in vendor.prices.items():
        assert prices.TABLE[model].input == price.input and vendor.name in prices.TABLE[model].source


def test_model_prices_have_one_owner():
    owners = [model for vendor in vendors.VENDORS for model in vendor.prices]
    assert len(owners) == len(set(owners))


def test_the_messages_that_list_backends_follow_the_records(monkeypatch):
    """A new record appears in every list a message gives (here: an imaginary vendor with a batch API)."""
    import dataclasses

    extra = dataclasses.replace(vendors.OPENAI, name="imaginary", aliases=None)
    monkeypatch.setattr(vendors, "VENDORS", (*vendors.VENDORS, extra))
    assert "imaginary" in vendors.names("vlm", api=True) and "imaginary" in vendors.names(batch=True)
    assert vendors.listed(["a", "b", "c"]) == "a, b or c" and vendors.listed(["a"], "and") == "a"


def test_no_vendor_is_named_outside_its_record_and_its_transport():
    """Outside vendors/ and backends/<transport>/, code names a backend only through the records (comments,
    docstrings, the generators' own services and the endpoint rules' special cases excepted)."""
    names = [v.name for v in vendors.VENDORS if v.credentials is not None]
    pattern = re.compile(r"""(?<![\w.])["'](""" + "|".join(map(re.escape, names)) + r""")["']""")
    allowed = ("vendors/", "backends/openai/", "backends/gemini/", "backends/anthropic/", "generators/")
    found = []
    for path in (REPO / "lm_eval_mathjudge").rglob("*.py"):
        rel = path.relative_to(REPO / "lm_eval_mathjudge").as_posix()
        if rel.startswith(allowed):
            continue
        code = "\n".join(line.split("#", 1)[0] for line in path.read_text().splitlines())
        code = re.sub(r'"""[\s\S]*?"""', "", code)
        found += [f"{rel}: {m.group(0)}" for m in pattern.finditer(code)]
    assert sorted(found) == sorted(KNOWN_NAMINGS), found


# What still names a vendor outside its record, and why (each a fact about that one service or a default):
KNOWN_NAMINGS = [
    'settings/models.py: "openai"',  # the default backend of the exact-match judge (Orca-Math's GPT-4-Turbo)
    'settings/models.py: "gemini"',  # the default backend of the VLM judge (the protocol's Gemini 2.5 Pro)
    'settings/schema.py: "gemini"',  # the example value in the backend setting's row
    'settings/schema.py: "openai"', 'settings/schema.py: "gemini"',  # the example panel in the members row
    'settings/kinds.py: "openai"', 'settings/kinds.py: "openai"',  # examples of panel members in two messages
    'backends/endpoints.py: "openai"', 'backends/endpoints.py: "azure"',  # the three endpoint rules of their own
    'backends/endpoints.py: "azure"', 'backends/endpoints.py: "gemini"', 'backends/endpoints.py: "gemini"',
    'backends/wire/sdks.py: "openai"',  # the openai SDK's bounded client, named in its message
]
