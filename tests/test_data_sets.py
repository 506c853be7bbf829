"""The data-set registry (core/data_sets.py) and everything that must agree with it: the task YAMLs and
groups, the example data, the docs tables, rejudge and audit, and data sets registered by plugins."""

from __future__ import annotations

import importlib.util

import pytest
import yaml

from lm_eval_mathjudge.core import data_sets
from lm_eval_mathjudge.core.data_sets import BUILT_IN, NO_SOLUTION, DataSet
from lm_eval_mathjudge.core.errors import ConfigError
from tests._helpers import install_aime_history, install_distribution
from tests.conftest import DATASETS, REPO, SHARED_DATA, read_jsonl

TASKS = REPO / "task_configs"
FAMILIES = ("gpt4em", "vlmjudge")
DATA_KEYS = ("dataset_path", "dataset_name", "test_split", "process_docs", "generation_kwargs")


class _Tolerant(yaml.SafeLoader):
    """Reads a task YAML without resolving its !function tags."""


_Tolerant.add_constructor("!function", lambda loader, node: f"!function {loader.construct_scalar(node)}")


def _yaml(name: str) -> dict:
    return yaml.load((TASKS / name).read_text(), Loader=_Tolerant)  # noqa: S506 -- SafeLoader subclass


# ---------------------------------------------------------------------- what must agree with the registry
@pytest.mark.parametrize("name", DATASETS)
@pytest.mark.parametrize("family", FAMILIES)
def test_every_built_in_data_set_has_its_two_tasks_and_they_say_nothing_else_about_the_data(name, family):
    config = _yaml(f"{name}_{family}.yaml")
    assert config == {"include": f"_judge_{family}.yaml", "task": f"{name}_{family}", "mathjudge_dataset": name}


def test_no_task_yaml_of_the_package_describes_data_the_registry_does_not_hold():
    for path in sorted(TASKS.glob("*.yaml")):
        config = _yaml(path.name)
        named = config.get("mathjudge_dataset")
        assert named is None or named in DATASETS, path.name
        assert not set(config) & {*DATA_KEYS} - {"generation_kwargs"}, path.name  # hub id, split: the entry's
        assert "max_gen_toks" not in (config.get("generation_kwargs") or {}), path.name


@pytest.mark.parametrize("family", FAMILIES)
def test_each_group_holds_the_task_of_every_built_in_data_set(family):
    assert _yaml(f"mathjudge_{family}.yaml")["task"] == [f"{name}_{family}" for name in DATASETS]


@pytest.mark.parametrize("entry", BUILT_IN, ids=lambda e: e.name)
def test_every_built_in_data_set_has_an_example_slice_with_its_source_and_licence(entry):
    rows = read_jsonl(REPO / "examples" / "data" / entry.local_name / "test.jsonl")
    assert rows and all(entry.fields(row)[0].strip() for row in rows)
    readme = (REPO / "examples" / "data" / "README.md").read_text("utf-8")
    [line] = [line for line in readme.splitlines() if line.startswith(f"| `{entry.local_name}/` |")]
    assert entry.licence in line


def test_the_docs_tables_are_written_from_the_registry():
    spec = importlib.util.spec_from_file_location("data_sets_tables", REPO / "docs" / "_tools" / "data_sets_tables.py")
    tables = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(tables)
    assert tables.stale() == [], "run python docs/_tools/data_sets_tables.py"
    text = (REPO / "README.md").read_text("utf-8")
    assert all(f"`{entry.name}_gpt4em`" in text and f"{entry.max_gen_toks:,} |" in text for entry in BUILT_IN)


# ---------------------------------------------------------------------- the docs each entry makes
@pytest.mark.parametrize("entry", BUILT_IN, ids=lambda e: e.name)
def test_every_row_becomes_a_doc_with_the_three_fields(entry):
    import datasets

    rows = read_jsonl(SHARED_DATA / entry.local_name / "test.jsonl")
    docs = list(entry.process_docs(datasets.Dataset.from_list(rows)))
    assert len(docs) == len(rows)
    for row, doc in zip(rows, docs):
        assert doc["mj_question"] == row[entry.question] and doc["mj_question"].strip()
        assert doc["mj_answer"] and doc["mj_answer"] == doc["mj_answer"].strip()
        # the audit tells an answer-only reference by this ending: a worked solution never has it
        assert doc["mj_reference"].endswith(NO_SOLUTION) is (not entry.has_solution)
        if not entry.has_solution:
            assert doc["mj_reference"] == f"The final answer is {doc['mj_answer']}. {NO_SOLUTION}"


