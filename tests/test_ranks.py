"""Runs of several ranks (core/ranks.py): what each rank judged is combined over a real torch.distributed
gloo group of two processes, so the cost, the judge's stats, the dry run, the budget and the saved
generations describe the whole run, the same on every rank.

The end-to-end proof with ``accelerate launch`` and lm-eval's HF model is tests/test_distributed_e2e.py.
"""

from __future__ import annotations

import contextlib
import io
import json
import logging
import pickle
import types
from pathlib import Path

import pytest

from lm_eval_mathjudge.core import ranks
from lm_eval_mathjudge.cost import spend
from lm_eval_mathjudge.harness import recovery
from lm_eval_mathjudge.judging import schedule
from tests.test_run import Backend, Clock, client, em_reply, job, responses

N = 8  # docs of the task; rank r judges docs r, r + 2, ... as lm-eval shards them


def _spawn(tmp_path: Path, bodies: dict) -> list[dict]:
    """Each ``body(world, folder, *args)`` of ``bodies`` (name -> (body, args)), in turn, in two processes
    joined by one gloo group; per rank, what each body returned (by name)."""
    mp = pytest.importorskip("torch.multiprocessing", reason="torch is not installed (pip install torch)")
    mp.spawn(_rank_main, args=(tmp_path, bodies), nprocs=2, join=True)
    return [pickle.loads((tmp_path / f"rank{r}.pickle").read_bytes()) for r in range(2)]


def _rank_main(rank: int, tmp_path: Path, bodies: dict) -> None:
    import torch.distributed as dist

    dist.init_process_group("gloo", init_method=f"file://{tmp_path / 'rendezvous'}", rank=rank, world_size=2)
    try:
        out = {}
        for name, (body, args) in bodies.items():
            folder = tmp_path / name
            folder.mkdir(exist_ok=True)
            out[name] = body(ranks.World(rank, 2), folder, *args)
        (tmp_path / f"rank{rank}.pickle").write_bytes(pickle.dumps(out))
    finally:
        dist.destroy_process_group()


@pytest.fixture(scope="module")
def two_ranks(tmp_path_factory) -> list[dict]:
    """Every scenario below, run once by the same two ranks (starting them is the slow part)."""
    biggest_share, whole = max(_usd(_share(r, 2)) for r in range(2)), _usd(_share(0, 1))
    assert biggest_share < whole
    return _spawn(tmp_path_factory.mktemp("ranks"), {
        "judge": (_judge_share, ()),
        "refused": (_spend_share, ({"budget_usd": (biggest_share + whole) / 2},)),  # above each share, below all
        "allowed": (_spend_share, ({"budget_usd": whole * 2},)),
        "dry": (_spend_share, ({"dry_run": True},)),
        "saved": (_save_share, ()),
    })


def _share(rank: int, size: int) -> list[str]:
    return responses("gsm8k", N)[rank::size]


# ---------------------------------------------------------------------- the judge record and the cost
def _judge_share(world: ranks.World, _tmp: Path) -> dict:
    backend = Backend("gpt-4o", Clock(), em_reply, delay=0.001)
    j = job("gsm8k_gpt4em", client(backend), _share(world.rank, world.size))
    schedule.judge([j], "judging", progress=False)
    printed = io.StringIO()
    with contextlib.redirect_stderr(printed):
        schedule.summarise([j], world)
    return {"cost": j.cost, "run_stats": j.run_stats, "printed": printed.getvalue(), "calls": len(backend.calls)}


