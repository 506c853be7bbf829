"""Shared fixtures: slices of the real data sets, and a network guard.

The data are the embedded copies in ``examples/data`` (the first rows of each
real test set); ``MJ_TEST_DATA`` points at a fuller copy in the same
layout if wanted.
"""

from __future__ import annotations

import functools
import ipaddress
import json
import os
import signal
import socket
import ssl
import sys
from pathlib import Path

import pytest

from tests import marks

# Before anything imports huggingface_hub or datasets (both read these once, at import): lm_eval runs
# inside this process (tests/inprocess.py) are as offline as the subprocess runs.
for _name in ("HF_HUB_OFFLINE", "HF_DATASETS_OFFLINE"):
    os.environ.setdefault(_name, "1")
os.environ.setdefault("TOKENIZERS_PARALLELISM", "false")

from lm_eval_mathjudge.core import data_sets  # noqa: E402 (after the environment above)

REPO = Path(__file__).resolve().parents[1]
SHARED_DATA = Path(os.environ.get("MJ_TEST_DATA", REPO / "examples" / "data"))
DATASETS = tuple(entry.name for entry in data_sets.BUILT_IN)  # the package's own data sets (core/data_sets.py)


def read_jsonl(path: Path) -> list[dict]:
    with open(path, encoding="utf-8") as fh:
        return [json.loads(line) for line in fh if line.strip()]


@pytest.fixture(scope="session")
def shared_data() -> Path:
    if not (SHARED_DATA / "gsm8k" / "test.jsonl").is_file():
        pytest.fail(f"test data not found in {SHARED_DATA}: set MJ_TEST_DATA to the shared/data folder")
    return SHARED_DATA


def data_rows(data_dir: Path, name: str) -> list[dict]:
    """The rows of the data set ``name`` in a MATHJUDGE_DATA_DIR (its entry says which folder)."""
    return read_jsonl(data_dir / data_sets.get(name).local_name / "test.jsonl")


def real_solutions():
    """Every worked solution (or, without one, the answer) of the data sets, as the data set gives it."""
    for name in DATASETS:
        entry = data_sets.get(name)
        for row in data_rows(SHARED_DATA, name):
            yield f"{name}:{row.get('id', '')}", str(row[entry.solution or entry.answer])
    for row in read_jsonl(SHARED_DATA / "gsm8k_outputs" / "gpt3_175b_verifier_first100.jsonl"):
        yield f"gpt3:{row['doc_id']}", row["response"]


def write_data_slice(root: Path, n: int) -> Path:
    """A MATHJUDGE_DATA_DIR at root holding the first n rows of every data set."""
    for name in (entry.local_name for entry in data_sets.BUILT_IN):
        rows = read_jsonl(SHARED_DATA / name / "test.jsonl")[:n]
        (root / name).mkdir(parents=True, exist_ok=True)
        with open(root / name / "test.jsonl", "w", encoding="utf-8") as fh:
            fh.writelines(json.dumps(r, ensure_ascii=False) + "\n" for r in rows)
    return root


@pytest.fixture
def data_slice(shared_data: Path, tmp_path: Path):
    """make(n) -> a MATHJUDGE_DATA_DIR holding the first n rows of every data set."""
    return lambda n: write_data_slice(tmp_path / "data", n)


@pytest.fixture
def site(tmp_path: Path, monkeypatch):
    """A folder on sys.path (and PYTHONPATH, for runs in a process of their own) to install distributions in,
    as pip would (tests/_helpers.py install_distribution); their modules are forgotten afterwards."""
    folder = tmp_path / "site"
    folder.mkdir()
    monkeypatch.syspath_prepend(str(folder))
    monkeypatch.setenv("PYTHONPATH", os.pathsep.join(p for p in (str(folder), os.environ.get("PYTHONPATH")) if p))
    yield folder
    for name, module in list(sys.modules.items()):
        if str(getattr(module, "__file__", None) or "").startswith(str(folder)):
            del sys.modules[name]