@pytest.mark.parametrize("entry, row, expected", [
    pytest.param(data_sets.get("gsm8k"), {"question": "Q?", "answer": "3 + 4 = <<3+4=7>>7 apples\n#### 1,007"},
                 ("Q?", "3 + 4 = 7 apples\nFinal answer: 1007", "1007"), id="gsm8k"),
    pytest.param(data_sets.get("aime24"), {"problem": "P", "solution": "S", "answer": " 025 "}, ("P", "S", "25"),
                 id="aime24"),
    pytest.param(data_sets.get("aime25"), {"problem": "P", "answer": 70},
                 ("P", f"The final answer is 70. {NO_SOLUTION}", "70"), id="aime25-int"),
    pytest.param(data_sets.get("math500"), {"problem": "P", "solution": "S", "answer": r" \frac{1}{2} "},
                 ("P", "S", r"\frac{1}{2}"), id="math500-latex"),
])
def test_fields_of_one_row(entry, row, expected):
    assert entry.fields(row) == expected


# ---------------------------------------------------------------------- the task's config
def test_a_task_naming_a_data_set_gets_lm_evals_data_keys_from_its_entry():
    greedy = {"until": [], "do_sample": False, "temperature": 0.0}
    config, entry = data_sets.task_config({"task": "gsm8k_gpt4em", "mathjudge_dataset": "gsm8k",
                                           "generation_kwargs": dict(greedy)})
    assert entry is data_sets.get("gsm8k") and "mathjudge_dataset" not in config
    assert (config["dataset_path"], config["dataset_name"], config["test_split"]) == ("openai/gsm8k", "main", "test")
    assert config["process_docs"] == entry.process_docs
    assert list(config["generation_kwargs"].items()) == [*greedy.items(), ("max_gen_toks", 4096)]  # lm-eval's order


def test_a_key_the_yaml_sets_wins_over_the_entry():
    config, _ = data_sets.task_config({"mathjudge_dataset": "aime24", "test_split": "test",
                                       "dataset_path": "my/aime", "generation_kwargs": {"max_gen_toks": 8000}})
    assert (config["dataset_path"], config["test_split"]) == ("my/aime", "test")
    assert config["generation_kwargs"] == {"max_gen_toks": 8000} and "dataset_name" not in config


def test_a_task_without_a_data_set_is_left_alone():
    assert data_sets.task_config({"task": "t", "dataset_path": "x"}) == ({"task": "t", "dataset_path": "x"}, None)


def test_an_unknown_data_set_says_which_exist_and_how_to_add_one():
    with pytest.raises(ConfigError) as error:
        data_sets.task_config({"task": "no_such_set_gpt4em", "mathjudge_dataset": "no_such_set"})
    message = str(error.value)
    assert "'no_such_set' is not a registered data set" in message and "gsm8k, math500" in message
    assert "lm_eval_mathjudge.datasets" in message and "BUILT_IN" in message


# ---------------------------------------------------------------------- a bad entry
GOOD = dict(name="hmmt_feb", title="HMMT February", hub_id="x/hmmt", split="test", rows=30, question="problem",
            answer="answer", solution=None, max_gen_toks=8192)


@pytest.mark.parametrize("change, problem", [
    ({"name": "HMMT"}, "name 'HMMT' is not lower-case"),
    ({"name": "hmmt-feb"}, "name 'hmmt-feb' is not lower-case"),
    ({"name": "hmmt__feb"}, "is not lower-case"),
    ({"name": "2025hmmt"}, "is not lower-case"),
    ({"title": " "}, "title must be non-empty text"),
    ({"question": None}, "question must be non-empty text"),
    ({"rows": 0}, "rows must be a positive whole number"),
    ({"max_gen_toks": "4096"}, "max_gen_toks must be a positive whole number"),
    ({"max_gen_toks": True}, "max_gen_toks must be a positive whole number"),
    ({"gold": "aime_number"}, "gold must be a function"),
    ({"builtin_tasks": ["hmmt"]}, "builtin_tasks must be a tuple"),
    ({"builtin_tasks": ("",)}, "builtin_tasks must be a tuple"),
])
def test_a_bad_entry_is_refused_with_what_is_wrong(change, problem):
    with pytest.raises(ConfigError, match="data set entry") as error:
        DataSet(**{**GOOD, **change})
    assert problem in str(error.value)


