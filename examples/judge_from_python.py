"""Judge answers from Python with the offline local judge (math-verify): no key, no network.

    python examples/judge_from_python.py

The same calls judge with an LLM when the settings name another backend, e.g.
``{"backend": "openai", "model": "gpt-4o"}`` with OPENAI_API_KEY set.
"""

from __future__ import annotations

from lm_eval_mathjudge import Answer, judge_answer, judge_answers

LOCAL = {"backend": "local"}  # the math-verify judge; verdicts are cached like an LLM judge's

QUESTION = ("Janet's ducks lay 16 eggs per day. She eats three for breakfast every morning and bakes muffins "
            "for her friends every day with four. She sells the remainder at the farmers' market daily for "
            "$2 per fresh duck egg. How much in dollars does she make every day at the farmers' market?")
SOLUTION = "Janet sells 16 - 3 - 4 = 9 duck eggs a day, so she makes 9 * 2 = $18 every day."


def main() -> None:
    one = judge_answer(QUESTION, "She sells 9 eggs at $2 each: \\boxed{18}.", "18", SOLUTION, settings=LOCAL)
    print(f"one answer: correct={one.correct} judge={one.judge} cached={one.cached}")

    answers = [Answer(QUESTION, "16 - 3 - 4 = 9 eggs, 9 * 2 = 18. The answer is $\\boxed{18}$.", "18", SOLUTION),
               Answer(QUESTION, "She makes \\boxed{26} dollars.", "18", SOLUTION),
               Answer("What is 1/2 + 1/4?", "Adding the fractions gives \\boxed{0.75}.", "\\frac{3}{4}")]
    for answer, judged in zip(answers, judge_answers(answers, settings=LOCAL)):
        outcome = "judge failed: " + str(judged.failure) if judged.failed else f"correct={judged.correct}"
        print(f"{answer.response[:48]!r:52} {outcome}")


if __name__ == "__main__":
    main()
