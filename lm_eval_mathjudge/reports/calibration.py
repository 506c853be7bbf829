"""The judge's own error in a score: a calibration file and the bias-corrected accuracy.

``mathjudge calibrate RUN --labels FILE --json`` (the same numbers as ``agreement --labels``)
writes, per task and metric, how the judge's verdicts on labelled samples compare with the
labels: true/false positives and negatives, sensitivity and specificity. ``leaderboard
--calibration FILE`` reads it back and shows, beside the raw score of every row judged by the
same judge (pipeline @ prompt version) on that task, the Rogan-Gladen corrected accuracy and a
bootstrap interval over both the run's problems and the labelled set (``stats.corrected_interval``).
A calibration measured on another judge is not applied; a note says so.
"""

from __future__ import annotations

import json
import re
from dataclasses import dataclass

from ..core import stats
from .runs import ReportError

_K_SUFFIX = re.compile(r"_avg@\d+$")


@dataclass(frozen=True)
class Entry:
    task: str
    metric: str  # the metric label the labels scored (``gpt4_exact_match``)
    judge: str  # pipeline @ prompt version
    cells: stats.Calibration


def load(path: str) -> dict[str, list[Entry]]:
    """task -> its calibration entries, from a ``calibrate --json`` (or ``agreement --labels --json``) file."""
    try:
        with open(path, encoding="utf-8") as fh:
            data = json.load(fh)
    except (OSError, json.JSONDecodeError, UnicodeDecodeError) as exc:
        raise ReportError(f"calibration file {path} is not readable JSON ({exc}); write it with "
                          "mathjudge calibrate RUN --labels FILE --json > FILE") from None
    tasks = data.get("tasks") if isinstance(data, dict) else None
    if not isinstance(tasks, dict):
        raise ReportError(f"calibration file {path} has no 'tasks' object; write it with "
                          "mathjudge calibrate RUN --labels FILE --json > FILE")
    out: dict[str, list[Entry]] = {}
    for task, metrics in tasks.items():
        for metric, m in (metrics or {}).items():
            cells = [m.get(k) if isinstance(m, dict) else None
                     for k in ("true_positive", "false_negative", "true_negative", "false_positive")]
            if not isinstance(m, dict) or not isinstance(m.get("judge"), str) or not all(
                    isinstance(c, int) and not isinstance(c, bool) and c >= 0 for c in cells):
                raise ReportError(f"calibration file {path}: {task} / {metric} has no judge and four whole cells "
                                  "(true_positive, false_negative, true_negative, false_positive); write it with "
                                  "mathjudge calibrate RUN --labels FILE --json > FILE")
            out.setdefault(task, []).append(Entry(task, metric, m["judge"], stats.Calibration(*cells)))
    return out


def entry_for(entries: list[Entry], metric_label: str) -> Entry | None:
    """The entry for a row's metric: the same name, or with k samples the name without ``_avg@k``."""
    base = _K_SUFFIX.sub("", metric_label)
    return next((e for e in entries if e.metric in (metric_label, base)), None)
