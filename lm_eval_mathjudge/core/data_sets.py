"""The data-set registry: one ``DataSet`` entry per data set, and every reader derives from it.

A data set is its task YAMLs, its data and one entry: in ``BUILT_IN`` below, or, outside the
package, an entry point in the group ``lm_eval_mathjudge.datasets`` (``ENTRY_POINTS``) whose value
is a ``DataSet`` (or a list of them). What reads the entries:

* the judged task: ``mathjudge_dataset: NAME`` in a task YAML is all it says about its data;
  ``task_config`` fills in lm-eval's data keys (hub id, config, split, ``process_docs``,
  ``max_gen_toks``) from the entry, and a key the YAML sets itself wins;
* ``mathjudge rejudge`` and ``audit``: which data sets exist (``every``), which of lm-eval's own
  tasks may hold whose docs (``holding``), where a plugin's task YAMLs are (``task_folders``);
* the docs tables (``docs/_tools/data_sets_tables.py``), the tests and the benchmarks.

Every doc gets the same three fields, so prompts and judges never need to know its data set:
``mj_question`` (the problem), ``mj_reference`` (the judge's ground truth: the worked solution,
or, for a data set without one, a sentence stating the answer: ``answer_only``) and ``mj_answer``
(the gold short answer, which the local judge compares and lm-eval records as the target).
"""

from __future__ import annotations

import re
from dataclasses import dataclass
from typing import Any, Callable

from .docs import CALCULATOR
from .errors import ConfigError

ENTRY_POINTS = "lm_eval_mathjudge.datasets"
YAML_KEY = "mathjudge_dataset"  # in a task YAML: the name of its data set's entry
NO_SOLUTION = "(No worked solution is available.)"  # ends the reference of a data set without solutions
_NAME = re.compile(r"[a-z][a-z0-9]*(_[a-z0-9]+)*")  # task names are <name>_<judge family>


def answer_only(gold: str) -> str:
    """The judge's reference when there is no worked solution: the answer, and that there is nothing more."""
    return f"The final answer is {gold}. {NO_SOLUTION}"


def as_given(text: str) -> str:
    return text


def solution_as_given(solution: Any, gold: str) -> Any:
    return solution


@dataclass(frozen=True)
class DataSet:
    """One data set: where it is, how its rows become docs, and what the docs tables say about it."""

    name: str  # task prefix (<name>_gpt4em, <name>_vlmjudge) and the folder under MATHJUDGE_DATA_DIR
    title: str  # the name people know it by
    hub_id: str  # on the Hugging Face hub
    split: str  # the split the tasks judge
    rows: int  # rows of that split on the hub
    question: str  # field holding the problem
    answer: str  # field the gold answer is read from
    solution: str | None  # field holding the worked solution; None: the data set has none
    max_gen_toks: int  # the generation cap (long chain-of-thought needs room)
    hub_config: str | None = None
    gold: Callable[[str], str] = as_given  # the gold answer from the answer field's text (stripped)
    reference: Callable[[Any, str], Any] = solution_as_given  # the judge's reference from (solution, gold)
    builtin_tasks: tuple[str, ...] = ()  # name prefixes of lm-eval's own tasks whose docs it may hold
    folder: str = ""  # the folder under MATHJUDGE_DATA_DIR, when it is not the name
    judge_sees: str = "worked solution"  # the docs' words for the reference (a data set with a solution)
    licence: str = ""
    tasks_dir: str | None = None  # the folder of its task YAMLs, when they are not the package's

    def __post_init__(self) -> None:
        problems = self._problems()
        if problems:
            raise ConfigError(f"data set entry {self.name!r}: {'; '.join(problems)} (see the fields of "
                              "lm_eval_mathjudge.core.data_sets.DataSet)")

    def _problems(self) -> list[str]:
        problems = [] if isinstance(self.name, str) and _NAME.fullmatch(self.name) else [
            f"name {self.name!r} is not lower-case letters and digits, words joined by single underscores"]
        problems += [f"{key} must be non-empty text" for key in ("title", "hub_id", "split", "question", "answer")
                     if not (isinstance(getattr(self, key), str) and getattr(self, key).strip())]
        problems += [f"{key} must be a positive whole number" for key in ("rows", "max_gen_toks")
                     if not (type(getattr(self, key)) is int and getattr(self, key) > 0)]
        problems += [f"{key} must be a function" for key in ("gold", "reference") if not callable(getattr(self, key))]
        if not isinstance(self.builtin_tasks, tuple) or not all(isinstance(p, str) and p for p in self.builtin_tasks):
            problems.append("builtin_tasks must be a tuple of task-name prefixes")
        return problems

    @property
    def local_name(self) -> str:
        """The folder under MATHJUDGE_DATA_DIR that holds its ``test.jsonl``."""
        return self.folder or self.name

    @property
    def has_solution(self) -> bool:
        return self.solution is not None

    def fields(self, row: dict[str, Any]) -> tuple[Any, Any, str]:
        """(question, reference, gold answer) of one row of the data set."""
        gold = self.gold(str(row[self.answer]).strip())
        reference = answer_only(gold) if self.solution is None else self.reference(row[self.solution], gold)
        return row[self.question], reference, gold

    def add_fields(self, row: dict[str, Any]) -> dict[str, Any]:
        question, reference, gold = self.fields(row)
        return {"mj_question": question, "mj_reference": reference, "mj_answer": gold}

    def process_docs(self, dataset):
        """lm-eval's ``process_docs`` hook: the rows with the three ``mj_*`` fields added."""
        return dataset.map(self.add_fields)


