"""Three replayed "models" judged by the real lm_eval CLI, made once per test session.

The models are the real GPT-3 175B + verifier GSM8K solutions (58 of the first 100
correct, upstream labels) and two variants with some final answers changed:

* ``gpt3-fixed``: the first 10 wrong solutions end with the gold answer instead;
* ``gpt3-mixed``: wrong solutions 10..15 end with the gold answer, the first 4 right ones
  with gold + 1.

So the paired counts are known by construction (A vs fixed: 0 / 10 discordant docs;
A vs mixed: 4 / 6; fixed vs mixed: 14 / 6), and the three runs go through the
plugin's local judge (math-verify), offline.

A fourth run is lm-eval's built-in ``gsm8k`` task under ``--predict_only`` (its YAML
as installed, pointed at the local GSM8K slice, 0-shot, first 30 docs), replaying
``gpt3-verifier``: the kind of run ``mathjudge rejudge`` must judge afterwards.
"""

from __future__ import annotations

import json
import re
import threading
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path

from tests.conftest import SHARED_DATA, read_jsonl
from tests.e2e import TIMEOUT_S, Run, run_lm_eval

SOURCE = SHARED_DATA / "gsm8k_outputs" / "gpt3_175b_verifier_first100.jsonl"
MODELS = ("gpt3-verifier", "gpt3-fixed", "gpt3-mixed")
BUILTIN_LIMIT = 30
_FINAL = re.compile(r"\nA: [^\n]*$")
_LOCK = threading.Lock()
_MADE: dict[Path, ThreeRuns] = {}


def gold_answers() -> dict[str, str]:
    rows = read_jsonl(SHARED_DATA / "gsm8k" / "test.jsonl")
    return {r["question"]: r["answer"].split("####")[-1].strip().replace(",", "") for r in rows}


def variants() -> dict[str, list[dict]]:
    rows = read_jsonl(SOURCE)
    gold = gold_answers()
    wrong = [r["doc_id"] for r in rows if not r["is_correct"]]
    right = [r["doc_id"] for r in rows if r["is_correct"]]

    def answer(row: dict, value: str) -> dict:
        return {**row, "response": _FINAL.sub(f"\nA: {value}", row["response"])}

    fixed = {i: "gold" for i in wrong[:10]}
    mixed = {**{i: "gold" for i in wrong[10:16]}, **{i: "off" for i in right[:4]}}
    out = {"gpt3-verifier": rows}
    for name, changes in (("gpt3-fixed", fixed), ("gpt3-mixed", mixed)):
        out[name] = [answer(r, gold[r["question"]] if changes[r["doc_id"]] == "gold"
                            else str(int(gold[r["question"]]) + 1)) if r["doc_id"] in changes else r for r in rows]
    return out


def expected_correct() -> dict[str, set[int]]:
    rows = read_jsonl(SOURCE)
    wrong = [r["doc_id"] for r in rows if not r["is_correct"]]
    right = {r["doc_id"] for r in rows if r["is_correct"]}
    return {"gpt3-verifier": right, "gpt3-fixed": right | set(wrong[:10]),
            "gpt3-mixed": (right - set(sorted(right)[:4])) | set(wrong[10:16])}


def run_cli(args: list[str], env: dict[str, str], out_dir: Path, cwd: Path, timeout: float = TIMEOUT_S) -> Run:
    """tests.e2e.run_lm_eval, from another working directory (for relative replay paths)."""
    return run_lm_eval(args, env, out_dir, timeout, cwd=cwd)


class ThreeRuns:
    def __init__(self, root: Path):
        self.root = root
        self.inputs = root / "inputs"
        self.out = root / "runs"
        self.cache = root / "cache"

    def run_dir(self, model: str) -> Path:
        return self.out / model

    def samples_file(self, model: str) -> Path:
        return next(self.run_dir(model).rglob("samples_gsm8k_gpt4em_*.jsonl"))

    @property
    def builtin_dir(self) -> Path:
        return self.out / "builtin-gsm8k"

    def make(self, builtin: bool = True) -> None:
        self.inputs.mkdir(parents=True)
        for name, rows in variants().items():
            with open(self.inputs / f"{name}.jsonl", "w", encoding="utf-8") as fh:
                fh.writelines(json.dumps(r, ensure_ascii=False) + "\n" for r in rows)
        with ThreadPoolExecutor(len(MODELS) + 1) as pool:
            extra = [pool.submit(self._run_builtin)] if builtin else []
            runs = [*pool.map(self._run, MODELS), *(f.result() for f in extra)]
        for run in runs:
            assert run.returncode == 0, run.stderr[-3000:]

    def _run(self, name: str):
        # A relative replay path: lm-eval records it as the model name ("gpt3-fixed.jsonl").
        args = ["--model", "mathjudge-replay", "--model_args", f"path={name}.jsonl", "--tasks", "gsm8k_gpt4em",
                "--metadata", '{"judge_backend": "local"}', "--log_samples"]
        env = {"MATHJUDGE_DATA_DIR": str(SHARED_DATA), "MATHJUDGE_CACHE_DIR": str(self.cache)}
        return run_cli(args, env, self.run_dir(name), cwd=self.inputs)


    def _builtin_yaml(self) -> None:
        import lm_eval

        text = (Path(lm_eval.__file__).parent / "tasks" / "gsm8k" / "gsm8k.yaml").read_text()
        data = SHARED_DATA / "gsm8k" / "test.jsonl"
        local = f"dataset_path: json\ndataset_kwargs:\n  data_files:\n    train: {data}\n    test: {data}\n"
        assert "dataset_path: openai/gsm8k\ndataset_name: main\n" in text
        (self.root / "builtin").mkdir()
        (self.root / "builtin" / "gsm8k.yaml").write_text(
            text.replace("dataset_path: openai/gsm8k\ndataset_name: main\n", local))

    def _run_builtin(self):
        self._builtin_yaml()
        args = ["--model", "mathjudge-replay", "--model_args", "path=gpt3-verifier.jsonl", "--tasks", "gsm8k",
                "--include_path", str(self.root / "builtin"), "--num_fewshot", "0", "--predict_only",
                "--limit", str(BUILTIN_LIMIT)]
        return run_cli(args, {"MATHJUDGE_CACHE_DIR": str(self.cache)}, self.builtin_dir, cwd=self.inputs)


def three_runs(tmp_path_factory) -> ThreeRuns:
    """The session's runs (made on first use; every test module shares them)."""
    base = tmp_path_factory.getbasetemp()
    with _LOCK:
        if base not in _MADE:
            runs = ThreeRuns(tmp_path_factory.mktemp("three_runs"))
            runs.make()
            _MADE[base] = runs
        return _MADE[base]
