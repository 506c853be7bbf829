"""LLM judges for math benchmarks, as lm-evaluation-harness tasks, and from Python.

The public API (README, "From Python")::

    from lm_eval_mathjudge import judge_answer, judge_answers, Answer, JudgeSettings

    judge_answer("What is 2 + 3?", "So the sum is \\boxed{5}.", "5", settings={"backend": "local"})

Importing this package does nothing but define names: the names above, the
SDKs, lm-eval and the judge machinery load on first use, because the ``lm_eval``
CLI imports the package (through its start-up hook) on every start.
"""

from __future__ import annotations

import importlib
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:  # for type checkers and editors; at run time the names load on first use
    from .api import Answer, Judgement, judge_answer, judge_answers
    from .settings.schema import JudgeSettings

__version__ = "0.1.0"
# Public name -> the module that defines it.
_PUBLIC = {"judge_answer": "api", "judge_answers": "api", "Answer": "api", "Judgement": "api",
           "JudgeSettings": "settings.schema"}
__all__ = ["Answer", "JudgeSettings", "Judgement", "__version__", "judge_answer", "judge_answers"]


def __getattr__(name: str) -> Any:
    if name not in _PUBLIC:
        raise AttributeError(f"module {__name__!r} has no attribute {name!r}")
    return getattr(importlib.import_module(f"{__name__}.{_PUBLIC[name]}"), name)


def __dir__() -> list[str]:
    return sorted(set(globals()) | set(_PUBLIC))
