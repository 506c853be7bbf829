"""The judged task the YAMLs name: lm-eval's hooks, and one task's samples turned into judge requests and scores.

lm-eval calls ``process_results`` once per doc, sequentially; judging there
would cost N x latency. Instead ``apply_filters`` (which lm-eval calls once
per task, after all generations) runs the task's filters once and, through
``run.py``, judges its samples with every other pending task in the run's one
pool (``judge_spec`` says what to judge and where the outcomes go); then it
turns each outcome into the sample's record and scores, and ``process_results``
only reads them. So the metrics still flow through lm-eval's own aggregation
(mean, stderr), ``--log_samples`` and loggers. A panel of judges or a
rule-then-LLM cascade (``judging/factory.py``) is just another judge of one
request. The judge audit (``audit/``) judges its answers with a fresh copy of
the same judge (``build_judge``, ``requests_for``); with ``judge_audit=true`` it
runs after the task is judged.

Task YAMLs select this class with ``class: !function
lm_eval_mathjudge.harness.task.JudgedTask`` and describe the judge in a
``mathjudge:`` block, which this class removes before lm-eval sees the config:

    mathjudge:                    # in the judge's base YAML
      judge: exact_match          # or vlm
      settings: {model: ...}      # optional YAML layer of the judge settings
    mathjudge_dataset: gsm8k      # its data set's entry in core/data_sets.py (hub id, split, process_docs...)
"""

from __future__ import annotations

import dataclasses
import functools
import json
import logging
from collections import Counter
from typing import Any

from .. import compat, generators
from ..calls import stop
from ..compat import TaskBase
from ..core import data_sets, docs as data, flags, ranks
from ..core.errors import ConfigError, DataError, JudgeRunError, MathJudgeError, MediaError
from ..core.judges import JUDGE_FAILED, JUDGES, Judge
from ..core.media import refused as media_refused
from ..core.redact import redact
from ..core.types import JudgeRequest, Outcome, clean_text
from ..cost import budget, prices
from ..cost.spend import Part
from ..judging import cascade, factory, schedule
from ..judging.client import JudgeClient, outcome_from_error
from ..judging.schedule import Job, TaskSpec
from ..settings.layers import check_near_misses, metadata_keys, resolve_run_options, resolve_settings
from ..settings.schema import JudgeSettings, RunOptions
from . import commands, ksamples, overrides, provenance, recovery, run

log = logging.getLogger(__name__)


def register_metrics() -> None:
    """Make every judge metric known to lm-eval (mean aggregation, closed-form stderr)."""
    names = {JUDGE_FAILED: False}
    names.update({m: True for judge in JUDGES.values() for m in judge.metric_names})
    names.update({m: True for m in cascade.METRICS.values()})
    for name, higher in names.items():
        compat.register_metric(name, higher)