# ------------------------------------------------------------------ the normalisers of the built-in sets
def gsm8k_answer(solution: str) -> str:
    """GSM8K's gold answer: the number after ``####``, without thousands separators."""
    return solution.split("####")[-1].strip().replace(",", "")


def gsm8k_reference(solution: str, gold: str) -> str:
    """GSM8K's worked solution without its calculator annotations, ending with the answer in words."""
    steps = solution.rpartition("####")[0]
    return f"{CALCULATOR.sub('', steps).strip()}\nFinal answer: {gold}"


def aime_number(answer: str) -> str:
    """AIME answers are integers 0-999; some copies keep leading zeros ("025")."""
    return str(int(answer)) if answer.isdigit() else answer


BUILT_IN: tuple[DataSet, ...] = (
    DataSet(name="gsm8k", title="GSM8K", hub_id="openai/gsm8k", hub_config="main", split="test", rows=1319,
            question="question", answer="answer", solution="answer", gold=gsm8k_answer, reference=gsm8k_reference,
            max_gen_toks=4096, builtin_tasks=("gsm8k",), licence="MIT",
            judge_sees="worked solution without `<<calculator>>` annotations, ending `Final answer: N`"),
    DataSet(name="math500", title="MATH-500", hub_id="HuggingFaceH4/MATH-500", split="test", rows=500,
            question="problem", answer="answer", solution="solution", max_gen_toks=16384,
            builtin_tasks=("minerva_math", "hendrycks_math", "math500"), licence="MIT",
            judge_sees="worked solution (`solution`)"),
    DataSet(name="aime24", title="AIME 2024", hub_id="HuggingFaceH4/aime_2024", split="train", rows=30,
            question="problem", answer="answer", solution="solution", gold=aime_number, max_gen_toks=32768,
            builtin_tasks=("aime24", "aime"), licence="problems © MAA",
            judge_sees="AoPS-wiki worked solution"),
    DataSet(name="aime25", title="AIME 2025", hub_id="math-ai/aime25", split="test", rows=30,
            question="problem", answer="answer", solution=None, gold=aime_number, max_gen_toks=32768,
            builtin_tasks=("aime25", "aime"), licence="problems © MAA"),
    DataSet(name="omnimath", title="Omni-MATH", hub_id="KbsdJames/Omni-MATH", split="test", rows=4428,
            question="problem", answer="answer", solution="solution", max_gen_toks=32768,
            builtin_tasks=("omni",), licence="Apache-2.0"),
)


