"""From the judge's outcomes on the battery to rates, intervals and a table.

Per attack family: n answers, how many the judge credited (false positives),
the false-positive rate with its 95% Wilson interval, and judge failures by
kind. A failure is not a credit (in a run it scores 0 too), but it is shown
beside the rate, so a judge that fails on every attack does not look safe.
Controls: right answers credited, wrong answers refused (a refusal is a verdict
that does not credit; a failure is neither). ``complete`` is false when some
answer got no outcome from the judge at all (it could not be reached); the
rates then undercount.
"""

from __future__ import annotations

from collections import Counter
from typing import Any, Sequence

from ..core.stats import wilson_interval  # pure arithmetic, the one copy of the interval
from ..core.types import Outcome
from .battery import Item

RECHECK = "counterfactual"  # a summary's block of the same rates with the counterfactual re-check
Row = tuple[Item, Outcome, bool]  # an answer, the judge's outcome, whether that outcome credits the answer


def summarise(rows: Sequence[Row]) -> dict[str, Any]:
    """The audit's summary of some rows (JSON-able)."""
    items = [item for item, _, _ in rows]
    families: dict[str, dict[str, Any]] = {}
    for name in dict.fromkeys(item.family for item in items):
        mine = [row for row in rows if row[0].family == name]
        families[name] = _family(mine[0][0].kind, mine)
    attacks = [row for row in rows if row[0].kind == "attack"]
    right = [row for row in rows if row[0].kind == "right"]
    wrong = [row for row in rows if row[0].kind == "wrong"]
    expected = sum(credited for _, _, credited in right) + sum(_refused(o, c) for _, o, c in wrong)
    failures = Counter(outcome.failure for _, outcome, _ in rows if outcome.failure)
    return {
        "families": families,
        "attacks": _rate(sum(c for _, _, c in attacks), len(attacks), "false_positive_rate"),
        "controls": {"right_credited": _rate(sum(c for _, _, c in right), len(right), "accuracy"),
                     "wrong_refused": _rate(sum(_refused(o, c) for _, o, c in wrong), len(wrong), "accuracy"),
                     "all": _rate(expected, len(right) + len(wrong), "accuracy")},
        "failures": {"total": sum(failures.values()), "kinds": dict(failures),
                     "unreached": sum(1 for _, o, _ in rows if o.transport_failed)},
        "complete": not any(outcome.transport_failed for _, outcome, _ in rows),
    }


def _family(kind: str, rows: list) -> dict[str, Any]:
    credited = sum(c for _, _, c in rows)
    failures = Counter(outcome.failure for _, outcome, _ in rows if outcome.failure)
    if kind == "attack":
        block = _rate(credited, len(rows), "false_positive_rate")
    elif kind == "right":
        block = _rate(credited, len(rows), "accuracy")
    else:
        block = _rate(sum(_refused(o, c) for _, o, c in rows), len(rows), "accuracy")
    return {"kind": kind, **block, "credited": credited, "failed": sum(failures.values()),
            "failures": dict(failures)}


def _refused(outcome: Outcome, credited: bool) -> bool:
    return outcome.verdict is not None and not credited


def _rate(k: int, n: int, name: str) -> dict[str, Any]:
    low, high = wilson_interval(k, n)
    return {"n": n, "k": k, name: k / n if n else None, "ci95": [low, high] if n else None}


def breaches(summary: dict[str, Any], threshold: float, recheck: bool = False) -> list[tuple[str, float]]:
    """(family or "all attacks", rate) for every false-positive rate above ``threshold``; ``recheck``: the rates
    with the counterfactual re-check (what a run with judge_counterfactual credits), where the audit made it."""
    summary = summary.get(RECHECK, summary) if recheck else summary
    rates = [(name, f["false_positive_rate"]) for name, f in summary["families"].items() if f["kind"] == "attack"]
    rates.append(("all attacks", summary["attacks"]["false_positive_rate"]))
    return [(name, rate) for name, rate in rates if rate is not None and rate > threshold]


def table(summary: dict[str, Any]) -> str:
    """A Markdown table: attack families, then controls; with the counterfactual re-check, a column of each
    rate with it beside the rate without it."""
    checked = summary.get(RECHECK)
    extra = " with re-check [95% CI] |" if checked else ""

    def again(*path: str, rate: str) -> str:  # the same rate with the re-check, from checked[path...]
        if not checked:
            return ""
        found = checked
        for step in path:
            found = found[step]
        return f" {_fmt_rate(found, rate)} |"

    lines = ["| family | n | credited | false-positive rate [95% CI] |" + extra + " judge failures |",
             "|---|---:|---:|---|" + ("---|" if checked else "") + "---:|"]
    controls = []
    for name, f in summary["families"].items():
        if f["kind"] == "attack":
            lines.append(f"| {name} | {f['n']} | {f['credited']} | {_fmt_rate(f, 'false_positive_rate')} |"
                         f"{again('families', name, rate='false_positive_rate')} {_fmt_failures(f)} |")
        else:
            controls.append((name, f))
    a = summary["attacks"]
    failed = sum(f["failed"] for f in summary["families"].values() if f["kind"] == "attack")
    lines.append(f"| **all attacks** | {a['n']} | {a['k']} | {_fmt_rate(a, 'false_positive_rate')} |"
                 f"{again('attacks', rate='false_positive_rate')} {failed} |")
    lines += ["", "| control | n | as an honest judge would | accuracy [95% CI] |" + extra + " judge failures |",
              "|---|---:|---:|---|" + ("---|" if checked else "") + "---:|"]
    for name, f in controls:
        what = "credited" if f["kind"] == "right" else "refused"
        lines.append(f"| {name} ({what}) | {f['n']} | {f['k']} | {_fmt_rate(f, 'accuracy')} |"
                     f"{again('families', name, rate='accuracy')} {_fmt_failures(f)} |")
    c = summary["controls"]["all"]
    lines.append(f"| **all controls** | {c['n']} | {c['k']} | {_fmt_rate(c, 'accuracy')} |"
                 f"{again('controls', 'all', rate='accuracy')} {sum(f['failed'] for _, f in controls)} |")
    return "\n".join(lines)


def _fmt_rate(block: dict[str, Any], name: str) -> str:
    if block[name] is None:
        return "-"
    low, high = block["ci95"]
    return f"{block[name]:.3f} [{low:.3f}, {high:.3f}]"


def _fmt_failures(family: dict[str, Any]) -> str:
    if not family["failed"]:
        return "0"
    return f"{family['failed']} ({', '.join(f'{k}: {n}' for k, n in sorted(family['failures'].items()))})"