class JudgedTask(TaskBase):
    def __init__(self, data_dir=None, cache_dir=None, download_mode=None, config: dict | None = None):
        config = dict(config or {})
        config.pop("class", None)
        block = overrides.our_keys(config)
        self._judge: Judge = _judge_named(block.get("judge", "exact_match"), config.get("task"))
        config, data_set = data_sets.task_config(config)  # mathjudge_dataset: the data keys from its entry
        self._local_name: str | None = data_set.local_name if data_set else None
        self._settings: JudgeSettings = resolve_settings(self._judge.name, block.get("settings"),
                                                         config.get("metadata"))
        self._options: RunOptions = resolve_run_options(self._judge.name, block.get("settings"), config.get("metadata"))
        check_near_misses(config.get("metadata"), metadata_keys(ksamples.KEYS), ignore=commands.model_arg_names())
        self._members = factory.member_settings(self._judge.name, self._options, self._settings,
                                                block.get("settings"), config.get("metadata"))
        for member in self._members:  # a bad price override is a load-time error, not a surprise after paying
            if member.prices is not None:
                prices.load_overrides(member.prices)
        if self._options.cascade and config.get("metric_list"):  # the metric name says it is a cascade's
            config["metric_list"] = [{**m, "metric": cascade.METRICS.get(m.get("metric"), m.get("metric"))}
                                     for m in config["metric_list"]]
        self._scores: dict[str, dict[str, float]] = {}
        self._docs: dict[str, tuple[Any, Any]] = {}  # split -> (the dataset it came from, processed docs)
        self._client: Any = None  # a JudgeClient, a Panel or a Cascade (judging/factory.py)
        self._fatal = None
        self._filtered: tuple[Any] | None = None  # (what apply_filters returns), once the filters ran
        self._judged: tuple[list[tuple[Any, str]], Job] | None = None  # (slots, this task's share of the pass)
        self._shares: dict[int, int] = {}  # judge_dedupe=answer: slot -> the slot whose verdict it may share
        self._classes: dict | None = None  # the answer classes of each doc's k samples, once grouped
        self._members_open: list[JudgeClient] = []
        self._media_dirs: tuple[str, ...] | None = None  # where media may be attached from (_media_roots)
        self.world = ranks.World()  # the ranks lm-eval shards the docs over (set when the requests are built)
        register_metrics()
        self._base_scoring = {k: config.get(k) for k in ("task", "metadata", "metric_list", "filter_list")}
        self._k = ksamples.configure(config, self._judge, self._options)  # repeats > 1: k samples per doc
        try:
            super().__init__(data_dir=data_dir, cache_dir=cache_dir, download_mode=download_mode, config=config)
        except MathJudgeError:
            raise
        except Exception as exc:  # a YAML (override) lm-eval cannot build: which template, or lm-eval's reason
            found = overrides.explain(self, overrides.first_doc(self))
            raise found or overrides.unbuildable(config.get("task"), exc) from exc
        # What the results record about the judge; the run adds its stats, cost and audit to a copy.
        self._judge_record = provenance.judge_record(self._judge, self._settings, self._options, self._members)
        self.config.metadata = {**(self.config.metadata or {}), "judge": dict(self._judge_record)}

    # ------------------------------------------------------------------ lm-eval hooks
    def download(self, dataset_kwargs: dict[str, Any] | None = None, **kwargs) -> None:
        data_dir = data.local_data_dir()
        if data_dir and self._local_name:
            self.dataset = data.load_local(data_dir, self._local_name, self.config.test_split)
            source = data.local_source(data_dir, self._local_name)
            self.config.dataset_path = source["path"]  # results name the file judged, not the hub id
        else:
            unreachable = data.hub_unreachable()  # seconds, where `datasets` would retry for ~40 s
            if unreachable:
                raise DataError(data.hub_failure(self.config.task, self._local_name, self.config.dataset_path,
                                                 unreachable))
            try:
                super().download(dataset_kwargs, **kwargs)
            except Exception as exc:  # hub, network or cache failures of `datasets`: say what to do
                raise DataError(data.hub_failure(self.config.task, self._local_name, self.config.dataset_path,
                                                 exc)) from exc
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

    def build_all_requests(self, **kwargs) -> None:
        # The earliest point that is both before any generation and after lm-eval has applied
        # --predict_only (lm-eval 0.4.13 builds the model before the tasks, so task __init__ is
        # not earlier than the model either): a judge that cannot work stops the run here.
        ksamples.check_ready(self._k, self._options, self.config.task)
        self.world = ranks.world_of(kwargs.get("rank"), kwargs.get("world_size"))  # lm-eval's sharding of the docs
        if not self._bypassed():  # rank 0 first: its passed preflight, remembered in the cache, spares the others
            self.world.first_then_rest(self._open_judge)
        self._filtered = None  # new instances: their filters have not run
        try:
            super().build_all_requests(**kwargs)
        except MathJudgeError:
            raise
        except Exception as exc:  # a template that fails on some doc (as in __init__), or lm-eval's reason
            found = overrides.explain(self, enumerate(self.eval_docs))
            raise found or overrides.unbuildable(self.config.task, exc, requests=True) from exc
        overrides.check_targets(self, {inst.doc_id: inst.doc for inst in self._instances}.items())
        judged = not self._bypassed()
        if judged:
            self._check_k_filters()
        recovery.track(self, rank=self.world.rank,
                       cache_dir=self._settings.resolved_cache_dir() if judged else None)
        if judged:
            run.register(self)
            if self.streams():  # judge_stream: each sample is judged as its generation arrives
                run.stream(self, budgeted=budget.budget_of(self.judge_settings()) is not None)
            # From here to the end of this task's judging a SIGINT/SIGTERM keeps the generations (stop.py).
            stop.guard(self._stop_key, functools.partial(recovery.stop_message, self._settings.resolved_cache_dir()))

    def apply_filters(self):
        result = self._filter()
        self._note_generator()
        if self._bypassed():
            return result
        try:
            recovery.checkpoint(self._settings.resolved_cache_dir())  # before any call, budget check or batch job
            if self._judged is None:
                run.run_pass(self)  # judges this task and every other pending judged task in one pool
            self._finish()
            if self._options.audit:  # judge_audit=true: the judge's gullibility, beside the scores
                from .. import audit

                self.config.metadata["judge"]["audit"] = audit.in_run(self, self._audit_key())
        except stop.Stopped:  # a signal: say what was kept and how to resume (after a real one: exit)
            raise stop.finish() from None
        except (JudgeRunError, budget.BudgetExceeded):  # their messages already say where the generations are
            raise
        except Exception as exc:  # anything else: say what happened and keep the generations
            raise JudgeRunError(f"{self.config.task}: judging failed: {redact(clean_text(str(exc)))}. "
                                + recovery.keep_generations(self._settings.resolved_cache_dir())) from exc
        finally:
            self._close_judge()
            stop.release(self._stop_key)
        return result

    @property
    def _stop_key(self) -> str:
        return f"generations:{self._settings.resolved_cache_dir()}"

    def process_results(self, doc, results):
        if self._bypassed():
            return super().process_results(doc, results)
        return self._scores[ksamples.key_of(results[0])]

    def _compat_scoring_for(self, repeats: int) -> tuple[Any, Any] | None:
        """lm-eval 0.5's ``--repeats`` after the task was built: the filters and metrics for that k
        (compat.py applies them), or None when nothing changes."""
        if repeats == (self._k.k if self._k is not None else 1):
            return None
        self._k, config = ksamples.reconfigure(self._base_scoring, repeats, self._judge, self._options)
        return config.get("filter_list"), config.get("metric_list")

    # ------------------------------------------------------------------ judging
    def _filter(self):
        """lm-eval's filters, once per set of instances (the run's pass may have run them for this task)."""
        if self._filtered is None:
            for inst in self._instances:  # invalid Unicode in one response must not break the task or lm-eval's files
                if inst.resps:
                    inst.resps = [clean_text(r) if isinstance(r, str) else r for r in inst.resps]
            self._filtered = (super().apply_filters(),)
        return self._filtered[0]

    def streams(self) -> bool:
        """Judged as the generations arrive (``judge_stream``, the default) where that changes nothing: an
        online judge, no dry run (it estimates the real answers and sends nothing), filters that read one
        response at a time (``compat.filters_per_response``; with k samples each sample is judged as it
        arrives), and no verdicts shared between samples (``judge_dedupe=answer`` groups a doc's k answers
        once all are in). With a budget, the run prices the worst case before the first streamed call
        (``run._within_budget``); that needs a known answer length and text answers (an answer that names
        media has no size until it exists), and one rank (over several, the budget is decided on every rank
        together, after generation)."""
        if not self._options.stream or self._client is None or self._client.batch_mode:
            return False
        settings = self.judge_settings()
        if any(s.dry_run for s in settings) or (self._k is not None and self._options.dedupe == "answer"):
            return False
        if budget.budget_of(settings) is not None and (
                self.world.size > 1 or self._judge.name == "vlm"
                or _longest_answer(self.config.generation_kwargs) is None):
            return False
        try:
            return compat.filters_per_response(self)
        except Exception:  # noqa: BLE001 - a filter we cannot inspect: judge after generation, as always
            log.debug("%s: filters not inspectable; judged after generation", self.config.task, exc_info=True)
            return False

    def stream_requests(self, index: int, response: str) -> tuple[Any, list[tuple[str, JudgeRequest]]]:
        """This task's judge and the (key, request) of each filter's view of one instance's fresh response,
        exactly as ``judge_spec`` will render them once all responses are in."""
        inst = self._instances[index]
        requests = []
        # k samples: the filters expect k responses (take_first_k checks), so they get this one k times; what
        # they keep of it is this sample's view (every filter here reads one response at a time)
        copies = self._k.k if self._k is not None else 1
        for value in compat.filter_one(self, [clean_text(response)] * copies, inst.doc).values():
            built = self._build_request(inst.doc, _as_text(value))
            if isinstance(built, JudgeRequest):
                requests.append((self._client.key(built), built))
        return self._client, requests

    def _check_k_filters(self) -> None:
        """Before any generation: with k samples every filter pipeline must keep all k of a doc (a majority
        vote or take_first would leave one), else the k samples would be paid for and then refused."""
        if self._k is None or not self._instances:
            return
        k = self._k.k
        try:  # a custom filter cannot be tried on made-up answers: it is checked once the answers are in
            views = compat.filter_one(self, ["0"] * k, self._instances[0].doc) if compat.filters_per_response(self) else {}
        except Exception:  # noqa: BLE001 - as above
            log.debug("%s: filters not tried before generation", self.config.task, exc_info=True)
            return
        for name, value in views.items():
            got = len(value) if isinstance(value, (list, tuple)) else 1
            if got != k:
                raise ConfigError(f"{self.config.task}: the filter {name!r} keeps {got} of the {k} samples of each "
                                  f"doc (repeats {k}); a task with repeats > 1 needs a filter that keeps every sample "
                                  "(remove filter_list, or end it with take_first_k). Nothing was generated")

    def judge_settings(self) -> list[JudgeSettings]:
        """The settings of every judge this task calls (one, or a panel's or cascade's members)."""
        return [m.settings for m in self._members_open]

    def worst_case_parts(self) -> list[Part] | None:
        """What this task's judges could be asked whatever the model answers: every sample's request with
        its answer at the longest the model may write (max_gen_toks), and the judge audit; for the budget
        check before the first streamed call. None when there is no such bound: answers of unknown length,
        or answers that may name media (the VLM judge)."""
        if self._bypassed() or self._client is None:
            return []
        longest = _longest_answer(self.config.generation_kwargs)
        if longest is None or self._judge.name == "vlm":
            return None
        samples = [(inst.doc, self._k.k if self._k is not None else 1) for inst in self._instances
                   if getattr(inst, "request_type", None) == "generate_until"]

        def requests():
            for doc, k in samples:
                built = self._build_request(doc, "")  # the answer's own tokens are counted by answer_tokens
                if isinstance(built, JudgeRequest):
                    yield from [built] * k  # k different answers: k calls

        parts = schedule.parts_for(self.config.task, self._members_open, requests)
        return [dataclasses.replace(part, answer_tokens=longest) for part in parts] + self._audit_parts()

    def joins_run(self) -> bool:
        """Judged by the run's one pool now: judge open, every response generated, not judged yet."""
        return (self._judged is None and self._client is not None and not self._bypassed()
                and bool(self._instances) and all(inst.resps for inst in self._instances))

    def judge_spec(self) -> TaskSpec:
        """What the run's pool judges for this task: its filtered responses, as judge requests (with
        repeats k, each of a doc's k samples is a slot of its own; identical ones share one request key;
        with judge_dedupe=answer, the samples of a doc with equivalent final answers share one verdict)."""
        self._filter()
        slots = list(ksamples.slots(self._instances, self._k))
        self._shares, self._classes = self._answer_groups(slots)

        def render(i: int) -> JudgeRequest | Outcome:
            inst, key, j = slots[i]
            return self._build_request(inst.doc, _as_text(ksamples.response(inst, key, j)))

        def record(job: Job) -> None:
            self._judged = (slots, job)

        audit = (self._audit_key(), self._audit_parts) if self._options.audit else None
        return TaskSpec(name=self.config.task, judge=self._client, members=tuple(self._members_open),
                        slots=len(slots), render=render, record=record,
                        cache_dir=self._settings.resolved_cache_dir(), audit=audit, world=self.world,
                        shares=self._shares)

    def _answer_groups(self, slots: list[tuple[Any, str, int | None]]) -> tuple[dict[int, int], dict | None]:
        """judge_dedupe=answer with k samples: each doc's answer classes (the local rule's, as maj@k groups
        them) and the slots that may share the verdict of the first sample of their class."""
        if self._k is None or self._options.dedupe != "answer":
            return {}, None
        docs, firsts = [], []
        for i, (inst, key, j) in enumerate(slots):
            if j == 0:
                docs.append((inst, key, [_as_text(ksamples.response(inst, key, jj)) for jj in range(self._k.k)]))
                firsts.append(i)
        classes = ksamples.answer_classes(docs, self.config.task)
        # An answer that addresses the judge (flags.py: injections, fake rubric sections, ...) neither
        # lends its verdict nor borrows one: if it fooled the judge, no honest sibling inherits that.
        lenders = {(id(inst), key): [None if flags.detect(text) else c
                                     for c, text in zip(classes[(id(inst), key)], texts)] for inst, key, texts in docs}
        return ksamples.leaders(docs, lenders, firsts), classes

    def _finish(self) -> None:
        """Write this task's outcomes into its instances, scores and metadata; raise for its own failures only."""
        slots, job = self._judged
        client = self._client
        if job.error is not None:
            raise JudgeRunError(schedule.failure_message(job) + " "
                                + recovery.keep_generations(self._settings.resolved_cache_dir())) from job.error
        outcomes = job.slot_outcomes()
        flagged = []
        for i, ((inst, key, j), outcome) in enumerate(zip(slots, outcomes)):
            response = _as_text(ksamples.response(inst, key, j))
            detail = dict(outcome.detail)
            leader = job.shared.get(i, self._shares.get(i) if detail.pop("shared", False) else None)
            fields = {**self._record(response, outcome), **detail}
            if leader is not None:  # judge_dedupe=answer: the verdict of an equivalent answer, not its own
                fields["verdict_shared_from_sample"] = slots[leader][2]
            record = json.dumps(fields, ensure_ascii=False)
            scores = self._judge.scores(outcome.verdict)
            self._scores[record] = cascade.rename(scores) if self._options.cascade else scores
            flagged.append((fields["judge_flags"], self._scores[record]))
            ksamples.store(inst, key, j, record)
        run = provenance.run_stats(self.config.task, client, job.failures(), list(job.skipped.values()),
                                   job.run_stats)
        self.config.metadata["judge"]["run"] = {**run, **provenance.alias_note(self._settings, run)}
        self._note_flags(flagged)
        self._note_k_samples()
        if job.cost is not None:
            self.config.metadata["judge"].update(job.cost)
        self._fatal = client.fatal_error
        self._raise_for_transport_failures(outcomes)

    def _bypassed(self) -> bool:
        return self._compat_predict_only()  # --predict_only: no judging at all

    def _open_judge(self) -> None:
        if self._client is None:
            self._client, self._members_open = self.build_judge()

    def build_judge(self) -> tuple[Any, list[JudgeClient]]:
        """A new copy of this task's judge (one client, a panel or a cascade) and its member clients; the
        caller closes it. The task judges its samples with one; the judge audit opens another."""
        return factory.open_judge(self._judge, self._options, self._members)

    def _close_judge(self) -> None:
        self._members_open = []
        self._media_dirs = None
        self._judged = None  # its outcomes are in the instances now; the keys can go
        self._shares, self._classes = {}, None
        if self._client is not None:
            self._client.close()
            self._client = None

    # ------------------------------------------------------------------ judging answers that are not samples
    # The judge audit (lm_eval_mathjudge.audit) judges its answers exactly as the samples are judged: a
    # fresh copy of the task's judge (same settings, template, cache, limits, retries, batch mode, panel
    # or cascade), its requests built by the task's own template, through the same pool (schedule.py).
    @property
    def judge(self) -> Judge:
        return self._judge

    @property
    def options(self) -> RunOptions:
        return self._options

    def requests_for(self, pairs: list[tuple[dict, str]]) -> list[JudgeRequest | Outcome]:
        return [self._build_request(doc, response) for doc, response in pairs]

    def _audit_parts(self) -> list[Part]:
        """The audit's requests, for this run's dry run and budget (judge_audit=true), until it has run."""
        if not self._options.audit or self._bypassed():
            return []
        from .. import audit

        built = self.requests_for(audit.pending_pairs(self, self._audit_key()))
        return schedule.parts_for(audit.ledger_name(self.config.task), self._members_open,
                                  lambda: [item for item in built if isinstance(item, JudgeRequest)])

    def _audit_key(self) -> str:
        """Tasks of one run with the same judge (settings, template, panel or cascade) share one audit."""
        return json.dumps([self._judge_record, self._options.audit_limit], sort_keys=True, default=str)

    def _note_flags(self, flagged: list[tuple[list[str], dict[str, float]]]) -> None:
        """How many answers addressed the judge, per flag, and how they scored (flags.py)."""
        summary = flags.summarise(flagged)
        self.config.metadata["judge"]["flags"] = summary
        if self._judge.name == "vlm":
            self.config.metadata["judge"]["media_dirs"] = list(self._media_roots())
        if summary["flagged"]:
            log.warning("%s: %d of %d responses are flagged as addressing the judge (%s); see judge_flags in the "
                        "samples file", self.config.task, summary["flagged"], summary["samples"],
                        ", ".join(f"{k}: {v['samples']}" for k, v in summary["by_flag"].items()))

    def _note_k_samples(self) -> None:
        """repeats > 1: each doc's k-sample metrics from its k records, and the k-sample summary."""
        if self._k is not None:
            self.config.metadata["judge"]["k_samples"] = ksamples.finish(self._instances, self._k, self._scores,
                                                                         self.config.task, known=self._classes)
            self._classes = None

    def _media_roots(self) -> tuple[str, ...]:
        """Folders media may be attached from: the generator's, then the judge_media_dirs setting."""
        if self._media_dirs is None:
            made = generators.media_dirs(self.config.task)
            self._media_dirs = tuple(dict.fromkeys((*made, *self._options.media_dirs)))
        return self._media_dirs

    def _build_request(self, doc: dict, response: str) -> JudgeRequest | Outcome:
        failed = generators.generation_failure(response)
        if failed is not None:  # the generator made no media for this doc: counted, never judged
            return Outcome(failure=failed[0], error=failed[1])
        try:
            return self._judge.request(doc, clean_text(response), self._media_roots())
        except MediaError as exc:  # the output names media that cannot be sent: this sample only
            log.warning("%s: %s", self.config.task, exc)
            return outcome_from_error(exc)

    def _record(self, response: str, outcome: Outcome) -> dict[str, Any]:
        """What --log_samples shows for one judged response (as a JSON string)."""
        return {
            "verdict": None if outcome.verdict is None else self._judge.describe(outcome.verdict),
            "judge_failed": outcome.failure is not None,
            "failure": outcome.failure,
            "error": redact(outcome.error) if outcome.error else outcome.error,
            "raw_reply": redact(outcome.raw_reply) if outcome.raw_reply else outcome.raw_reply,
            "cached": outcome.cached,
            "judge": self.config.metadata["judge"]["pipeline"],  # a cascade's record names its deciding stage
            "judge_flags": self._flags(response),
            "response": response,
        }

    def _flags(self, response: str) -> list[str]:
        """flags.py's flags of a response, and ``media_outside`` when it names media we refused to read."""
        if generators.generation_failure(response) is not None:  # our own marker, not the model's text
            return []
        found = flags.detect(response)
        if self._judge.name == "vlm" and media_refused(response, self._media_roots()):
            found.append("media_outside")
        return found

    def _raise_for_transport_failures(self, outcomes: list[Outcome]) -> None:
        failed = [o for o in outcomes if o.transport_failed]
        if not failed:
            return
        kinds = ", ".join(f"{k}: {n}" for k, n in sorted(Counter(o.failure for o in failed).items()))
        cause = redact(f" The judge refused the requests: {self._fatal}." if self._fatal
                       else f" Last error: {failed[-1].error}.")
        raise JudgeRunError(
            f"{self.config.task}: {len(failed)} of {len(outcomes)} samples got no verdict ({kinds}).{cause} "
            f"Nothing was scored as wrong. Every verdict obtained is cached in {self._settings.resolved_cache_dir()}, "
            f"so rerunning the same command judges only the missing samples. "
            + recovery.keep_generations(self._settings.resolved_cache_dir()))

    def _note_generator(self) -> None:
        """Record which generator made this task's media (adapter, model, options, prompt, counters)."""
        record = generators.provenance(self.config.task)
        if record is not None:
            self.config.metadata["generator"] = record

def _judge_named(name: str, task: str | None) -> Judge:
    if name not in JUDGES:
        raise ConfigError(f"task {task}: unknown judge {name!r} in the mathjudge block; known: {', '.join(JUDGES)}")
    return JUDGES[name]


def _as_text(value: Any) -> str:
    # Without a take_first filter lm-eval hands over a list (one response per repeat).
    if isinstance(value, (list, tuple)):
        value = value[0] if value else ""
    return value if isinstance(value, str) else str(value)


def _longest_answer(generation_kwargs: Any) -> int | None:
    """The most tokens the model may write per answer: the task's (or --gen_kwargs') limit; None when
    they name none (the model adapter's own limit then applies, which the task cannot see)."""
    kwargs = generation_kwargs if isinstance(generation_kwargs, dict) else {}
    limits = [kwargs.get(name) for name in ("max_gen_toks", "max_tokens", "max_new_tokens", "max_completion_tokens")]
    found = [int(v) for v in limits if isinstance(v, (int, float, str)) and str(v).strip().isdigit()]
    return max(found) if found else None
