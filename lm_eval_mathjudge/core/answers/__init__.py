"""The answer policy: when a response commits to one final answer, and which.

The model under test writes the text a judge reads, so a response that gives
several answers, hedges, or revises its answer must never be credited for
the one that happens to be right. Every exact-match judge applies the same
policy: the local judge in code (this package, run inside its worker
process), LLM judges through rule 1 of their prompt; so a cascade's rule
stage only credits what its LLM stage would credit too. ``_text`` holds the
vocabulary (sentences, numbers, hedges, refusals), ``_values`` the values and
the gold's shape; this module finds the final statements and decides.

Final statements
    ``\\boxed{}`` (``\\fbox``, ``\\framebox``) contents; answer statements ("the
    answer is ...", "Final answer: ...", "Answer:", "#### ...", a line "A: ...");
    sentences that conclude ("in the end ...", "in conclusion ..."); and every
    sentence after the last of those that states a value, other than as a
    condition ("... is achieved when a = 1"). Numbers in the working before
    them are never answers. A response with none of them is a plain-text
    answer: its closing sentence that names a number is the final statement,
    with every conclusion or revision ("wait, actually ...") before it and
    every stated value after the first of those.

A response is credited only when
    * every final statement, and every value offered beside one ("18 (or 20)",
      "17 or \\boxed{18}", "18, otherwise 20"), gives the same value: values
      are grouped by equivalence (units, currency, ``%``, thousands separators
      and equivalent forms aside; two single values at a time, by math-verify);
    * none hedges: a list or a range of numbers (``18, 20``, ``between``,
      ``18-20``, ``to``), a bound (``at least``, ``\\geq``), ``\\pm``,
      ``\\approx``, "about", "maybe", a question mark - unless the gold answer
      itself has that shape (a tuple, an interval, a ``\\pm``): the gold is ONE
      answer; none is revoked or doubted ("just kidding", "I'm not sure");
    * a numeric gold answer gets a number (a fraction at most), not an
      unevaluated or decorated expression (``\\boxed{100·18\\%}``, ``2*9``);
    * it does not decline to answer ("I cannot solve this", "I don't know").

``read(response, gold, question)`` finds the statements and what is wrong with
them (pure text work); ``decide(reading, gold, same)`` groups the values by
equivalence, ``same(a, b)`` being math-verify's check, and compares the one
answer with the gold. Every scan is a single regex pass over the text or over
one bounded window, and the number of statements weighed is capped, so the
work is linear in the response (the worker's time limit still bounds it).
"""

from __future__ import annotations

from ._decide import Decision, answer_classes, decide
from ._read import Reading, Statement, gold_answer, read
from ._values import Shape, value_problem
from .gold import text_key

__all__ = ["Decision", "Reading", "Shape", "Statement", "answer_classes", "decide", "gold_answer", "read", "text_key",
           "value_problem"]
