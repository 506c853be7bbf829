"""Two ranks for real: ``accelerate launch --num_processes 2 -m lm_eval --model hf``, a tiny GPT-2 built
offline (random weights), CPU, gloo, judged by the loopback OpenAI judge. accelerate starts its
multi-process launcher with ``--multi_gpu`` and runs on the CPU over gloo with ``ACCELERATE_USE_CPU=1``
(``--cpu`` alone would start one process).

lm-eval 0.4.13 shards the HF model's docs over ranks only when ``torch.cuda.device_count() > 1``; on a
CPU machine a ``sitecustomize`` on PYTHONPATH makes the ranks report two devices. That is the one stand-in:
the model runs on CPU, the ranks, the process group and everything else are real.
"""

from __future__ import annotations

import json
import os
import re
import shlex
import subprocess
import sys
from pathlib import Path

import pytest

from tests._helpers import list_prices
from tests.conftest import write_data_slice
from tests.e2e import CANARY_KEY, LM_EVAL, TIMEOUT_S, Run, exact_match_judge, run_env
from tests.loopback import ChatCompletionsServer

pytestmark = [pytest.mark.distributed, pytest.mark.e2e]

N = 8
TASK = "gsm8k_gpt4em"
ACCELERATE = str(Path(sys.executable).with_name("accelerate"))

# Make lm-eval's HF model see two devices in the ranks accelerate starts (LOCAL_RANK set), nowhere else.
SITECUSTOMIZE = """\
import os
if "LOCAL_RANK" in os.environ:
    import torch
    torch.cuda.device_count = lambda: 2
"""


def _needs(*modules: str) -> None:
    for name in modules:
        pytest.importorskip(name, reason=f"{name} is not installed: the distributed tests need torch, accelerate "
                                         "and transformers (pip install 'torch==2.13.0+cpu' accelerate transformers)")


def _tiny_gpt2(folder: Path) -> Path:
    """A one-layer GPT-2 with random weights and a byte-level tokenizer, both made here, offline."""
    from tokenizers import ByteLevelBPETokenizer
    from transformers import GPT2Config, GPT2LMHeadModel, GPT2TokenizerFast
    import torch

    torch.manual_seed(0)
    bpe = ByteLevelBPETokenizer()
    bpe.train_from_iterator(["a tiny model for two ranks 0123456789 + - = ?"], vocab_size=300,
                            special_tokens=["<|endoftext|>"], show_progress=False)
    tokenizer = GPT2TokenizerFast(tokenizer_object=bpe._tokenizer, eos_token="<|endoftext|>",
                                  bos_token="<|endoftext|>", unk_token="<|endoftext|>")
    config = GPT2Config(vocab_size=len(tokenizer), n_positions=2048, n_embd=32, n_layer=1, n_head=2,
                        bos_token_id=tokenizer.eos_token_id, eos_token_id=tokenizer.eos_token_id)
    GPT2LMHeadModel(config).save_pretrained(folder)
    tokenizer.save_pretrained(folder)
    return folder


@pytest.fixture(scope="module")
def world(tmp_path_factory):
    """The model, the data, the stand-in folder and the loopback judge, shared by this module's runs."""
    _needs("torch", "accelerate", "transformers")
    root = tmp_path_factory.mktemp("distributed")
    model = _tiny_gpt2(root / "gpt2")
    data = write_data_slice(root / "data", N)
    site = root / "site"
    site.mkdir()
    (site / "sitecustomize.py").write_text(SITECUSTOMIZE)
    with ChatCompletionsServer(exact_match_judge) as judge:
        yield {"root": root, "model": model, "data": data, "site": site, "judge": judge}


def _args(world: dict, **metadata) -> list[str]:
    # a loopback judge has no list price: priced as a user would price it, so the budget compares dollars
    meta = {"judge_base_url": world["judge"].url, "judge_model": "gpt-4o", "judge_prices": list_prices("gpt-4o"),
            **metadata}
    return ["--model", "hf", "--model_args", f"pretrained={world['model']},dtype=float32",
            "--tasks", TASK, "--batch_size", "1", "--gen_kwargs", "max_gen_toks=8", "--log_samples",
            "--metadata", json.dumps(meta)]


def _run(world: dict, name: str, args: list[str], *, ranks: int, cache: str) -> Run:
    out = world["root"] / name
    env = run_env({"MATHJUDGE_DATA_DIR": str(world["data"]), "MATHJUDGE_CACHE_DIR": str(world["root"] / cache),
                   "OPENAI_API_KEY": CANARY_KEY, "PYTHONPATH": os.pathsep.join(
                       [str(world["site"]), os.environ.get("PYTHONPATH", "")]).rstrip(os.pathsep),
                   "OMP_NUM_THREADS": "1"})
    if ranks == 1:
        command = [LM_EVAL, *args]
    else:
        # accelerate's multi-process launcher, told to use the CPU (gloo): --cpu alone starts one process
        env["ACCELERATE_USE_CPU"] = "1"
        command = [ACCELERATE, "launch", "--multi_gpu", "--num_processes", str(ranks), "--num_machines", "1",
                   "--mixed_precision", "no", "--dynamo_backend", "no", "-m", "lm_eval", *args]
    proc = subprocess.run([*command, "--output_path", str(out)], env=env, capture_output=True, text=True,
                          timeout=TIMEOUT_S, cwd=world["root"])
    (world["root"] / f"{name}.stderr").write_text(proc.stderr)  # for a look after a failure
    return Run(proc.returncode, proc.stdout, proc.stderr, out)


