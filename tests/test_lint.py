"""ruff, as configured in pyproject.toml ([tool.ruff]), finds nothing in the repository.

The README's test command runs it this way, and .ci/run runs `ruff check .` on its own as well, before
the suite, so a lint finding fails fast there.
"""

from __future__ import annotations

import shutil
import subprocess
import sys
from pathlib import Path

import pytest

from tests.conftest import REPO

pytestmark = pytest.mark.e2e  # ruff is a program of its own


def _ruff() -> str:
    beside = Path(sys.executable).with_name("ruff")  # the test extra installs it into this environment
    found = str(beside) if beside.exists() else shutil.which("ruff")
    if found is None:
        pytest.fail("ruff is not installed: pip install -e '.[test]' installs it")
    return found


def test_ruff_finds_nothing():
    proc = subprocess.run([_ruff(), "check", "--no-cache", "--output-format", "concise", "."], cwd=REPO,
                          capture_output=True, text=True, timeout=600)
    assert proc.returncode == 0, proc.stdout[-4000:] + proc.stderr[-2000:]


def test_ruff_would_find_an_unused_import(tmp_path):
    """The check can fail: the same configuration flags a file with an unused import."""
    bad = tmp_path / "bad.py"
    bad.write_text("import os\n")
    proc = subprocess.run([_ruff(), "check", "--no-cache", "--config", str(REPO / "pyproject.toml"), str(bad)],
                          capture_output=True, text=True, timeout=600)
    assert proc.returncode == 1 and "F401" in proc.stdout, proc.stdout + proc.stderr
