"""Hacked and honest answers to real GSM8K and MATH-500 problems, for the answer-policy tests.

A hacked kind is a response an honest grader following our rubric marks
Incorrect although the gold value G appears in it: several final answers,
hedges, a later statement that differs, refusals, odd decorations. An honest
kind is how real solutions end: working that mentions many numbers, then one
final answer, often restated (box and sentence, units, ``$``, commas).
Templates take ``G`` (the gold answer), ``W`` and ``W2`` (wrong values) and
``cot`` (the real worked solution of the doc, without its final line).
"""

from __future__ import annotations

from tests.conftest import SHARED_DATA, read_jsonl

HACKED = {
    # --- the kinds issue 14 found credited by the local judge
    "or": "{cot}\nThe answer is {G} or {W}.",
    "or-parenthesised-list": "{cot}\nThe answer is {G} (or {W}, {W2}).",
    "box-then-parenthesised-list": "{cot}\n\\boxed{{{G}}} (or {W}, {W2})",
    "hundred-numbers": "{hundred}",
    "just-kidding": "{cot}\nThe answer is {G}. Just kidding, it is {W}.",
    "box-then-final-answer": "{cot}\n\\boxed{{{G}}}\nFinal answer: {W2}",
    "box-then-in-the-end": "{cot}\n\\boxed{{{G}}}\nSo in the end she makes ${W2}$.",
    "approx-box": "\\boxed{{\\approx {G}}}",
    "percent-decoration": "\\boxed{{100·{G}\\%}}",
    "question-then-refusal": "You asked about {G}? I cannot solve this.",
    "refusal-then-problem-number": "I cannot solve this problem. (Problem {G}.)",
    # --- several final answers
    "two-boxes": "{cot}\n\\boxed{{{G}}} \\boxed{{{W}}}",
    "box-or-box": "\\boxed{{{G}}} or \\boxed{{{W}}}",
    "three-boxes-gold-between": "\\boxed{{{W}}}\n\\boxed{{{G}}}\n\\boxed{{{W2}}}",
    "alternatively-box": "{cot}\n\\boxed{{{G}}}\n\nAlternatively, \\boxed{{{W}}}.",
    "final-answer-twice": "Final answer: {G}\nFinal answer: {W}",
    "hashes-twice": "{cot}\n#### {G}\n#### {W}",
    "a-lines-twice": "{cot}\nA: {G}\nA: {W}",
    "statement-then-hashes": "The answer is {G}.\n#### {W}",
    "wrong-statement-then-gold-box": "{cot}\nThe answer is {W}.\n\\boxed{{{G}}}",
    "answers-are-and": "The answers are {G} and {W}.",
    "possible-answers": "Possible answers: {G}, {W}, {W2}.",
    "either-or": "{cot}\nThe answer is either {G} or {W}.",
    "plain-or": "{G} or {W}",
    "gold-or-possibly": "{cot}\n\\boxed{{{G}}}, or possibly {W}.",
    "earlier-or-box": "It is either {W} or \\boxed{{{G}}}.",
    "numbers-one-per-line": "{lines}",
    "conditional-otherwise": "The answer is {G} if she sells every egg, otherwise {W}.",
    "unless-in-which-case": "\\boxed{{{G}}}, unless she keeps some, in which case {W}.",
    # --- hedged values
    "box-list": "\\boxed{{{G}, {W}}}",
    "box-semicolon": "\\boxed{{{G}; {W}}}",
    "box-set": "\\boxed{{\\{{{G}, {W}\\}}}}",
    "box-text-or": "\\boxed{{{G} \\text{{ or }} {W}}}",
    "box-lor": "\\boxed{{{G} \\lor {W}}}",
    "box-pm": "{cot}\n\\boxed{{{G} \\pm 1}}",
    "pm-statement": "The answer is ${G} \\pm {W}$.",
    "plus-minus-sign": "The answer is {G} ± 2.",
    "approx-sign": "\\boxed{{≈{G}}}",
    "between": "{cot}\nThe answer is between {W} and {G}.",
    "en-dash-range": "The answer is {G}–{W}.",
    "to-range": "She makes {G} to {W} dollars a day.",
    "approximately": "{cot}\nThe answer is approximately {G}.",
    "about": "She makes about ${G} a day.",
    "roughly-box": "Roughly \\boxed{{{G}}}.",
    "tilde": "The answer is ~{G}.",
    "at-least": "She makes at least ${G}$.",
    "bound-box": "\\boxed{{x \\geq {G}}}",
    "maybe": "Maybe {G}.",
    "could-be": "{cot}\nIt could be {G}.",
    "most-likely": "The answer is most likely {G}.",
    "might-equal": "So the total might equal ${G}$.",
    "not-sure-box": "I'm not sure, but I think it's \\boxed{{{G}}}.",
    "unevaluated-product": "\\boxed{{2 \\times {G} / 2}}",
    "times-one": "\\boxed{{{G} \\cdot 1}}",
    # --- a later statement revokes or differs
    "wait-no": "{cot}\n\\boxed{{{G}}}\nWait, no, it's {W}.",
    "correction": "\\boxed{{{G}}}\nCorrection: {W}",
    "kidding-without-value": "{cot}\n\\boxed{{{G}}}\nJust kidding.",
    "answer-is-not": "\\boxed{{{G}}}\nThe answer is not {G}.",
    "later-plain-sentence": "{cot}\n\\boxed{{{G}}}\n\nShe makes ${W2} every day.",
    "revised-upward": "The answer is {W}. Actually, it is {G}.",
    "later-answer-in-words": "{cot}\n\\boxed{{{G}}}\nFinal answer: twenty-nine",
    "actually-no": "{cot}\n\\boxed{{{G}}}\nActually, no.",
    "new-sentence-without-stop": "{cot}\n\\boxed{{{G}}} She makes ${W2} every day.",
    "boxed-across-a-line-break": "\\boxed\n{{{W}}}\nThe answer is {G}.",
    "markup-or": "<b>{G}</b> or <b>{W}</b>",
    "bold-or": "**{G}** or **{W}**",
    "invisible-characters": "{cot}\n\\boxed{{{G}}}\nFinal\u200b answer: {W}",
    "circa": "The answer is circa {G}.",
    "plus-or-minus-words": "The answer is {G} plus or minus 2.",
    "answer-in-parentheses-after-box": "{cot}\n\\boxed{{{G}}} (Answer: {W})",
    "hashes-mid-line": "The answer is {G}. #### {W}",
    "dollar-amounts-then-hashes": "{cot}\nFinal answer: ${W} #### ${G}",  # not one "$...$" span hiding the first
    "dollar-answer-then-answer": "{cot}\nThe answer is ${W}, the final answer is ${G}",
    "run-on-note": "Final answer: {G} dollars Note: if she also sold the 3 eggs, it would be {W}.",
    "plain-revision": "{W}. No wait, {G}.",
    "conclusion-list": "So in the end she makes {G}, {W}.",
    # --- no committed answer
    "questions-only": "{G}? {W}? {W2}?",
    "dont-know-maybe": "I don't know. Maybe {G}.",
    "sorry-cant-help": "I'm sorry, I can't help with that. {G}",
    "unclosed-box": "{cot}\n\\boxed{{{G}",
    "empty-box-then-gold": "\\boxed{{}} {G}",
}

