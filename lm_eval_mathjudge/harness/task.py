"""The judged task the YAMLs name: lm-eval's hooks, handed to the run; no judging here.

lm-eval calls ``process_results`` once per doc, sequentially; judging there would cost N x
latency. So this class only adapts lm-eval's hooks (the flow, hook by hook, is in ``run.py``):

- ``__init__``: the task's judge plan, every setting read once (``plan.plan_of``);
- ``build_all_requests``: the run's entry for the task, its judge opened before any generation,
  then lm-eval's instances, its filter hook and pipelines handed to the run (``run.attach``);
- ``apply_filters`` (once per task, after all generations; lm-eval 0.5: ``process_instances``):
  lm-eval's filters once, then ``run.judge``, which judges the task with every other pending task
  in the run's one pool and writes each sample's record and scores and the task's metadata;
- ``process_results`` (0.5: the scorers) only reads the scores of a doc's record.

So the metrics still flow through lm-eval's own aggregation (mean, stderr), ``--log_samples`` and
loggers. Task YAMLs select this class with ``class: !function
lm_eval_mathjudge.harness.task.JudgedTask`` and describe the judge in a ``mathjudge:`` block, which
is removed before lm-eval sees the config:

    mathjudge:                    # in the judge's base YAML
      judge: exact_match          # or vlm
      settings: {model: ...}      # optional YAML layer of the judge settings
    mathjudge_dataset: gsm8k      # its data set's entry in core/data_sets.py (hub id, split, process_docs...)
"""

from __future__ import annotations

from typing import Any

from .. import compat, generators
from ..compat import TaskBase
from ..core import docs as data, ranks
from ..core.errors import DataError, MathJudgeError
from . import ksamples, overrides, run
from .entry import Entry
from .plan import plan_of


class JudgedTask(TaskBase):
    def __init__(self, data_dir=None, cache_dir=None, download_mode=None, config: dict | None = None):
        config, self.plan = plan_of(config)
        self._scores: dict[Any, dict[str, float]] = {}  # a doc's record(s) -> its metrics (run.judge fills it)
        self._docs: dict[str, tuple[Any, Any]] = {}  # split -> (the dataset it came from, processed docs)
        self._entry: Entry | None = None  # the run's entry for this task, once its requests are built
        try:
            super().__init__(data_dir=data_dir, cache_dir=cache_dir, download_mode=download_mode, config=config)
        except MathJudgeError:
            raise
        except Exception as exc:  # a YAML (override) lm-eval cannot build: which template, or lm-eval's reason
            found = overrides.explain(self, overrides.first_doc(self))
            raise found or overrides.unbuildable(config.get("task"), exc) from exc
        # What the results record about the judge; the run adds its stats, cost and audit.
        self.config.metadata = {**(self.config.metadata or {}), "judge": dict(self.plan.record)}

    # ------------------------------------------------------------------ data
    def download(self, dataset_kwargs: dict[str, Any] | None = None, **kwargs) -> None:
        data_dir, local = data.local_data_dir(), self.plan.local_name
        if data_dir and local:
            self.dataset = data.load_local(data_dir, local, self.config.test_split)
            source = data.local_source(data_dir, local)
            self.config.dataset_path = source["path"]  # results name the file judged, not the hub id
        else:
            unreachable = data.hub_unreachable()  # seconds, where `datasets` would retry for ~40 s
            if unreachable:
                raise DataError(data.hub_failure(self.config.task, local, self.config.dataset_path, unreachable))
            try:
                super().download(dataset_kwargs, **kwargs)
            except Exception as exc:  # hub, network or cache failures of `datasets`: say what to do
                raise DataError(data.hub_failure(self.config.task, local, self.config.dataset_path, exc)) from exc
            source = {"hub": self.config.dataset_path, "name": self.config.dataset_name,
                      "revision": (dataset_kwargs or {}).get("revision")}
        self.config.metadata = {**(self.config.metadata or {}), "data_source": source}

    # lm-eval 0.4.13 asks for the docs five times per task (the few-shot pool, the doc list, the
    # --limit size, the requests, the sample count), and every ask runs process_docs over the whole
    # split again. The processed split is kept per dataset object, so a new download starts afresh.
    def training_docs(self):
        return self._processed("training", super().training_docs)

    def validation_docs(self):
        return self._processed("validation", super().validation_docs)

    def test_docs(self):
        return self._processed("test", super().test_docs)

    def _processed(self, which: str, load):
        source, docs = self._docs.get(which, (None, None))
        if source is None or source is not self.dataset:
            docs = load()
            self._docs[which] = (self.dataset, docs)
        return docs

    # ------------------------------------------------------------------ lm-eval's hooks, handed to the run
    def build_all_requests(self, **kwargs) -> None:
        # The earliest point that is both before any generation and after lm-eval has applied
        # --predict_only (lm-eval 0.4.13 builds the model before the tasks, so task __init__ is
        # not earlier than the model either): a judge that cannot work stops the run here.
        world = ranks.world_of(kwargs.get("rank"), kwargs.get("world_size"))  # lm-eval's sharding of the docs
        self._entry = run.enter(self.plan, self.config.task, world, not self._compat_predict_only(), self._entry)
        try:
            super().build_all_requests(**kwargs)
        except MathJudgeError:
            raise
        except Exception as exc:  # a template that fails on some doc (as in __init__), or lm-eval's reason
            found = overrides.explain(self, enumerate(self.eval_docs))
            raise found or overrides.unbuildable(self.config.task, exc, requests=True) from exc
        overrides.check_targets(self, {inst.doc_id: inst.doc for inst in self._instances}.items())
        run.attach(self._entry, self._instances, super().apply_filters, compat.filter_ensembles(self),
                   self.config.generation_kwargs, self.eval_docs)

    def apply_filters(self):
        if self._entry is None:  # no requests built by this class: lm-eval's own filters, nothing to judge
            return super().apply_filters()
        filtered = self._entry.filter()
        record = generators.provenance(self.config.task)  # which generator made this task's media
        if record is not None:
            self.config.metadata["generator"] = record
        if self._entry.judged:
            run.judge(self._entry, self._scores, self.config.metadata["judge"])
        return filtered

    def process_results(self, doc, results):
        if self._compat_predict_only():
            return super().process_results(doc, results)
        return self._scores[ksamples.key_of(results[0])]

    def _compat_scoring_for(self, repeats: int) -> tuple[Any, Any] | None:
        """lm-eval 0.5's ``--repeats`` after the task was built: the filters and metrics for that k
        (compat.py applies them), or None when nothing changes."""
        changed = self.plan.with_repeats(repeats)
        if changed is None:
            return None
        self.plan, config = changed
        return config.get("filter_list"), config.get("metric_list")