@pytest.mark.distributed
@pytest.mark.e2e  # two rank processes
def test_the_cost_and_the_judge_stats_of_two_ranks_equal_one_process_judging_every_doc(two_ranks, tmp_path):
    both = [r["judge"] for r in two_ranks]
    alone = _judge_share(ranks.World(), tmp_path)

    assert [r["calls"] for r in both] == [N // 2, N // 2]  # each rank paid for its own share only
    for r in both:  # ... and each rank's record and cost block is the whole run's
        assert r["cost"] == alone["cost"]
        assert {k: v for k, v in r["run_stats"].items() if k != "ranks"} == alone["run_stats"]
        assert r["run_stats"]["ranks"] == 2
    assert alone["cost"]["cost"]["requests"] == N and alone["run_stats"]["judge_calls"] == N
    assert both[0]["printed"] == alone["printed"]  # one table, on rank 0, for the whole run
    assert both[1]["printed"] == ""


# ---------------------------------------------------------------------- dry run and budget
def _spend_share(world: ranks.World, tmp_path: Path, settings: dict) -> dict:
    backend = Backend("gpt-4o", Clock(), em_reply)
    j = job("gsm8k_gpt4em", client(backend, **settings), _share(world.rank, world.size))
    printed = io.StringIO()
    try:
        with contextlib.redirect_stderr(printed):
            spend.check_spend(schedule.parts_of([j]), world=world)
        raised = None
    except Exception as exc:  # noqa: BLE001 - what each rank decided is the result
        raised = (type(exc).__name__, str(exc))
    return {"raised": raised, "printed": printed.getvalue(), "calls": len(backend.calls)}


def _usd(texts: list[str]) -> float:
    backend = Backend("gpt-4o", Clock(), em_reply)
    [part] = schedule.parts_of([job("gsm8k_gpt4em", client(backend), texts)])
    return spend._estimate(part).usd


@pytest.mark.distributed
@pytest.mark.e2e  # two rank processes
def test_a_budget_above_each_share_but_below_the_whole_run_refuses_on_every_rank(two_ranks):
    both = [r["refused"] for r in two_ranks]
    for r in both:
        assert r["raised"] is not None and r["raised"][0] == "BudgetExceeded", r
        assert f"{N} judge call(s)" in r["raised"][1]  # the whole run's calls, not the rank's
        assert r["calls"] == 0
    assert both[0]["raised"] == both[1]["raised"]  # the same decision, in the same words

    allowed = [r["allowed"] for r in two_ranks]
    assert [r["raised"] for r in allowed] == [None, None]  # within it: every rank goes on


@pytest.mark.distributed
@pytest.mark.e2e  # two rank processes
def test_a_dry_run_of_two_ranks_estimates_the_whole_run_and_prints_it_once(two_ranks):
    both = [r["dry"] for r in two_ranks]
    for r in both:
        assert r["raised"][0] == "DryRunDone" and f"{N} judge call(s)" in r["raised"][1], r
    assert both[0]["raised"] == both[1]["raised"]
    table = both[0]["printed"]
    assert "judge cost estimate" in table and both[1]["printed"] == ""
    [line] = [line for line in table.splitlines() if line.startswith("gsm8k_gpt4em")]
    assert f" {N} " in f" {line} "  # one line for the task, all of its calls


# ---------------------------------------------------------------------- the saved generations
def _task(name: str, rank: int, size: int):
    """What recovery reads of a judged task's run entry: its name, its instances (this rank's docs), its World."""
    docs = [{"question": f"{name} question {i}", "answer": str(i)} for i in range(N)][rank::size]
    instances = [types.SimpleNamespace(request_type="generate_until", args=(d["question"], {"until": ["\n"]}),
                                       resps=[f"answer {d['answer']}"], doc=d, doc_id=rank + size * k)
                 for k, d in enumerate(docs)]
    return _Task(name=name, instances=instances, world=ranks.World(rank, size))


class _Task(types.SimpleNamespace):
    """recovery keeps a weak reference to each task: a plain namespace cannot have one."""


def _save_share(world: ranks.World, tmp_path: Path) -> dict:
    task = _task("gsm8k_gpt4em", world.rank, world.size)
    recovery.track(task, rank=world.rank)
    path = recovery.checkpoint(str(tmp_path / "cache"))
    return {"path": path, "message": recovery.keep_generations(str(tmp_path / "cache"))}


@pytest.mark.distributed
@pytest.mark.e2e  # two rank processes
def test_the_generations_of_both_ranks_are_saved_in_one_file_that_each_rank_names(two_ranks):
    both = [r["saved"] for r in two_ranks]
    assert both[0]["path"] == both[1]["path"]
    rows = [json.loads(line) for line in Path(both[0]["path"]).read_text().splitlines()]
    assert sorted(r["doc_id"] for r in rows) == list(range(N))  # every doc of the run
    for r in both:
        assert "every rank" in r["message"] and both[0]["path"] in r["message"]


# ---------------------------------------------------------------------- without a process group
def test_ranks_without_a_process_group_judge_alone_and_say_so(caplog):
    with caplog.at_level(logging.WARNING):
        assert ranks.World(1, 2).gather("mine") == ["mine"]
    assert "no torch.distributed process group" in caplog.text
    assert ranks.World().gather("mine") == ["mine"]  # one process: nothing to say


@pytest.mark.parametrize("rank, size, expected", [
    (None, None, (0, 1)), (0, 1, (0, 1)), (1, 2, (1, 2)), ("3", "4", (3, 4)), (5, 2, (1, 2)),
])
def test_the_world_of_lm_evals_arguments(rank, size, expected):
    world = ranks.world_of(rank, size)
    assert (world.rank, world.size) == expected


@pytest.mark.parametrize("records, summed", [
    ([{"requests": 4, "failures": {"no_verdict": 1}}, {"requests": 4, "failures": {"bad_reply": 2}}],
     {"requests": 8, "failures": {"no_verdict": 1, "bad_reply": 2}}),
    ([{"members": [{"judge": "openai:a", "calls": 2}, {"judge": "openai:b", "calls": 1}]},
      {"members": [{"judge": "openai:a", "calls": 3}, {"judge": "openai:b", "calls": 0}]}],
     {"members": [{"judge": "openai:a", "calls": 5}, {"judge": "openai:b", "calls": 1}]}),
    ([{"usage": {"prompt_tokens": 10}}, {"usage": {}}], {"usage": {"prompt_tokens": 10}}),
    ([{"agreement": 0.5, "kind": "majority"}, None], {"agreement": 0.5, "kind": "majority"}),
    ([{"agreement": 0.5, "n": 4}, {"agreement": 0.25, "n": 4}], {"agreement": None, "n": 8}),  # a ratio: not summed
])
def test_records_add_up_over_ranks(records, summed):
    assert ranks.add_up(records) == summed
