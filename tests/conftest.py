"""Shared fixtures: slices of the real data sets, and a network guard.

The data are the embedded copies in ``examples/data`` (the first rows of each
real test set); ``MJ_TEST_DATA`` points at a fuller copy in the same
layout if wanted.
"""

from __future__ import annotations

import ipaddress
import json
import os
import socket
from pathlib import Path

import pytest

REPO = Path(__file__).resolve().parents[1]
SHARED_DATA = Path(os.environ.get("MJ_TEST_DATA", REPO / "examples" / "data"))
DATASETS = ("gsm8k", "math500", "aime24", "aime25", "omnimath")


def read_jsonl(path: Path) -> list[dict]:
    with open(path, encoding="utf-8") as fh:
        return [json.loads(line) for line in fh if line.strip()]


@pytest.fixture(scope="session")
def shared_data() -> Path:
    if not (SHARED_DATA / "gsm8k" / "test.jsonl").is_file():
        pytest.fail(f"test data not found in {SHARED_DATA}: set MJ_TEST_DATA to the shared/data folder")
    return SHARED_DATA


@pytest.fixture
def data_slice(shared_data: Path, tmp_path: Path):
    """make(n) -> a MATHJUDGE_DATA_DIR holding the first n rows of every data set."""
    def make(n: int) -> Path:
        root = tmp_path / "data"
        for name in DATASETS:
            rows = read_jsonl(shared_data / name / "test.jsonl")[:n]
            (root / name).mkdir(parents=True, exist_ok=True)
            with open(root / name / "test.jsonl", "w", encoding="utf-8") as fh:
                fh.writelines(json.dumps(r, ensure_ascii=False) + "\n" for r in rows)
        return root
    return make


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
