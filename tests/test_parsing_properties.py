"""Properties of the reply parsers, on text hypothesis builds (issue 7).

1. Total: on any ``str`` (lone surrogates, control characters, huge lines)
   each parser returns a verdict or raises ``UnparseableReply``, nothing else,
   and what it returns is storable as UTF-8.
2. Linear: the work a parse does, counted deterministically (Python lines
   executed in parsing.py plus characters handed to its regexes), grows at most
   linearly when the input is repeated 8 times. One generous wall-clock bound
   on 1 MB inputs backs it up (the old parser needed minutes for these).
3. Round trip: a well-formed reply built with a verdict parses to that verdict,
   whatever contract-conforming decoration the strategy puts around it.
"""

from __future__ import annotations

import json
import re
import subprocess
import sys
from pathlib import Path

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from lm_eval_mathjudge.core import parsing
from lm_eval_mathjudge.core.errors import UnparseableReply
from lm_eval_mathjudge.core.parsing import ExactMatchVerdict, VlmVerdict, parse_exact_match, parse_vlm
from tests.e2e import TIMEOUT_S

REPO = Path(__file__).resolve().parents[1]
PARSERS = [pytest.param(parse_exact_match, id="exact-match"), pytest.param(parse_vlm, id="vlm")]

# Pieces that steer a reply into every branch of the parsers.
TOKENS = [
    "Final Verdict", "final  verdict", "FINAL VERDICT", "Error Analysis", "INTERMEDIATE_CORRECT",
    "FINAL_CORRECT", "Final Correct", "ACTION_REFLECTION", "EXPLANATION", "Correct", "Incorrect",
    "correct or incorrect", "0", "1", "0.5", ":", "\uff1a", "=", " - ", "\u2014", "**", "__", "`", "```",
    "~~~", "~~", "> ", "    ", "\t", "# ", "### ", "- ", "* ", "1. ", "2) ", "(revised)", "[", "]", "'", '"',
    "\u201c", "\n", "\r\n", "\r", "\x0c", "\x0b", "\x85", "\u2028", "\u2029", "\x00", "\x1b",
    "<think>", "</think>", "<thinking>", "</THINKING>", "<think", " ", ".", "!", "\u274c", "\u0336",
    "\u20e0", "Wait, ", "\ufeff", "\u200b",
]
surrogates = st.integers(0xD800, 0xDFFF).map(chr)
any_char = st.characters(codec=None, exclude_categories=())
pieces = st.one_of(st.sampled_from(TOKENS), surrogates, st.text(any_char, max_size=8))
replies = st.lists(pieces, max_size=40).map("".join)


# ------------------------------------------------------------------ 1. total

def _check_result(result) -> None:
    assert isinstance(result, (ExactMatchVerdict, VlmVerdict))
    if isinstance(result, ExactMatchVerdict):
        assert type(result.correct) is bool
        result.analysis.encode("utf-8")
    else:
        assert {result.intermediate_correct, result.final_correct, result.action_reflection} <= {0, 1}
        result.explanation.encode("utf-8")


