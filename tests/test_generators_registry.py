"""Every generator name in the one table is an lm-eval model after start-up, and the table stays cheap."""

from __future__ import annotations

import subprocess
import sys

import pytest
from lm_eval.api.model import LM

from lm_eval_mathjudge.generators import ADAPTERS


@pytest.mark.parametrize("name", sorted(ADAPTERS))
def test_each_adapter_resolves_through_lm_evals_registry(name):
    import lm_eval.models  # noqa: F401  -- the start-up hook registers our models when this loads
    from lm_eval.api.registry import get_model, model_registry

    assert name in model_registry
    cls = get_model(name)
    assert issubclass(cls, LM) and f"{cls.__module__}:{cls.__name__}" == ADAPTERS[name]


@pytest.mark.e2e
def test_the_table_imports_neither_lm_eval_nor_an_sdk():
    code = ("import sys, lm_eval_mathjudge.generators as g; "
            "print(sorted(m for m in ('lm_eval', 'openai', 'google.genai') if m in sys.modules))")
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True,
                         env={"MATHJUDGE_NO_AUTOLOAD": "1", "PATH": ""})
    assert out.stdout.strip() == "[]"
