"""Marking that survives disguise: every style of ``tests/disguise.py`` on every imitation of our prompts.

An imitation of our headings, reply lines or boundary lines is marked ``[quoted]`` inside the fence
and flagged however it is written: look-alike letters of other scripts, fullwidth or mathematical
letters, zero-width characters, word joiners, no-break spaces inside words, combining marks, and
mixtures. Honest text that mentions such words in prose, in many languages, is left alone, and so is
every reference solution of the data sets.
"""

from __future__ import annotations

import pytest

from lm_eval_mathjudge.core import flags, fold, prompts
from lm_eval_mathjudge.core.judges import EXACT_MATCH, VLM
from tests.conftest import real_solutions
from tests.disguise import HONEST, STRUCTURE, STYLES

WORK = "She sells 16 - 3 - 4 = 9 eggs, so she makes 9 * 3 = $27.\nThe answer is $\\boxed{27}$.\n"
DOC = {"mj_question": "Janet's ducks lay 16 eggs per day. She eats 3 and bakes with 4. She sells the rest at $2 "
                      "each. How much does she make?",
       "mj_reference": "16 - 3 - 4 = 9 eggs; 9 * 2 = 18.\n#### 18", "mj_answer": "18"}
CASES = [(style, line, flag) for style in STYLES for line, flag in STRUCTURE if STYLES[style](line) != line]


def test_every_style_disguises_most_lines():
    """A style that changed nothing would test nothing: each one disguises most structure lines."""
    for style, disguise in STYLES.items():
        assert sum(disguise(line) != line for line, _ in STRUCTURE) >= len(STRUCTURE) // 2, style


@pytest.mark.parametrize("style, line, flag", CASES, ids=[f"{s}:{text[:24]}" for s, text, _ in CASES])
def test_a_disguised_imitation_is_marked_and_flagged(style, line, flag):
    disguised = STYLES[style](line)
    response = f"{WORK}\n{disguised}\nThe answer is 27."
    shown = prompts.neutralise(response)
    # The mark stands in front of the imitation (after any invisible characters it starts with) ...
    before = shown[len(WORK) + 1:shown.index("\nThe answer is 27.", len(WORK))]
    assert prompts.QUOTE_MARK in before and before.replace(f"{prompts.QUOTE_MARK} ", "", 1) == disguised
    assert before.index(prompts.QUOTE_MARK) <= len(disguised) - len(disguised.lstrip("\u2066\u200b\u200e\u200f"))
    # ... the rest of the answer is verbatim, and the flags read the same folded text.
    assert shown.replace(f"{prompts.QUOTE_MARK} ", "") == response
    assert flag in flags.detect(response)


@pytest.mark.parametrize("judge", [EXACT_MATCH, VLM], ids=["exact_match", "vlm"])
def test_both_prompts_carry_the_disguised_lines_marked(judge):
    response = WORK + "\n".join(STYLES[style](line) for style, line, _ in CASES[::17])
    request = judge.request(DOC, response)
    fenced = request.prompt if judge is EXACT_MATCH else request.output_text
    inside = fenced.split(">>>\n", 1)[1].rsplit("\n<<<END ANSWER", 1)[0]
    assert inside == prompts.neutralise(response)
    assert inside.count(prompts.QUOTE_MARK) == len(CASES[::17])


@pytest.mark.parametrize("text", HONEST, ids=[f"honest-{i}" for i in range(len(HONEST))])
def test_honest_text_in_any_language_is_neither_marked_nor_flagged(text):
    assert prompts.neutralise(text) == text
    assert flags.detect(text) == []


def test_no_real_solution_is_marked(shared_data):
    solutions = dict(real_solutions())
    assert len(solutions) >= 100
    assert [name for name, text in solutions.items() if prompts.neutralise(text) != text] == []


# ---------------------------------------------------------------------- the fold itself
@pytest.mark.parametrize("text, seen", [
    ("R\u0435ference", "Reference"),  # Cyrillic e
    ("\u0406GNORE \u0399NSTRUCTIONS", "IGNORE INSTRUCTIONS"),  # Cyrillic and Greek capital I stay capitals
    ("\uff26\uff49\uff4e\uff41\uff4c\uff1a", "Final:"),  # fullwidth, with the fullwidth colon
    ("\U0001d405\U0001d422\U0001d427\U0001d41a\U0001d425", "Final"),  # mathematical bold
    ("Fi\u200bn\u200da\u2060l\u00ad \ufeffV\u200eerdict", "Final Verdict"),  # invisible characters dropped
    ("Final\u00a0Verdict\u3000Correct\u2009x", "Final Verdict Correct x"),  # other spaces are spaces
    ("\u1d07\ua730\u026a", "EFi"),  # small capitals and the like, by their Latin names
    ("F\u0332i\u0336n\u0301al", "Final"),  # combining marks dropped
    ("\u00e9t\u00e9 \u00c9T\u00c9", "ete ETE"),
    ("line\u2028break\nkept\r\n", "line\u2028break\nkept\r\n"),  # line breaks stay what they are
    ("\x00ab\x1bc\x7f", "abc"),  # control characters other than tabs and line breaks
    ("\ud800x", "x"),  # a lone surrogate
    ("解：42。", "解:42。"),  # other scripts are left as they are
])
def test_fold_reads_text_as_it_looks(text, seen):
    got = fold.fold(text)
    assert got.text == seen
    assert fold.folded(text) == got.text
    assert all(0 <= got.origin(i) <= len(text) for i in range(len(got.text) + 1))


def test_positions_map_back_to_the_answer():
    text = "ab\u200b\u200bc\uff24e"
    got = fold.fold(text)
    assert got.text == "abcDe" and [got.origin(i) for i in range(6)] == [0, 1, 4, 5, 6, 7]


def test_the_fold_table_stays_bounded(monkeypatch):
    monkeypatch.setattr(fold, "_TABLE_LIMIT", 50)
    fold._table().clear()
    fold.fold("".join(chr(c) for c in range(0x4E00, 0x4E00 + 500)))
    assert len(fold._table()) == 50
    assert fold.fold("\u4f00").text == "\u4f00"  # past the limit, characters are still folded


@pytest.mark.parametrize("word, case, same, different", [
    ("final", False, ["FINAL", "F1NAL", "FlNAL", "F|NAL", "fin al", "Fina1"], ["fiinal", "fnal", "final_"]),
    ("EXPLANATION", True, ["EXPLANATI0N", "EXPLANATlON"], ["Explanation", "explanation"]),
    ("form", False, ["FORM", "forrn", "f0rm"], ["forn"]),
])
def test_a_structural_word_matches_its_ascii_look_alikes(word, case, same, different):
    import re

    pattern = re.compile(f"(?:{fold.word(word, case)})$")
    assert [w for w in same if not pattern.match(w)] == []
    assert [w for w in different if pattern.match(w)] == []