@pytest.mark.parametrize("parser", PARSERS)
@settings(max_examples=400, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(text=st.one_of(replies, st.text(any_char)))
def test_parsers_only_ever_raise_unparseable_reply(parser, text):
    try:
        result = parser(text)
    except UnparseableReply as exc:
        exc.reason.encode("utf-8")  # the reason is written to samples: it must be valid text
        assert str(exc) == exc.reason
    else:
        _check_result(result)


# ------------------------------------------------------------------ 2. linear

class _CountingPattern:
    """Wraps a compiled regex; adds the length of every span it is asked to scan."""

    def __init__(self, pattern: re.Pattern, counter: list[int], name: str, widest: dict[str, int]):
        self._pattern, self._counter, self._name, self._widest = pattern, counter, name, widest

    def _span(self, string: str, pos: int = 0, endpos: int | None = None) -> None:
        end = len(string) if endpos is None else min(endpos, len(string))
        self._counter[0] += max(0, end - pos) + 1
        self._widest[self._name] = max(self._widest.get(self._name, 0), end - pos)

    def __getattr__(self, name):
        method = getattr(self._pattern, name)
        if name in ("match", "search", "fullmatch", "findall", "finditer"):
            def counted(string, *args):
                self._span(string, *args)
                return method(string, *args)
            return counted
        if name == "sub":
            def counted_sub(repl, string, *args):
                self._span(string)
                return method(repl, string, *args)
            return counted_sub
        return method


@pytest.fixture
def work(monkeypatch):
    """work(parser, text) -> Python lines executed in parsing.py + characters scanned by its regexes."""
    regex_chars = [0]
    widest: dict[str, int] = {}
    for name, value in vars(parsing).items():
        if isinstance(value, re.Pattern):
            monkeypatch.setattr(parsing, name, _CountingPattern(value, regex_chars, name, widest))
        elif isinstance(value, dict) and value and all(isinstance(v, re.Pattern) for v in value.values()):
            monkeypatch.setattr(parsing, name, {k: _CountingPattern(v, regex_chars, name, widest)
                                                for k, v in value.items()})

    def measure(parser, text: str) -> int:
        lines = [0]
        code_file = parsing.__file__

        def tracer(frame, event, arg):
            if frame.f_code.co_filename != code_file:
                return None
            if event == "line":
                lines[0] += 1
            return tracer

        regex_chars[0] = 0
        sys.settrace(tracer)
        try:
            parser(text)
        except UnparseableReply:
            pass
        finally:
            sys.settrace(None)
        return lines[0] + regex_chars[0]
    measure.widest = widest
    return measure


def test_parsing_module_uses_only_its_compiled_patterns():
    """The counting in the linearity test sees every regex call: none goes through re.* helpers."""
    import inspect

    source = inspect.getsource(parsing)
    assert not re.findall(r"\bre\.(?:match|search|sub|subn|findall|finditer|fullmatch|split)\(", source)


UNITS = st.one_of(
    st.sampled_from([" ", "*", "_", "`", "\t", ">", "#", "7", "* _ `", "final ", "Final Verdict: Correct\n",
                     "### Final Verdict\n\nCorrect\n", "FINAL_CORRECT: 1 ", "<think>", "</think>", "\n",
                     "> FINAL_CORRECT: 1\n", "```\n", "\ud800", "Error Analysis: x\n", "EXPLANATION: y\n",
                     "**Final Verdict:**\n\n", "INTERMEDIATE_CORRECT: 1\n"]),
    st.lists(pieces, min_size=1, max_size=6).map("".join).filter(bool))


@pytest.mark.parametrize("parser", PARSERS)
@settings(max_examples=60, deadline=None, suppress_health_check=[HealthCheck.too_slow,
                                                                 HealthCheck.function_scoped_fixture])
@given(unit=UNITS, head=replies, tail=replies)
def test_work_grows_linearly(parser, work, unit, head, tail):
    repeats = max(1, 400 // len(unit))
    small = work(parser, head + unit * repeats + tail)
    large = work(parser, head + unit * (8 * repeats) + tail)
    # Linear work a*n + b gives large <= 8 * small; a quadratic term gives ~64x.
    assert large <= 9 * small + 200, (unit, small, large)


# The only patterns that may see a whole line or reply. Each is linear by construction: a literal,
# one character class under one quantifier, or bounded repeats ({0,n}); no two neighbouring
# quantifiers can share a character, the shape that made the old line patterns quadratic.
SCANNERS = {"_THINK_OPEN", "_THINK_CLOSE", "_LAST_THINK_CLOSE", "_THINK_TAG", "_STATEMENT", "_BOLD",
            "_FENCE_INFO", "_VERDICT_LABEL"}


@pytest.mark.parametrize("parser", PARSERS)
@settings(max_examples=100, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(unit=UNITS, head=replies, tail=replies)
def test_other_patterns_only_see_a_bounded_prefix(parser, work, unit, head, tail):
    work.widest.clear()
    work(parser, head + unit * max(1, 2000 // len(unit)) + tail)
    wide = {name: span for name, span in work.widest.items()
            if name not in SCANNERS and span > parsing._LABEL_SCAN}
    assert not wide


HUGE = {
    "spaces": " ", "stars": "*", "underscores": "_", "backticks": "`", "tabs": "\t", "quotes": ">",
    "final": "final ", "statements": "FINAL_CORRECT: 1 ", "lines": "\n",
    "headings": "### Final Verdict\n\nCorrect\n",
}


_PARSE_HUGE = """
import json, sys
from lm_eval_mathjudge.core import parsing
parser = getattr(parsing, sys.argv[1])
for name, unit in json.loads(sys.stdin.read()).items():
    text = "Error Analysis: the answer matches.\\n" + unit * (1_000_000 // len(unit)) + "\\nFinal Verdict: Correct"
    try:
        parser(text)
    except parsing.UnparseableReply:
        pass
    print(name, flush=True)
"""


@pytest.mark.e2e
@pytest.mark.parametrize("parser", ["parse_exact_match", "parse_vlm"])
def test_a_1mb_reply_is_never_slow(parser):
    # A guard, not a speed figure (bench/parsing.py has those): the ten replies take milliseconds to a
    # few hundred, the quadratic parser this replaced took minutes each. In a child process, so that a
    # regression fails at the (generous) time-out instead of hanging the suite.
    try:
        done = subprocess.run([sys.executable, "-c", _PARSE_HUGE, parser], input=json.dumps(HUGE), text=True,
                              capture_output=True, timeout=TIMEOUT_S, cwd=REPO, check=True)
    except subprocess.TimeoutExpired as late:
        pytest.fail(f"{parser} never got through the 1 MB replies; done: {late.stdout!r}")
    assert done.stdout.split() == list(HUGE)


# ------------------------------------------------------------------ 3. round trip

safe_text = st.text(st.characters(codec="utf-8", exclude_characters="\n\r<>"), max_size=60).filter(
    lambda t: "verdict" not in t.lower() and "correct" not in t.lower() and "reflect" not in t.lower())
line_text = safe_text.map(lambda t: t.strip())
label_styles = st.sampled_from(["{label}: {value}", "**{label}:** {value}", "**{label}**: {value}",
                                "- {label}: {value}", "### {label}: {value}", "1. {label}: {value}",
                                "{label} - {value}", "{label}={value}", "  {label} :  {value}"])
value_styles = st.sampled_from(["{v}", "**{v}**", "`{v}`", "[{v}]", "[[{v}]]", '"{v}"', "'{v}'.", "{v}.",
                                "*{v}*", "\u201c{v}\u201d", "{v}!"])
case_styles = st.sampled_from([str, str.upper, str.lower, str.title])
endings = st.sampled_from(["\n", "\r\n"])
wrappers = st.sampled_from(["{}", "```\n{}\n```", "```text\n{}\n```\n"])


def _label_fragment(line: str) -> bool:
    """A line that parsing rule 6 reads as a label cut short ("E", "Final Verd"): never a reply's end."""
    words = " ".join(line.strip(" \t*_`#-").replace("_", " ").lower().split())
    return bool(words) and any(label.startswith(words) for label in ("error analysis", "final verdict"))


chatter_text = line_text.filter(lambda t: not _label_fragment(t))


@settings(max_examples=300, deadline=None)
@given(correct=st.booleans(), analysis=line_text, preamble=st.lists(line_text, max_size=3),
       chatter=st.lists(chatter_text, max_size=3), label_style=label_styles, value_style=value_styles,
       case=case_styles, eol=endings, wrap=wrappers, think=st.one_of(st.none(), safe_text))
def test_a_well_formed_exact_match_reply_round_trips(correct, analysis, preamble, chatter, label_style,
                                                     value_style, case, eol, wrap, think):
    word = case("Correct" if correct else "Incorrect")
    lines = [p for p in preamble if not p.lstrip().startswith(">")]
    lines.append(label_style.format(label="Error Analysis", value=analysis))
    lines.append(label_style.format(label="Final Verdict", value=value_style.format(v=word)))
    lines += chatter
    reply = wrap.format(eol.join(lines))
    if think is not None:  # a reasoning block may say anything, a contrary verdict included
        reply = f"<think>{think}\nFinal Verdict: {'Incorrect' if correct else 'Correct'}</think>\n" + reply
    assert parse_exact_match(reply).correct is correct


@settings(max_examples=300, deadline=None)
@given(values=st.tuples(*[st.integers(0, 1)] * 3), order=st.permutations(range(3)),
       explanation=st.lists(line_text, max_size=3), preamble=st.lists(line_text, max_size=2),
       label_style=label_styles, value_style=value_styles, eol=endings, wrap=wrappers,
       spelling=st.sampled_from([str, str.lower, lambda s: s.replace("_", " ").title()]))
def test_a_well_formed_vlm_reply_round_trips(values, order, explanation, preamble, label_style, value_style,
                                            eol, wrap, spelling):
    names = ["INTERMEDIATE_CORRECT", "FINAL_CORRECT", "ACTION_REFLECTION"]
    # A preamble line that names a field ("EXPLANATION-", "EXPLANATION[") is a field line, not a preamble.
    lines = [p for p in preamble if not p.lstrip().startswith(">") and "explanation" not in p.lower()]
    lines += [label_style.format(label=spelling(names[i]), value=value_style.format(v=values[i])) for i in order]
    lines.append(label_style.format(label=spelling("EXPLANATION"), value=" ".join(explanation)))
    verdict = parse_vlm(wrap.format(eol.join(lines)))
    assert (verdict.intermediate_correct, verdict.final_correct, verdict.action_reflection) == values