def _judge_calls(world: dict) -> int:
    return sum(1 for r in world["judge"].requests if r.path.endswith("/chat/completions"))


def _preflights(world: dict) -> int:
    return sum(1 for r in world["judge"].requests if "/models" in r.path)


def _verdicts(run: Run) -> dict[str, str]:
    return {s["doc"]["question"]: json.loads(s["filtered_resps"][0])["verdict"] for s in run.samples(TASK)}


@pytest.fixture(scope="module")
def single(world):
    before = _judge_calls(world)
    run = _run(world, "single", _args(world), ranks=1, cache="cache-single")
    assert run.returncode == 0, run.stderr[-4000:]
    assert _judge_calls(world) - before == N
    return run


def test_two_ranks_record_and_bill_the_whole_run_like_one_process(world, single):
    for attempt in range(2):  # a fresh cache created by both ranks at once, twice: it never fails
        calls, checks = _judge_calls(world), _preflights(world)
        run = _run(world, f"two-{attempt}", _args(world), ranks=2, cache=f"cache-two-{attempt}")
        assert run.returncode == 0, run.stderr[-4000:]
        assert _judge_calls(world) - calls == N  # every doc judged once, over both ranks
        assert _preflights(world) - checks == 1  # rank 0 checked; rank 1 found its check in the cache

        record = run.results()["configs"][TASK]["metadata"]["judge"]
        alone = single.results()["configs"][TASK]["metadata"]["judge"]
        assert record["run"]["ranks"] == 2
        assert {k: v for k, v in record["run"].items() if k != "ranks"} == alone["run"]
        assert record["run"]["requests"] == N and record["run"]["judge_calls"] == N
        assert record["cost"] == alone["cost"] and record["run_cost"]["total"] == alone["run_cost"]["total"]
        assert _verdicts(run) == _verdicts(single) and len(_verdicts(run)) == N
        assert run.results()["results"][TASK] == single.results()["results"][TASK]
        assert run.stderr.count("judge cost (USD") == 1  # one table, printed by rank 0


def test_a_dry_run_and_a_budget_decide_on_the_whole_run_on_every_rank(world, single):
    calls = _judge_calls(world)
    dry = _run(world, "dry", _args(world, judge_dry_run=True), ranks=2, cache="cache-dry")
    assert dry.returncode == 0, dry.stderr[-4000:]  # a dry run is a success: it did what it was asked
    assert "Traceback" not in dry.stderr
    assert dry.stderr.count("dry run (judge_dry_run=true)") == 2, dry.stderr[-4000:]  # each rank stopped
    assert _judge_calls(world) == calls  # ... before any call
    assert len(re.findall(rf"\b{N} judge call\(s\)", dry.stderr)) == 2  # ... on the whole run's calls
    assert dry.stderr.count("judge cost estimate") == 1
    whole = float(re.search(r"^total .*? (\d+\.\d{4}) +\S+$", dry.stderr, re.M)[1])

    budget = 0.75 * whole  # above either rank's half, below the whole run
    refused = _run(world, "budget", _args(world, judge_budget_usd=budget),
                   ranks=2, cache="cache-budget")
    assert refused.returncode != 0
    assert refused.stderr.count("the judge estimate is above judge_budget_usd") == 2, refused.stderr[-4000:]
    assert _judge_calls(world) == calls  # no rank paid for anything

    # The printed resume command replays every doc of both ranks, in one process.
    commands = set(re.findall(r"resume with (lm_eval (?:run )?--model mathjudge-replay .*?) \(it judges only", refused.stderr))
    assert len(commands) == 1, commands  # every rank names the same one
    [command] = commands
    args = shlex.split(command)[1:]
    meta = args.index("--metadata") + 1
    args[meta] = json.dumps({**json.loads(args[meta]), "judge_budget_usd": 10 * whole})  # as its message says
    path = args[args.index("--model_args") + 1].split("=", 1)[1]
    assert len(Path(path).read_text().splitlines()) == N
    resumed = _run(world, "resumed", args, ranks=1, cache="cache-budget")
    assert resumed.returncode == 0, resumed.stderr[-4000:]
    assert _judge_calls(world) - calls == N
    assert _verdicts(resumed) == _verdicts(single)