def test_a_good_entry_is_taken():
    entry = DataSet(**GOOD)
    assert entry.local_name == "hmmt_feb" and not entry.has_solution
    assert DataSet(**{**GOOD, "folder": "hmmt"}).local_name == "hmmt"


# ---------------------------------------------------------------------- lm-eval's own tasks (rejudge)
@pytest.mark.parametrize("task, held", [
    ("gsm8k_cot_zeroshot", ["gsm8k"]),
    ("minerva_math_algebra", ["math500"]),
    ("hendrycks_math500", ["math500"]),
    ("aime24_nofigures", ["aime24"]),  # the longest prefix wins: not every AIME set
    ("aime25", ["aime25"]),
    ("aime", ["aime24", "aime25"]),
    ("aime_2023", ["aime24", "aime25"]),
    ("omni_math", ["omnimath"]),
    ("mmlu", []),
])
def test_which_data_sets_an_lm_eval_task_may_hold(task, held):
    five = tuple(data_sets.get(name) for name in ("gsm8k", "math500", "aime24", "aime25", "omnimath"))
    assert [entry.name for entry in data_sets.holding(task, five)] == held


# ---------------------------------------------------------------------- plugins (entry points)
def test_a_plugins_data_set_is_read_by_every_reader(site, tmp_path):
    from lm_eval_mathjudge.reports.audit import task_names
    from lm_eval_mathjudge.reports.rejudge import datasets_of, targets_for, task_paths

    install_aime_history(site, tmp_path / "tasks")
    entry = data_sets.get("aime_1983_2024")
    assert data_sets.names() == (*DATASETS, "aime_1983_2024") and entry.question == "Question"
    aime = [f"{e.name}_gpt4em" for e in BUILT_IN if "aime" in e.builtin_tasks]
    assert data_sets.task_folders() == (str(tmp_path / "tasks"),) and task_paths()[1:] == [str(tmp_path / "tasks")]
    assert datasets_of("aime_1983_2024_vlmjudge") == ("aime_1983_2024",)
    assert targets_for("aime", None) == [*aime, "aime_1983_2024_gpt4em"] and len(aime) >= 2
    assert task_names("gpt4em")[-1] == "aime_1983_2024_gpt4em"
    assert task_names("aime_1983_2024_gpt4em") == ["aime_1983_2024_gpt4em"]
    row = read_jsonl(SHARED_DATA / "aime_1983_2024" / "test.jsonl")[0]
    assert entry.fields(row) == (row["Question"], f"The final answer is 60. {NO_SOLUTION}", "60")


def test_a_plugin_may_register_several_data_sets(site):
    fields = {k: v for k, v in GOOD.items() if k != "name"}
    source = ("from lm_eval_mathjudge.core.data_sets import DataSet\n"
              f"BOTH = [DataSet(**{fields!r}, name='hmmt_feb'), DataSet(**{fields!r}, name='hmmt_nov')]\n")
    install_distribution(site, "hmmt", {"mj_hmmt": source}, {data_sets.ENTRY_POINTS: {"hmmt": "mj_hmmt:BOTH"}})
    assert data_sets.names()[-2:] == ("hmmt_feb", "hmmt_nov") and data_sets.get("hmmt_nov").rows == 30


@pytest.mark.parametrize("source, value, message", [
    ("raise RuntimeError('no network here')\n", "mj_bad:X",
     "entry point bad (mj_bad:X) could not be loaded (RuntimeError: no network here); fix or uninstall"),
    ("X = {'name': 'hmmt'}\n", "mj_bad:X", "gives a dict, not a lm_eval_mathjudge.core.data_sets.DataSet"),
    ("from dataclasses import replace\nfrom lm_eval_mathjudge.core.data_sets import get\n"
     "X = replace(get('gsm8k'), rows=7)\n", "mj_bad:X", "registers 'gsm8k', which is already a data set"),
    ("from lm_eval_mathjudge.core.data_sets import DataSet\nX = DataSet(name='hmmt', title='H', hub_id='h', "
     "split='test', rows=-1, question='q', answer='a', solution=None, max_gen_toks=10)\n", "mj_bad:X",
     "data set entry 'hmmt': rows must be a positive whole number"),
])
def test_a_broken_plugin_is_named_with_what_to_do(site, source, value, message):
    install_distribution(site, "bad", {"mj_bad": source}, {data_sets.ENTRY_POINTS: {"bad": value}})
    with pytest.raises(ConfigError) as error:
        data_sets.every()
    assert message in str(error.value)
    assert data_sets.get("gsm8k") is BUILT_IN[0]  # a built-in data set never waits on a plugin
