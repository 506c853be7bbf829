"""An offline judge with the exact-match contract, built on math-verify.

It extracts the final answer from the response, compares it symbolically with
the gold short answer and writes a reply in the same two-line format as an
LLM judge, so the same parser, cache and metrics apply. Uses: air-gapped
runs, demos, and a free first stage before an LLM judge.

math-verify's timeouts rely on signals, which only work in the main thread;
the client calls backends from worker threads, so they are switched off.
"""

from __future__ import annotations

import logging
from importlib import metadata
from typing import Any

from ..cache import Reply
from ..config import JudgeSettings
from ..errors import ConfigError
from ..types import JudgeRequest


LOCAL_JUDGE_VERSION = 1  # bump when the extraction or the reply wording changes (part of cache keys)


def create(settings: JudgeSettings, judge: str) -> "LocalBackend":
    if judge != "exact_match":
        raise ConfigError(f"the local judge only speaks the exact-match contract, not {judge!r}; "
                          "use judge_backend=gemini or openai for the VLM judge")
    return LocalBackend()


class LocalBackend:
    def __init__(self):
        from math_verify import parse, verify

        logging.getLogger("math_verify").setLevel(logging.ERROR)  # silence "timeout disabled" notes
        self._parse, self._verify = parse, verify
        self._version = metadata.version("math-verify")

    def identity(self) -> dict[str, Any]:
        return {"backend": "local", "model": "math-verify", "version": self._version,
                "local_judge": LOCAL_JUDGE_VERSION}

    def complete(self, request: JudgeRequest) -> Reply:
        gold_text = request.fields["answer"]
        gold = self._parse(_as_math(gold_text), parsing_timeout=None)
        found = self._parse(request.fields["response"], parsing_timeout=None)
        if not found:
            analysis = f"No final answer could be extracted from the response; the reference answer is {gold_text}."
            return Reply(text=f"Error Analysis: {analysis}\nFinal Verdict: Incorrect")
        same = bool(gold) and self._verify(gold, found, timeout_seconds=None)
        extracted = found[-1]
        relation = "matches" if same else "does not match"
        analysis = f"The response's final answer {extracted} {relation} the reference answer {gold_text}."
        return Reply(text=f"Error Analysis: {analysis}\nFinal Verdict: {'Correct' if same else 'Incorrect'}")

    def close(self) -> None:
        pass


def _as_math(answer: str) -> str:
    # Gold answers are bare expressions (18, \frac{1}{2}, (3, \pi/2)); math-verify
    # finds LaTeX reliably only inside math delimiters.
    return answer if "$" in answer or "\\boxed" in answer else f"${answer}$"
