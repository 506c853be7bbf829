"""lm-eval glue: a ConfigurableTask whose metrics come from a judge.

lm-eval calls ``process_results`` once per doc, sequentially; judging there
would cost N x latency. Instead ``apply_filters`` (which lm-eval calls once
per task, after all generations) judges every (doc, response) of the task in
one concurrent batch, and ``process_results`` only reads the verdicts. So the
metrics still flow through lm-eval's own aggregation (mean, stderr),
``--log_samples`` and loggers.

Task YAMLs select this class with ``class: !function
lm_eval_mathjudge.harness.JudgedTask`` and describe the judge in a
``mathjudge:`` block, which this class removes before lm-eval sees the config:

    mathjudge:                    # in the judge's base YAML
      judge: exact_match          # or vlm
      settings: {model: ...}      # optional YAML layer of the judge settings
    mathjudge_dataset: gsm8k      # in the dataset's base YAML: folder under MATHJUDGE_DATA_DIR
"""

from __future__ import annotations

import json
import logging
import sqlite3
import weakref
from collections import Counter
from typing import Any

from . import backends, compat, data, prompts
from .cache import ReplyCache
from .client import JudgeClient
from .compat import TaskBase
from .config import JudgeSettings, resolve_settings
from .errors import ConfigError, JudgeRunError, MediaError
from .judges import JUDGE_FAILED, JUDGES, Judge
from .redact import public_url, redact
from .replay import REPLAY_MODEL as REPLAY, save_generations
from .types import JudgeRequest, Outcome

log = logging.getLogger(__name__)


def register_metrics() -> None:
    """Make every judge metric known to lm-eval (mean aggregation, closed-form stderr)."""
    names = {JUDGE_FAILED: False}
    names.update({m: True for judge in JUDGES.values() for m in judge.metric_names})
    for name, higher in names.items():
        compat.register_metric(name, higher)


