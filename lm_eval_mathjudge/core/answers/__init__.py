"""The answer policy: when a response commits to one final answer, which, and what the rule can say about it.

The model under test writes the text a judge reads, so a response that gives several answers,
hedges, or revises its answer must never be credited for the one that happens to be right. Every
exact-match judge applies the same policy: the local judge in code (this package, run inside its
worker process), LLM judges through rule 1 of their prompt; so a cascade's rule stage only credits
what its LLM stage would credit too. The rule has three outcomes (``_decide``): correct (one
committed final answer proved equal to the gold), incorrect (the rule is sure: proved different, or
several final answers proved different) and undecided (anything it cannot tell).

Modules: ``_text`` the vocabulary (sentences, numbers, hedges, refusals); ``_values`` values and the
gold's shape; ``_context`` the words around a final value that change it (negations, conditions,
another language, strike-through, corrections); ``gold`` the gold as a value and the word-for-word
key; ``_read`` the final statements of a response (and of a worked gold); ``_decide`` the outcome.

Final statements
    ``\\boxed{}`` (``\\fbox``, ``\\framebox``) contents (several boxes joined by "and" are one list
    against a gold of several values); answer statements ("the answer is ...", "Final answer: ...",
    "Answer:", "#### ...", a line "A: ..."); sentences that conclude ("in the end ..."); and every
    sentence after the last of those that states a value (not as a condition, not a check). Numbers
    in the working before them are never answers. A response with none of them is a plain text: its
    closing sentence that names a value is read, credited when it equals the gold, undecided otherwise.

``read(response, gold, question)`` finds the statements and what is wrong with them (pure text
work); ``decide(reading, gold, compare)`` groups the values by proved equality (``compare(a, b)``:
True, False or None, math-verify's in the worker) and compares the one answer with the gold. Every
scan is a single regex pass over the text or over one bounded window, and the number of statements
weighed is capped, so the work is linear in the response (the worker's time limit still bounds it).
"""

from __future__ import annotations

from ._decide import Decision, answer_classes, decide
from ._read import Reading, Statement, gold_answer, read
from ._values import Shape, value_problem
from .gold import text_key

__all__ = ["Decision", "Reading", "Shape", "Statement", "answer_classes", "decide", "gold_answer", "read", "text_key",
           "value_problem"]