# ------------------------------------------------------------------ lookups
def every() -> tuple[DataSet, ...]:
    """The built-in data sets, then those of installed plugins (read anew on every call)."""
    found = {entry.name: entry for entry in BUILT_IN}
    for point, entry in _plugin_entries():
        if entry.name in found and found[entry.name] != entry:
            raise ConfigError(f"the data-set entry point {point.name} ({point.value}) registers {entry.name!r}, "
                              f"which is already a data set; give it another name")
        found[entry.name] = entry
    return tuple(found.values())


def names() -> tuple[str, ...]:
    return tuple(entry.name for entry in every())


def get(name: str) -> DataSet:
    """The entry named ``name`` (a built-in one without looking at plugins)."""
    for entry in BUILT_IN:
        if entry.name == name:
            return entry
    for entry in every():
        if entry.name == name:
            return entry
    raise ConfigError(f"{YAML_KEY}: {name!r} is not a registered data set (known: {', '.join(names())}); add an "
                      f"entry to lm_eval_mathjudge.core.data_sets.BUILT_IN, or declare one in the entry point "
                      f"group {ENTRY_POINTS} of an installed package")


def holding(task: str, entries: tuple[DataSet, ...] | None = None) -> tuple[DataSet, ...]:
    """The data sets (of ``entries``, default ``every()``) whose docs an lm-eval task named ``task`` may
    hold: those with its longest matching ``builtin_tasks`` prefix (``aime24_x``: AIME 2024 only;
    ``aime``: every AIME set)."""
    entries = every() if entries is None else entries
    matches = [(len(prefix), entry) for entry in entries for prefix in entry.builtin_tasks if task.startswith(prefix)]
    longest = max((n for n, _ in matches), default=0)
    return tuple(dict.fromkeys(entry for n, entry in matches if n == longest)) if longest else ()


def builtin_prefixes(entries: tuple[DataSet, ...] | None = None) -> tuple[str, ...]:
    entries = every() if entries is None else entries
    return tuple(dict.fromkeys(prefix for entry in entries for prefix in entry.builtin_tasks))


def task_folders() -> tuple[str, ...]:
    """The task-YAML folders of the data sets that bring their own (plugins)."""
    return tuple(dict.fromkeys(entry.tasks_dir for entry in every() if entry.tasks_dir))


def task_config(config: dict[str, Any]) -> tuple[dict[str, Any], DataSet | None]:
    """A task's config with ``mathjudge_dataset`` taken out and lm-eval's data keys filled in from its entry
    (a key the YAML sets wins); the entry, or None for a task that names no data set."""
    name = config.pop(YAML_KEY, None)
    if name is None:
        return config, None
    entry = get(str(name))
    filled = {"dataset_path": entry.hub_id, "test_split": entry.split, "process_docs": entry.process_docs}
    if entry.hub_config is not None:
        filled["dataset_name"] = entry.hub_config
    config = {**config, **{key: value for key, value in filled.items() if key not in config}}
    kwargs = config.get("generation_kwargs")
    if kwargs is None or isinstance(kwargs, dict):  # another shape is lm-eval's to refuse, with its own reason
        config["generation_kwargs"] = {**(kwargs or {})}
        config["generation_kwargs"].setdefault("max_gen_toks", entry.max_gen_toks)  # after the YAML's own keys
    return config, entry


def _plugin_entries():
    from importlib.metadata import entry_points

    for point in entry_points(group=ENTRY_POINTS):
        try:
            value = point.load()
        except Exception as exc:  # a plugin's own error: name the plugin, not a traceback of its import
            raise ConfigError(f"the data-set entry point {point.name} ({point.value}) could not be loaded "
                              f"({type(exc).__name__}: {exc}); fix or uninstall the package that declares it") from None
        for entry in value if isinstance(value, (list, tuple)) else (value,):
            if not isinstance(entry, DataSet):
                raise ConfigError(f"the data-set entry point {point.name} ({point.value}) gives a "
                                  f"{type(entry).__name__}, not a lm_eval_mathjudge.core.data_sets.DataSet")
            yield point, entry
