"""Small helpers shared by test modules (test modules never import each other).

Functions run in spawned processes live here because a child process must be
able to import them by module name.
"""

from __future__ import annotations

import json
from dataclasses import dataclass, field

# Judge replies as GPT-4-Turbo writes them for the exact-match contract.
REPLY_CORRECT = ("Error Analysis: The student's final answer of 18 matches the reference answer of 18.\n"
                 "Final Verdict: Correct")
REPLY_INCORRECT = ("Error Analysis: The student's final answer is 16, but the reference answer is 18, "
                   "so they are not the same.\nFinal Verdict: Incorrect")
# Off-contract: the judge forgot the verdict line (seen with chatty models).
REPLY_OFF_CONTRACT = ("The student computed 9 * 2 = 18 and boxed 18, which agrees with the reference "
                      "solution. I would consider this answer right.")


def cache_writer(directory: str, worker: int, rows: int, start, results) -> None:
    """Write `rows` replies into the shared cache directory from a separate process.

    Waits on `start` (a multiprocessing Barrier) so every process writes at once,
    then reports (worker, written, errors) on the `results` queue.
    """
    from lm_eval_mathjudge.judging.cache import Reply, ReplyCache

    errors: list[str] = []
    written = 0
    try:
        cache = ReplyCache(directory)
        start.wait(timeout=60)
        for i in range(rows):
            try:
                cache.put(f"proc{worker}-row{i}",
                          Reply(text=f"{REPLY_CORRECT} ({worker}/{i})", usage={"prompt_tokens": i}),
                          "openai:gpt-4-turbo-2024-04-09")
                written += 1
            except Exception as exc:  # noqa: BLE001 - reported to the parent
                errors.append(f"{type(exc).__name__}: {exc}")
        cache.close()
    except Exception as exc:  # noqa: BLE001
        errors.append(f"{type(exc).__name__}: {exc}")
    results.put((worker, written, errors))


def list_prices(*models: str) -> str:
    """judge_prices that give ``models`` their rows of the built-in table. A loopback judge stands in for
    the vendor, but a custom endpoint has no list price: a test of dollars prices it as a user would."""
    from lm_eval_mathjudge.cost import prices

    fields = ("input", "output", "batch_input", "batch_output", "cached_input")
    return json.dumps({model: {name: getattr(prices.lookup(model), name) for name in fields
                               if getattr(prices.lookup(model), name) is not None} for model in models})


def wire_faults(timeout_delay: float) -> list:
    """Faults both wire protocols must map the same way: (inject kwargs, error, kind, status, retry_after)."""
    import pytest

    from lm_eval_mathjudge.core.errors import FatalJudgeError, TransientJudgeError

    transient = [({"status": 429, "headers": {"Retry-After": "1"}}, "rate_limited", 429, 1.0, "429-retry-after"),
                 ({"status": 429}, "rate_limited", 429, None, "429-no-header"),
                 ({"status": 408}, "http_408", 408, None, "408"),
                 ({"status": 500}, "http_500", 500, None, "500"),
                 ({"status": 503, "headers": {"Retry-After": "2"}}, "http_503", 503, 2.0, "503-retry-after"),
                 ({"garbage": True}, "bad_response", None, None, "garbage-200"),
                 ({"drop": True}, "connection", None, None, "dropped-connection"),
                 ({"delay": timeout_delay}, "timeout", None, None, "timeout")]
    fatal = [({"status": code}, f"http_{code}", code, None, str(code)) for code in (400, 401, 403, 404)]
    return ([pytest.param(f, TransientJudgeError, k, s, r, id=i) for f, k, s, r, i in transient]
            + [pytest.param(f, FatalJudgeError, k, s, r, id=i) for f, k, s, r, i in fatal])


def side_by_side(n: int, answer):
    """``answer`` (a loopback responder or a fake backend's script) that first waits until ``n`` calls
    are in it together: concurrency shown by a count, not a clock. A pool that never holds ``n`` calls
    at once breaks the barrier (BrokenBarrierError) after a generous wait."""
    import threading

    from tests.e2e import THREAD_WAIT_S

    barrier = threading.Barrier(n, timeout=THREAD_WAIT_S)

    def together(*args):
        barrier.wait()
        return answer(*args)

    return together