@pytest.fixture(scope="module")
def _module_scenarios(request, shared_data, tmp_path_factory):
    """Starts every selected test's scenario of the module (its ``SCENARIOS`` table) side by side."""
    from tests.e2e import Scenarios

    table = request.module.SCENARIOS
    with Scenarios() as scenarios:
        for item in request.session.items:
            if item.module is request.module and item.originalname in table and not _skipped(item):
                params = item.callspec.params if hasattr(item, "callspec") else {}
                scenarios.start(item.name, table[item.originalname], tmp_path_factory.mktemp("scenario"), params)
        yield scenarios


def _skipped(item) -> bool:
    return any(m.name == "skip" or (m.name == "skipif" and m.args and m.args[0] is True) for m in item.iter_markers())


@pytest.fixture
def scenario(_module_scenarios, request):
    """scenario() -> what this test's scenario returned (waits for it; re-raises what it raised)."""
    return lambda: _module_scenarios.result(request.node.name)


@pytest.fixture
def retry_waits(monkeypatch) -> list[float]:
    """The waits the one retry layer (calls/retry.py) is asked for, recorded instead of slept: a backoff
    or a Retry-After is asserted as a number, with no clock."""
    from lm_eval_mathjudge.calls import retry

    waits: list[float] = []
    monkeypatch.setitem(retry.call_with_retries.__kwdefaults__, "sleep", waits.append)
    return waits


# ----------------------------------------------------------------- the e2e mark, declared and enforced
# Each test that runs lm_eval or mathjudge or starts a process says so (pytest.mark.e2e; only the local
# judge's workers: pytest.mark.local_judge); tests/marks.py fails any other test that does.
# `pytest -m "not e2e"` is the everyday loop.
def pytest_configure(config):
    marks.install()
    # A suite started in the background (`pytest ... &` in a script, nohup) inherits SIGINT ignored; the
    # stop tests, and the runs they signal (a process keeps an ignored signal ignored), need it as a
    # terminal gives it.
    if signal.getsignal(signal.SIGINT) is signal.SIG_IGN:
        signal.signal(signal.SIGINT, signal.default_int_handler)
    _one_tls_context_per_ca_file()


def _one_tls_context_per_ca_file() -> None:
    """Each SDK client loads the CA file into TLS contexts of its own (google-genai: three a client, about
    0.1 s of CPU each, most of a Gemini wire test's CPU). The tests speak plain HTTP to loopback only, so
    contexts made from the same arguments are made once and shared."""
    make = ssl.create_default_context

    @functools.cache
    def shared(purpose=ssl.Purpose.SERVER_AUTH, *, cafile=None, capath=None, cadata=None):
        return make(purpose, cafile=cafile, capath=capath, cadata=cadata)

    ssl.create_default_context = shared


@pytest.hookimpl(wrapper=True)
def pytest_runtest_setup(item):
    with marks.armed(item):
        return (yield)


@pytest.hookimpl(wrapper=True)
def pytest_runtest_call(item):
    with marks.armed(item):
        return (yield)


@pytest.hookimpl(wrapper=True)
def pytest_runtest_teardown(item, nextitem):
    with marks.armed(item):
        return (yield)


_real_connect = socket.socket.connect


def _loopback_only(self, address):
    host = address[0] if isinstance(address, tuple) else None
    if host is not None and self.family in (socket.AF_INET, socket.AF_INET6):
        try:
            loopback = ipaddress.ip_address(host).is_loopback
        except ValueError:
            loopback = host == "localhost"
        if not loopback:
            raise OSError(f"tests may only reach loopback, not {host}")
    return _real_connect(self, address)


@pytest.fixture(autouse=True)
def no_network(monkeypatch):
    """In-process guard; subprocesses get HF_HUB_OFFLINE and loopback-only URLs instead."""
    monkeypatch.setattr(socket.socket, "connect", _loopback_only)