class JudgedTask(TaskBase):
    def __init__(self, data_dir=None, cache_dir=None, download_mode=None, config: dict | None = None):
        config = dict(config or {})
        config.pop("class", None)
        block = dict(config.pop("mathjudge", None) or {})
        self._judge: Judge = _judge_named(block.get("judge", "exact_match"), config.get("task"))
        self._local_name: str | None = config.pop("mathjudge_dataset", None)
        self._settings: JudgeSettings = resolve_settings(self._judge.name, block.get("settings"),
                                                         config.get("metadata"))
        self._scores: dict[str, dict[str, float]] = {}
        self._client: JudgeClient | None = None
        self._fatal = None
        register_metrics()
        if int(config.get("repeats") or 1) > 1:
            raise ConfigError(f"task {config.get('task')}: repeats > 1 is not supported by judged tasks (only one "
                              "response per doc would be judged); use repeats: 1")
        super().__init__(data_dir=data_dir, cache_dir=cache_dir, download_mode=download_mode, config=config)
        self.config.metadata = {**(self.config.metadata or {}), "judge": self._provenance()}

    # ------------------------------------------------------------------ lm-eval hooks
    def download(self, dataset_kwargs: dict[str, Any] | None = None, **kwargs) -> None:
        data_dir = data.local_data_dir()
        if data_dir and self._local_name:
            self.dataset = data.load_local(data_dir, self._local_name, self.config.test_split)
        else:
            super().download(dataset_kwargs, **kwargs)

    def build_all_requests(self, **kwargs) -> None:
        if not self._bypassed():  # before any generation: a judge that cannot work stops the run now
            self._open_judge()
        super().build_all_requests(**kwargs)
        _LIVE.add(self)

    def apply_filters(self):
        result = super().apply_filters()
        if self._bypassed():
            return result
        try:
            self._judge_instances()
        except JudgeRunError:
            raise
        except Exception as exc:  # anything else: say what happened and keep the generations
            raise JudgeRunError(f"{self.config.task}: judging failed: {redact(str(exc))}. "
                                + _keep_generations(self._settings.resolved_cache_dir())) from exc
        finally:
            self._close_judge()
        return result

    def process_results(self, doc, results):
        if self._bypassed():
            return super().process_results(doc, results)
        return self._scores[results[0]]

    # ------------------------------------------------------------------ judging
    def _bypassed(self) -> bool:
        return self._compat_predict_only()  # --predict_only: no judging at all

    def _open_judge(self) -> None:
        if self._client is not None:
            return
        backends.check_credentials(self._settings, self._judge.name)
        backend = backends.build(self._settings, self._judge.name)
        try:
            cache = ReplyCache(self._settings.resolved_cache_dir()) if self._settings.cache else None
        except (OSError, sqlite3.Error) as exc:
            backend.close()
            raise ConfigError(f"cannot open the judge cache in {self._settings.resolved_cache_dir()} ({exc}); "
                              "set MATHJUDGE_CACHE_DIR to a writable folder, or judge_cache=false") from None
        self._client = JudgeClient(backend, self._judge.parse, self._settings,
                                   prompts.load(self._judge.template).version, cache)

    def _close_judge(self) -> None:
        if self._client is not None:
            self._client.close()
            self._client = None

    def _judge_instances(self) -> None:
        slots = [(inst, key, _as_text(value)) for inst in self._instances
                 for key, value in inst.filtered_resps.items()]
        self._open_judge()
        outcomes = self._run_judge([(inst.doc, response) for inst, _, response in slots])
        for (inst, key, response), outcome in zip(slots, outcomes):
            record = json.dumps(self._record(response, outcome), ensure_ascii=False)
            self._scores[record] = self._judge.scores(outcome.verdict)
            inst.filtered_resps[key] = record
        self._raise_for_transport_failures(outcomes)

    def _run_judge(self, pairs: list[tuple[dict, str]]) -> list[Outcome]:
        client = self._client
        built = [self._build_request(doc, response) for doc, response in pairs]
        todo = [item for item in built if isinstance(item, JudgeRequest)]
        judged = iter(client.judge_all(todo, desc=f"judging {self.config.task}"))
        outcomes = [next(judged) if isinstance(item, JudgeRequest) else item for item in built]
        stats = client.stats.as_dict()
        stats["failures"] = dict(Counter(o.failure for o in outcomes if o.failure))  # per sample
        self.config.metadata["judge"]["run"] = stats
        log.info("%s: %s", self.config.task, stats)
        self._fatal = client.fatal_error
        return outcomes

    def _build_request(self, doc: dict, response: str) -> JudgeRequest | Outcome:
        try:
            return self._judge.request(doc, response)
        except MediaError as exc:  # the output names media that cannot be sent: this sample only
            log.warning("%s: %s", self.config.task, exc)
            return Outcome(failure="media", error=str(exc))

    def _record(self, response: str, outcome: Outcome) -> dict[str, Any]:
        """What --log_samples shows for one judged response (as a JSON string)."""
        return {
            "verdict": None if outcome.verdict is None else self._judge.describe(outcome.verdict),
            "judge_failed": outcome.failure is not None,
            "failure": outcome.failure,
            "error": outcome.error,
            "raw_reply": outcome.raw_reply,
            "cached": outcome.cached,
            "judge": f"{self._settings.backend}:{self._settings.model}",
            "response": response,
        }

    def _raise_for_transport_failures(self, outcomes: list[Outcome]) -> None:
        failed = [o for o in outcomes if o.transport_failed]
        if not failed:
            return
        kinds = ", ".join(f"{k}: {n}" for k, n in sorted(Counter(o.failure for o in failed).items()))
        cause = f" The judge refused the requests: {self._fatal}." if self._fatal else f" Last error: {failed[-1].error}."
        raise JudgeRunError(
            f"{self.config.task}: {len(failed)} of {len(outcomes)} samples got no verdict ({kinds}).{cause} "
            f"Nothing was scored as wrong. Every verdict obtained is cached in {self._settings.resolved_cache_dir()}, "
            f"so rerunning the same command judges only the missing samples. "
            + _keep_generations(self._settings.resolved_cache_dir()))

    def _provenance(self) -> dict[str, Any]:
        return {"name": self._judge.name, **self._settings.public(),
                "base_url": public_url(self._settings.base_url) if self._settings.base_url else None,
                "cache_dir": self._settings.resolved_cache_dir() if self._settings.cache else None,
                "prompt_version": prompts.load(self._judge.template).version}


def _judge_named(name: str, task: str | None) -> Judge:
    if name not in JUDGES:
        raise ConfigError(f"task {task}: unknown judge {name!r} in the mathjudge block; known: {', '.join(JUDGES)}")
    return JUDGES[name]


def _as_text(value: Any) -> str:
    # Without a take_first filter lm-eval hands over a list (one response per repeat).
    if isinstance(value, (list, tuple)):
        value = value[0] if value else ""
    return value if isinstance(value, str) else str(value)


# Tasks whose generations exist in memory. lm-eval judges one task at a time, so when
# one fails, the generations of the others (a group) must be saved too, not dropped.
_LIVE: "weakref.WeakSet[JudgedTask]" = weakref.WeakSet()


def _keep_generations(cache_dir: str) -> str:
    """Save every live task's raw generations in one replay file; say how to reuse it."""
    rows = [(task.config.task, inst.doc_id, inst.doc, inst.resps[0]) for task in list(_LIVE)
            for inst in task._instances if inst.resps and isinstance(inst.resps[0], str)]
    if not rows:
        return "No generations were kept."
    path = save_generations(cache_dir, rows)
    return (f"The generations of {len({r[0] for r in rows})} task(s) are saved in {path}: rerun with "
            f"--model {REPLAY} --model_args path={path} to judge them without generating again.")