def run_threads(target, count: int) -> list[BaseException]:
    """Run target(worker) in `count` threads; return what they raised."""
    import threading

    errors: list[BaseException] = []

    def guarded(worker: int) -> None:
        try:
            target(worker)
        except BaseException as exc:  # noqa: BLE001 - reported to the test
            errors.append(exc)

    threads = [threading.Thread(target=guarded, args=(w,)) for w in range(count)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    return errors


def shared_cache_judge(cache_dir: str, base_url: str, prompts: list, start, results) -> None:
    """Judge `prompts` with the real openai backend and a cache shared with other processes.

    Waits on `start` (a multiprocessing Barrier) so the processes ask at the same time,
    then reports (verdicts, calls paid, replies shared by another process, errors) on `results`.
    """
    try:
        from lm_eval_mathjudge import backends
        from lm_eval_mathjudge.judging.cache import ReplyCache
        from lm_eval_mathjudge.judging.client import JudgeClient
        from lm_eval_mathjudge.settings.layers import resolve_settings
        from lm_eval_mathjudge.core.judges import JUDGES
        from lm_eval_mathjudge.core.types import JudgeRequest

        settings = resolve_settings("exact_match", None, {"judge_base_url": base_url, "judge_concurrency": 4,
                                                          "judge_max_retries": 0}, environ={})
        client = JudgeClient(backends.build(settings, "exact_match"), JUDGES["exact_match"].parse, settings,
                             "test-template", ReplyCache(cache_dir), progress=False)
        start.wait(timeout=120)
        outcomes = client.judge_all([JudgeRequest(prompt=p) for p in prompts])
        client.close()
        results.put(([o.verdict.correct if o.verdict else o.failure for o in outcomes],
                     client.stats.calls, client.stats.shared, []))
    except Exception as exc:  # noqa: BLE001 - reported to the parent
        results.put(([], 0, 0, [f"{type(exc).__name__}: {exc}"]))


@dataclass
class Req:
    """The parts of an lm-eval Instance a generator reads."""
    question: str
    task_name: str = "gsm8k_vlmjudge"
    doc_id: int = 0
    args: tuple = ("task prompt", {})
    doc: dict = field(init=False)

    def __post_init__(self):
        self.doc = {"mj_question": self.question}


# Variables that would point google-genai somewhere else than the loopback server (or at Vertex AI).
GEMINI_SDK_ENV = ("GOOGLE_API_KEY", "GOOGLE_GENAI_USE_VERTEXAI", "GOOGLE_GENAI_USE_ENTERPRISE", "GOOGLE_CLOUD_PROJECT",
                  "GOOGLE_CLOUD_LOCATION", "GOOGLE_GEMINI_BASE_URL", "GOOGLE_GENAI_API_VERSION",
                  "GOOGLE_GENAI_HTTP_CLIENT", "HTTP_PROXY", "HTTPS_PROXY", "ALL_PROXY", "http_proxy",
                  "https_proxy", "all_proxy")


# Runs a command and writes its peak RSS (KiB) to a file. The peak must come from a small process: a
# child's ru_maxrss starts at its parent's high-water mark (Linux keeps it across the vfork and exec that
# start it), so measured from a big pytest worker it reads the worker's size; this wrapper's own children
# start from the wrapper's few MiB. Usage: python -c PEAK_RSS_WRAPPER REPORT_FILE COMMAND...
PEAK_RSS_WRAPPER = ("import resource, subprocess, sys\n"
                    "code = subprocess.call(sys.argv[2:])\n"
                    "open(sys.argv[1], 'w').write(str(resource.getrusage(resource.RUSAGE_CHILDREN).ru_maxrss))\n"
                    "sys.exit(code)\n")


def generator_settings(tmp_path, model: str, **overrides):
    """A generator's shared settings for wire tests: media under tmp_path, short polls, no waiting."""
    from lm_eval_mathjudge.generators.settings import GeneratorSettings

    return GeneratorSettings(**{"model": model, "media_dir": str(tmp_path / "media"), "timeout": 10.0,
                                "poll_interval": 0.0, "poll_timeout": 30.0, **overrides})


def isolate_gemini_sdk(monkeypatch, key: str) -> None:
    """google-genai talks to the loopback server with ``key`` only; retries and File API polls are fast."""
    import functools

    from lm_eval_mathjudge.judging import client as client_module
    from lm_eval_mathjudge.backends.gemini import files as gemini_files
    from lm_eval_mathjudge.calls.retry import RetryPolicy

    monkeypatch.setenv("GEMINI_API_KEY", key)
    for name in GEMINI_SDK_ENV:
        monkeypatch.delenv(name, raising=False)
    monkeypatch.setattr(client_module, "RetryPolicy", functools.partial(RetryPolicy, base_delay=0.01))
    monkeypatch.setattr(gemini_files, "FILE_POLL_SECONDS", 0.01)


# Judge cache files as each version of the package left them (``judging/cache.py``), and the one write
# the released versions make: a positional six-value insert, which must keep working on every file.
_FIRST_SCHEMA = (
    "CREATE TABLE replies (key TEXT PRIMARY KEY, text TEXT NOT NULL, usage TEXT NOT NULL, finish_reason TEXT, "
    "judge TEXT NOT NULL, created REAL NOT NULL)",
    "CREATE TABLE leases (key TEXT PRIMARY KEY, owner TEXT NOT NULL, host TEXT NOT NULL, pid INTEGER NOT NULL, "
    "expires REAL NOT NULL)",
    "CREATE TABLE meta (name TEXT PRIMARY KEY, value TEXT)",
)
CACHE_SHAPES = {  # shape: the statements that made it; whether its rows hold a snapshot
    "six columns (the released versions)": (_FIRST_SCHEMA, False),
    "eight columns (migrated by ALTER TABLE)": (_FIRST_SCHEMA + ("ALTER TABLE replies ADD COLUMN model TEXT",
                                                                 "ALTER TABLE replies ADD COLUMN fingerprint TEXT"),
                                                True),
    "eight columns (created so)": ((_FIRST_SCHEMA[0][:-1] + ", model TEXT, fingerprint TEXT)",) + _FIRST_SCHEMA[1:],
                                   True),
}
OLDER_VERSION_INSERT = "INSERT OR REPLACE INTO replies VALUES (?, ?, ?, ?, ?, ?)"


def write_cache_file(folder, shape: str, rows: list[tuple]) -> None:
    """A judge cache in ``folder`` as the version of ``shape`` wrote it (WAL), holding ``rows``.

    A row is (key, text, model, fingerprint); the snapshot is kept only where the shape has room for it.
    """
    import os
    import sqlite3

    from lm_eval_mathjudge.judging.cache import FILE_NAME

    statements, snapshots = CACHE_SHAPES[shape]
    os.makedirs(folder, exist_ok=True)
    db = sqlite3.connect(os.path.join(folder, FILE_NAME), isolation_level=None)
    try:
        db.execute("PRAGMA journal_mode = WAL")
        for statement in statements:
            db.execute(statement)
        for key, text, model, fingerprint in rows:
            if snapshots:
                db.execute("INSERT INTO replies VALUES (?, ?, ?, ?, ?, ?, ?, ?)",
                           (key, text, "{}", "stop", "openai:gpt-4o", 1.0, model, fingerprint))
            else:
                db.execute(OLDER_VERSION_INSERT, (key, text, "{}", "stop", "openai:gpt-4o", 1.0))
    finally:
        db.close()


def older_version_stores(folder, key: str, text: str) -> None:
    """Store a reply as a released version does (its exact statement); raises where that version would fail."""
    import os
    import sqlite3

    from lm_eval_mathjudge.judging.cache import FILE_NAME

    with sqlite3.connect(os.path.join(folder, FILE_NAME), timeout=60) as db:
        db.execute(OLDER_VERSION_INSERT, (key, text, "{}", "stop", "openai:gpt-4-turbo-2024-04-09", 2.0))


def cache_opener(base: str, worker: int, rounds: int, start, results, model: str | None = None) -> None:
    """Open a fresh cache folder per round at the same moment as the other processes (issue 20).

    Each round: wait on `start` (a multiprocessing Barrier), open ``base/round-N`` (new: the first
    opener creates it, sets WAL and the schema; or a file an older version left), store one reply
    (with the snapshot ``model``), read it back, close. Reports (worker, rounds without error, errors)
    on `results`.
    """
    import os

    from lm_eval_mathjudge.judging.cache import Reply, ReplyCache

    errors: list[str] = []
    ok = 0
    for n in range(rounds):
        try:
            start.wait(timeout=60)
            cache = ReplyCache(os.path.join(base, f"round-{n}"))
            try:
                cache.put(f"w{worker}", Reply(text=REPLY_CORRECT, model=model), "openai:gpt-4-turbo-2024-04-09")
                if cache.get(f"w{worker}") != Reply(text=REPLY_CORRECT, model=model):
                    raise AssertionError("the reply just stored is not there")
            finally:
                cache.close()
            ok += 1
        except Exception as exc:  # noqa: BLE001 - reported to the parent
            errors.append(f"round {n}: {type(exc).__name__}: {exc}")
    results.put((worker, ok, errors))


class SeamJudge:
    """A judge at our own seam with the pieces the run's pool judges with (``judging/schedule.py``):
    ``answer(request)`` gives its Outcome; ``asked`` lists the prompts judged, in call order."""

    def __init__(self, answer, concurrency: int = 1):
        import threading

        from lm_eval_mathjudge.judging.client import JudgeStats

        self._answer, self._lock = answer, threading.Lock()
        self.asked: list[str] = []
        self.stats, self.fatal_error, self.closed = JudgeStats(), None, False
        self.concurrency, self.batch_mode = concurrency, False

    def key(self, request) -> str:
        return request.prompt

    def count_requests(self, requests: int, unique: int) -> None:
        self.stats.requests += requests
        self.stats.unique += unique

    def judge_one(self, key: str, request):
        with self._lock:
            self.asked.append(request.prompt)
        return self._answer(request)

    def finish(self, outcomes) -> None:
        pass

    def set_bar(self, bar) -> None:
        pass

    def close(self) -> None:
        self.closed = True


@dataclass(frozen=True)
class RuleOutcome:
    """The local rule's word on one response: "correct", "incorrect" or "undecided", and why."""
    outcome: str
    analysis: str

    @property
    def correct(self) -> bool | None:
        return {"correct": True, "incorrect": False}.get(self.outcome)


def rule_outcome(backend, gold: str, response: str, question: str = "") -> RuleOutcome:
    """Ask the real local judge (``LocalBackend``); an undecided sample is its counted failure."""
    from lm_eval_mathjudge.core.errors import JudgeRefusal
    from lm_eval_mathjudge.core.parsing import parse_exact_match
    from lm_eval_mathjudge.core.types import JudgeRequest

    try:
        reply = backend.complete(JudgeRequest(prompt="", fields={"answer": gold, "response": response,
                                                                  "question": question}))
    except JudgeRefusal as exc:
        if exc.kind != "undecided":
            raise
        return RuleOutcome("undecided", str(exc))
    verdict = parse_exact_match(reply.text)
    return RuleOutcome("correct" if verdict.correct else "incorrect", verdict.analysis)


def install_distribution(site, name: str, modules: dict[str, str], entry_points: dict[str, dict[str, str]]) -> None:
    """A distribution laid out in the folder ``site`` as pip installs one: its modules and a ``.dist-info`` with
    its entry points (group -> {name: "module:attribute"}). importlib.metadata finds it once ``site`` is on
    sys.path (or PYTHONPATH for another process)."""
    from pathlib import Path

    site = Path(site)
    info = site / f"{name.replace('-', '_')}-0.1.dist-info"
    info.mkdir(parents=True, exist_ok=True)
    (info / "METADATA").write_text(f"Metadata-Version: 2.1\nName: {name}\nVersion: 0.1\n")
    (info / "entry_points.txt").write_text("".join(
        f"[{group}]\n" + "".join(f"{key} = {value}\n" for key, value in points.items())
        for group, points in entry_points.items()))
    for module, source in modules.items():
        (site / f"{module}.py").write_text(source)


# A sixth data set from outside the package: AIME 1983-2024 (examples/data/aime_1983_2024, answers only, its own
# field names), registered the documented way, by one entry point of an installed distribution.
AIME_HISTORY = '''
from lm_eval_mathjudge.core.data_sets import DataSet, aime_number

AIME_1983_2024 = DataSet(
    name="aime_1983_2024", title="AIME 1983-2024", hub_id="di-zhang-fdu/AIME_1983_2024", split="train", rows=933,
    question="Question", answer="Answer", solution=None, gold=aime_number, max_gen_toks=32768,
    builtin_tasks=("aime",), licence="MIT; problems © MAA", tasks_dir={tasks_dir!r})
'''


def install_aime_history(site, tasks_dir) -> None:
    """The AIME 1983-2024 entry as a plugin distribution in ``site`` (its task YAMLs in ``tasks_dir``)."""
    module = AIME_HISTORY.format(tasks_dir=str(tasks_dir))
    install_distribution(site, "mathjudge-aime-history", {"mathjudge_aime_history": module},
                         {"lm_eval_mathjudge.datasets": {"aime_1983_2024": "mathjudge_aime_history:AIME_1983_2024"}})


def write_plugin_tasks(folder, name: str, judges_dir) -> None:
    """The two task YAMLs of the data set ``name``, outside the package: each includes the package's judge base
    by its absolute path (lm-eval resolves a relative include next to the including file)."""
    from pathlib import Path

    folder = Path(folder)
    folder.mkdir(parents=True, exist_ok=True)
    for family in ("gpt4em", "vlmjudge"):
        base = Path(judges_dir) / f"_judge_{family}.yaml"
        (folder / f"{name}_{family}.yaml").write_text(
            f"include: {base}\ntask: {name}_{family}\nmathjudge_dataset: {name}\n")