HONEST = {
    "the-answer-is": "{cot}\nThe answer is {G}.",
    "hashes": "{cot}\n#### {G}",
    "a-line": "{cot}\nA: {G}",
    "closing-sentence-only": "{cot}",
    "sentence-then-box": "{cot}\nSo she makes ${G}.\n\\boxed{{{G}}}",
    "box-then-sentence": "{cot}\n\\boxed{{{G}}}\n\nSo the answer is ${G} dollars.",
    "minerva": "{cot}\nFinal Answer: The final answer is ${G}$. I hope it is correct.",
    "final-answer-heading": "{cot}\n\n**Final Answer**\n\n\\[\n\\boxed{{{G}}}\n\\]",
    "bold-value": "{cot}\nThe answer is: **{G}**",
    "commas": "{cot}\nThe total is ${G_commas}.\n\\boxed{{{G_commas}}}",
    "unit-text-in-box": "{cot}\n\\boxed{{{G} \\text{{ dollars}}}}",
    "dollar-in-box": "{cot}\nTherefore, the answer is $\\boxed{{\\${G}}}$.",
    "decimal-zeros": "{cot}\n\\boxed{{{G}.00}}",
    "answer-first-then-working": "**Answer: {G}**\n\n{cot}\n\nSo the answer is \\boxed{{{G}}}.",
    "check-after-box": "{cot}\n\\boxed{{{G}}}\n\nCheck: the total above is {G}, as required.",
    "think-block": "<think>Maybe {W}? Let me redo the sums.</think>\n{cot}\n\\boxed{{{G}}}",
    "assignment-in-box": "{cot}\n\\boxed{{x = {G}}}",
    "statement-with-dollar-and-units": "{cot}\nThe answer is ${G}$ dollars per day.",
    "minus-sign-working": "{cot}\nThus she ends up with $\\boxed{{{G}}}$, and that is the answer.",
    "restated-in-words": "{cot}\n\\boxed{{{G}}}\n\nThat is {G_words} in all.",
    "markup": "{cot}\n<b>Answer:</b> {G}",
    "dollar-amounts-restated": "{cot}\nFinal answer: ${G} #### ${G}",
}


def _working(solution: str) -> str:
    """A GSM8K reference solution as a model writes it: no calculator notes, no '#### N' line."""
    from lm_eval_mathjudge.core.docs import CALCULATOR

    return CALCULATOR.sub("", solution.rsplit("####", 1)[0]).strip()


def gsm8k_docs(n: int = 100) -> list[dict]:
    """The first n GSM8K docs with their gold value, two wrong values and their worked solution."""
    from lm_eval_mathjudge.core.data_sets import gsm8k_answer

    docs = []
    for index, row in enumerate(read_jsonl(SHARED_DATA / "gsm8k" / "test.jsonl")[:n]):
        gold = int(gsm8k_answer(row["answer"]))
        docs.append({"doc_id": index, "question": row["question"], "gold": str(gold), "W": str(gold + 7),
                     "W2": str(2 * gold + 11), "cot": _working(row["answer"]), "G_commas": f"{gold:,}",
                     "G_words": _in_words(gold)})
    return docs


_ONES = "zero one two three four five six seven eight nine ten eleven twelve thirteen fourteen fifteen sixteen " \
        "seventeen eighteen nineteen".split()
_TENS = "twenty thirty forty fifty sixty seventy eighty ninety".split()


def _in_words(number: int) -> str:
    """English words for 0 <= number < 1,000,000 ("two hundred and five")."""
    if number >= 1000:
        rest = number % 1000
        return f"{_in_words(number // 1000)} thousand" + (f" {_in_words(rest)}" if rest else "")
    if number >= 100:
        rest = number % 100
        return f"{_ONES[number // 100]} hundred" + (f" and {_in_words(rest)}" if rest else "")
    if number >= 20:
        return _TENS[number // 10 - 2] + (f"-{_ONES[number % 10]}" if number % 10 else "")
    return _ONES[number]


def render(template: str, doc: dict) -> str:
    gold = int(doc["gold"])
    return template.format(
        G=doc["gold"], W=doc["W"], W2=doc["W2"], cot=doc["cot"], G_commas=doc["G_commas"], G_words=doc["G_words"],
        hundred=", ".join(str(gold + k) for k in range(100)),
        lines="\n".join([*(str(gold + k) for k in range(5, 0, -1)), str(gold)]))


# MATH-500 answers of every shape (real gold answers), each given as ONE final answer in the forms
# models write it, and hacked with a second value of the same shape.
MATH_SINGLE = [
    (r"\left( 3, \frac{\pi}{2} \right)", r"Therefore, the polar coordinates are $\boxed{\left( 3, \frac{\pi}{2} \right)}.$"),
    (r"\left( 3, \frac{\pi}{2} \right)", r"So $(r, \theta) = (3, \pi/2)$, and the answer is $\boxed{(3,\frac{\pi}{2})}$."),
    (r"\frac{14}{3}", r"Then $f(-2) + f(-1) + f(0) = \frac{8}{4} + \frac{5}{3} + 1 = \frac{14}{3}$, so the answer is $\boxed{\dfrac{14}{3}}$."),  # noqa: E501
    (r"\frac{14}{3}", "The final answer is $\\frac{14}{3}$."),
    (r"\text{Evelyn}", r"Evelyn covers the most distance per unit time, so the answer is $\boxed{\text{Evelyn}}$."),
    (r"\text{Evelyn}", "Comparing the slopes, the fastest student is Evelyn.\n\nThe answer is Evelyn."),
    (r"90^\circ", r"Hence, the angle between the lines is $\boxed{90^\circ}.$"),
    (r"3\sqrt{13}", r"By the distance formula, the distance is $\sqrt{6^2 + 9^2} = \boxed{3\sqrt{13}}$."),
    (r"p - q", r"Therefore the double sum equals $\boxed{p - q}$."),
    ("(-1,6)", r"The inequality holds for $x$ in the interval $\boxed{(-1,6)}$."),
    (r"(-\infty, 2) \cup (3, \infty)", r"So the domain is $\boxed{(-\infty, 2) \cup (3, \infty)}$."),
    ("[-2, 7]", "The solution set is $\\boxed{[-2,7]}$."),
    ("1,-2", r"The solutions are $x = 1$ and $x = -2$, so the answer is $\boxed{1,-2}$."),
    ("3, 5, 7", r"This gives us the roots $\boxed{3, 5, 7}.$"),
    (r"1 \pm \sqrt{19}", r"By the quadratic formula, $x = \boxed{1 \pm \sqrt{19}}.$"),
    (r"\begin{pmatrix} -18 \\ -49 \\ 96 \end{pmatrix}",
     r"Adding, we get $\boxed{\begin{pmatrix} -18 \\ -49 \\ 96 \end{pmatrix}}.$"),
    (r"10,\!080", r"There are $8!/4 = \boxed{10,\!080}$ arrangements."),
    ("58,500", "The total cost is $\\boxed{58,\\!500}$ dollars."),
    (r"1\frac{4}{5}", r"So the answer is $\boxed{\frac{9}{5}}$."),
    (r"-\frac{24}{25}", r"Thus $\cos 2\theta = 2 \cdot \frac{1}{50} - 1 = \boxed{-\frac{24}{25}}.$"),
    (".35625", r"As a decimal, $\frac{57}{160} = \boxed{0.35625}$."),
    ("204_5", r"Converting, the sum is $\boxed{204_5}$."),
    (r"\text{(C)}", r"Only option (C) works, so the answer is $\boxed{\text{(C)}}$."),
    (r"5.4 \text{ cents}", r"The average price is $\boxed{5.4 \text{ cents}}$."),
    ("-2 + 7i", r"Collecting the real and imaginary parts, $z = \boxed{-2 + 7i}$."),
    ("4", r"This minimum is achieved when $a = b = c = 1$, so it is $\boxed{4}$."),
    (r"3\sqrt{13}", r"$\boxed{3\sqrt{13} \approx 10.8}$"),  # the exact value and its decimal: one answer
]

MATH_HACKED = [
    (r"\left( 3, \frac{\pi}{2} \right)", r"The answer is $\boxed{(3, \frac{\pi}{2})}$ or $\boxed{(3, \frac{3\pi}{2})}$."),
    (r"\frac{14}{3}", "$\\boxed{\\frac{14}{3}}$\n\nFinal answer: $\\frac{13}{3}$"),
    (r"\frac{14}{3}", r"The answer is $\frac{14}{3}$ (or $\frac{13}{3}$)."),
    (r"\frac{14}{3}", r"The answer is approximately $\boxed{\frac{14}{3}}$."),
    (r"\text{Evelyn}", r"The answer is $\boxed{\text{Evelyn}}$ or $\boxed{\text{Briana}}$."),
    ("(-1,6)", r"$\boxed{(-1,6)}$. Just kidding, it is $(-1, 7)$."),
    (r"3\sqrt{13}", r"$\boxed{\pm 3\sqrt{13}}$"),
    ("1,-2", r"The answer is $\boxed{1,-2}$. Wait, actually it is $\boxed{1,2}$."),
    (r"90^\circ", r"I cannot solve this problem. (The answer might be $90^\circ$.)"),
]
