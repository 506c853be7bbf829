"""GeneratorLM: an lm-eval model that answers each request with a generated image or video.

Flow of ``generate_until`` (lm-eval hands over every request of every task at once):

    question of the doc -> our generator prompt (prompts/generator_<kind>.txt, or prompt=FILE)
    sample i of the doc (repeats: k; lm-eval passes a doc's request k times in a row)
    key = hash(adapter, model, options, prompt[, i])       # store.request_key; i = 0 keeps the k=1 key
    store has media for key     -> answer with its path   (reused, no call)
    store has a remembered failure -> failure marker      (no call; retry_failures=true asks again)
    otherwise the missing samples of a prompt go in chunks of the vendor's max_outputs (one call each;
    a recorded job's samples stay one chunk), through workers.run_bounded (num_concurrent) and
    retry.call_with_retries:
        vendor.generate_many(prompt, count, job) -> [bytes] -> store.put_many -> the files' paths
        fewer outputs than asked: the ones that came are kept, one more call asks for the rest
        a recorded job resumed: each sample takes the output recorded as its own (job.positions);
        one whose output is unknown or missing is made by a new job
    GenerationFailure (content policy, safety, failed job) -> failure marker, remembered
    transient errors past max_retries, fatal errors        -> GenerationRunError after the
        batch: every file already generated stays indexed, a rerun generates only the rest

The answer is the absolute path of the stored file; the VLM judge attaches it.
A failure marker (``generators.failure_marker``) becomes the sample's counted
failure in the harness. The generator's identity and counters go to the
results file under ``configs.<task>.metadata.generator``.

Writing a vendor generator (the interface other modules implement)
-----------------------------------------------------------------
1. A generator class with (see ``Generator`` below)::

       kind: str                      # "image" or "video": picks the default prompt and checks the bytes
       def options(self) -> dict      # normalised options that shape the output (defaults filled in);
                                      # part of the store key and of the provenance, so no secrets
       def generate(self, prompt: str, job: Job) -> bytes | GeneratedMedia   # ONE attempt, no retries
       def close(self) -> None
       # optional, where one API call can return several outputs for a prompt (k samples per problem):
       max_outputs: int               # most outputs one call may ask for (absent: 1)
       def generate_many(self, prompt: str, count: int, job: Job) -> list[bytes | GeneratedMedia]
                                      # ONE attempt asking for ``count`` (<= max_outputs) outputs; may
                                      # return fewer (the base keeps them and asks again for the rest)

   ``generate`` raises the project's typed errors (``errors.py``):
   ``TransientJudgeError(msg, kind=..., retry_after=seconds|None)`` for 429/5xx/timeouts/connection
   (retried by ``retry.call_with_retries``, Retry-After honoured); ``FatalJudgeError`` for bad key,
   unknown model, bad request (no further calls; the run stops with one message);
   ``GenerationFailure(msg, kind="content_policy"|"safety"|"job_failed"|...)`` when this prompt gets no
   media (the sample's counted failure; ``remember=False`` if a rerun should try again).
   Messages must go through ``redact.redact``. Vendor SDK retries must be off (``max_retries=0``).

   Long-running jobs (video): ``job.id`` is a job started for this same request by an earlier attempt
   or an interrupted run; poll it instead of creating a new one. After creating a job call
   ``job.started(vendor_id)`` at once (it is persisted before you poll). Poll with
   ``job.wait(check, what)``: ``check()`` returns the finished result or None while pending;
   ``wait`` sleeps ``poll_interval`` between checks and raises ``GenerationFailure(kind="timeout",
   remember=False)`` after ``poll_timeout`` in total (the job stays recorded: a rerun resumes it).
   If the vendor says the job failed or is gone, call ``job.forget()`` and raise. Polling a recorded job,
   ``generate_many`` returns all of the job's outputs in the vendor's order, whatever ``count`` says:
   each sample takes the one at its recorded position (``job.positions``).

2. An lm-eval model class, a subclass of ``GeneratorLM``::

       class MyLM(GeneratorLM):
           ADAPTER = "mathjudge-my-vendor"          # the --model name
           KIND = "image"                           # or "video" (default prompt)
           OPTIONS = {"size": str, "seconds": int}  # vendor model_args and their parsers
           CREDENTIALS = Service(("MY_API_KEY",), "export MY_API_KEY=...")   # settings.credentials; checked first
           def build(self, settings: GeneratorSettings, options: dict) -> Generator:
               from .my_vendor_sdk_module import MyGenerator  # SDKs imported here, lazily
               return MyGenerator(settings, options)

   ``options`` holds only the OPTIONS keys the user gave, already parsed; unknown model_args
   are refused by the base class. Common model_args (``GeneratorSettings``): ``model`` (required),
   ``media_dir``, ``num_concurrent``, ``rpm``, ``max_retries``, ``timeout`` (seconds per HTTP
   attempt), ``poll_interval``, ``poll_timeout``, ``prompt`` (a template file with ``{{question}}``),
   ``retry_failures``.

   (``settings.py`` parses the model_args, ``job.py`` holds ``Job``, ``store.py`` the media store.)

3. Register the name in ``generators.ADAPTERS`` ("name" -> "module:Class"); ``_startup.py``
   registers every entry with lm-eval lazily.
"""

from __future__ import annotations

import logging
import threading
from collections import Counter
from dataclasses import asdict, dataclass, field, replace
from typing import Any, Callable, Mapping, Protocol

from lm_eval.api.model import LM

from ..calls import stop
from ..calls.limits import backend_limits
from ..calls.workers import run_bounded
from ..calls.retry import RetryPolicy, call_with_retries
from ..core.docs import question_of
from ..core.errors import (ConfigError, FatalJudgeError, GenerationFailure, GenerationRunError, JudgeCallError,
                           TransientJudgeError)
from ..core.media import media_problem, sniff
from ..core.redact import redact
from ..settings.credentials import Service
from . import failure_marker, record_provenance
from .job import Job
from .settings import GeneratorSettings, check_credentials, default_media_dir, load_template, split_model_args
from .store import MediaStore, StoredMedia, request_key

__all__ = ["GeneratedMedia", "Generator", "GeneratorLM", "GeneratorSettings", "Job", "ManyOutputs", "chunks",
           "default_media_dir"]

log = logging.getLogger(__name__)

KINDS = ("image", "video")


@dataclass(frozen=True)
class GeneratedMedia:
    data: bytes = field(repr=False)
    mime_type: str | None = None  # None: taken from the bytes


class Generator(Protocol):
    kind: str

    def options(self) -> dict[str, Any]:
        """Normalised options that shape the output (part of the store key; no secrets)."""

    def generate(self, prompt: str, job: Job) -> bytes | GeneratedMedia:
        """One attempt; raises TransientJudgeError / FatalJudgeError / GenerationFailure."""

    def close(self) -> None:
        """Release the SDK client."""


class ManyOutputs(Protocol):
    """What a generator adds when one call can make several outputs (``max_outputs`` > 1)."""
    max_outputs: int

    def generate_many(self, prompt: str, count: int, job: Job) -> list[bytes | GeneratedMedia]:
        """One attempt asking for ``count`` outputs; fewer may come back (never none: raise instead)."""


@dataclass(frozen=True)
class _Work:
    prompt: str
    keys: tuple[str, ...]  # samples of this prompt made together: one call (or one job), up to max_outputs


@dataclass(frozen=True)
class _Result:
    path: str | None = None
    failure: tuple[str, str] | None = None  # (kind, message): a counted per-sample failure
    error: JudgeCallError | None = None  # no media and nothing counted: the run stops after the batch
    reused: bool = False
    calls: int = 0  # vendor calls of the chunk (on its first key only, so sums count each call once)
    outputs: int = 0  # media the vendor returned, each paid for (on the chunk's first key only)


def chunks(keys: list[str], max_outputs: int, jobs: Mapping[str, str | None]) -> list[tuple[str, ...]]:
    """The calls that make the missing samples ``keys`` of one prompt (in sample order): the samples of a
    recorded job stay together (polled, not paid again), the rest go ``max_outputs`` to a call."""
    started: dict[str, list[str]] = {}
    free = []
    for key in keys:
        job_id = jobs.get(key)
        (started.setdefault(job_id, []) if job_id else free).append(key)
    size = max(1, max_outputs)
    return [tuple(group) for group in started.values()] + [tuple(free[i:i + size]) for i in range(0, len(free), size)]


class GeneratorLM(LM):
    ADAPTER = ""
    KIND = "image"
    OPTIONS: Mapping[str, Callable[[str], Any]] = {}
    CREDENTIALS: str | Service | None = None  # a name in settings.credentials.SERVICES, or the vendor's own

    def __init__(self, **model_args: Any):
        super().__init__()
        self.settings, vendor_args = split_model_args(self.ADAPTER, self.OPTIONS, model_args)
        check_credentials(self.ADAPTER, self.CREDENTIALS)
        self._template = load_template(self.KIND, self.settings.prompt)
        self._generator = self.build(self.settings, vendor_args)
        if self._generator.kind not in KINDS:
            raise ConfigError(f"{self.ADAPTER}: generator kind {self._generator.kind!r} is not one of {KINDS}")
        self._options = dict(self._generator.options())
        self._label = f"{self.ADAPTER}:{self.settings.model}"
        self._store = MediaStore(self.settings.media_dir)
        self._policy = RetryPolicy(max_retries=self.settings.max_retries)
        # The judge's limits (calls/limits.py): one set per adapter + model in this process. Not adaptive: a
        # generation holds its place for a whole video job (minutes of polling), so a gate lowered by
        # one 429 on a create would run the jobs one after another; the retry layer handles the 429.
        self._limits = backend_limits({"backend": f"generator:{self.ADAPTER}", "model": self.settings.model},
                                      rpm=self.settings.rpm, concurrency=self.settings.num_concurrent,
                                      adaptive=False)
        self._retrying = threading.local()
        self._lock = threading.Lock()
        self._fatal: FatalJudgeError | None = None
        self.stats: Counter = Counter()

    # ------------------------------------------------------------------ vendor hooks
    def build(self, settings: GeneratorSettings, options: dict[str, Any]) -> Generator:
        raise NotImplementedError

    # ------------------------------------------------------------------ configuration
    def provenance(self) -> dict[str, Any]:
        return {"adapter": self.ADAPTER, "model": self.settings.model, "kind": self._generator.kind,
                "options": dict(self._options), "prompt_version": self._template.version,
                "media_dir": self._store.directory,
                "settings": {k: v for k, v in asdict(self.settings).items() if k not in ("model", "media_dir")}}

    # ------------------------------------------------------------------ lm-eval API
    def generate_until(self, requests, disable_tqdm: bool = False) -> list[str]:
        slots, prompts = self._plan(requests)
        results, work = self._look_up(prompts)
        with stop.guarded(f"generator:{self._label}", self._kept):  # a stop: say what is kept, exit
            for made in run_bounded(work, self._produce, concurrency=self.settings.num_concurrent,
                                    desc=f"generating ({self.ADAPTER})", progress=not disable_tqdm,
                                    unit="call", thread_name="mathjudge-gen"):
                results.update(made)
        self._record(slots, prompts, results)
        errors = [r.error for r in results.values() if r.error is not None]
        if errors:
            raise self._run_error(errors, prompts, results)
        return [results[key].path or failure_marker(*results[key].failure) for _, key in slots]

    def _kept(self) -> str:
        return (f"Every file {self.ADAPTER} finished is kept in {self._store.directory} and every video job it "
                "started is recorded: rerun the same command to generate only the rest (started jobs are "
                "polled, not paid for again).")

    def loglikelihood(self, requests, disable_tqdm: bool = False):
        raise ConfigError(f"{self.ADAPTER} generates images or videos; it has no log-likelihoods, so it can "
                          "only run generate_until tasks such as the *_vlmjudge ones")

    loglikelihood_rolling = loglikelihood

    # ------------------------------------------------------------------ generation
    def _plan(self, requests) -> tuple[list[tuple[str, str]], dict[str, str]]:
        """(task, key) per request, and the prompt of every key.

        lm-eval passes a doc's request ``repeats`` times in a row (the same Instance, in every supported
        version), so the n-th sight of a request is its sample n; modulo ``repeats`` because lm-eval's
        padding for several ranks repeats the last request's k copies once more (made once, not paid twice).
        """
        slots, prompts, seen = [], {}, Counter()
        for request in requests:
            prompt = self._template.render(question=_question(request))
            sight = (request.task_name, getattr(request, "doc_id", None), prompt)
            repeats = getattr(request, "repeats", None)
            sample = seen[sight] % repeats if isinstance(repeats, int) and repeats > 0 else seen[sight]
            seen[sight] += 1
            key = request_key(self.ADAPTER, self.settings.model, self._options, prompt, sample)
            prompts.setdefault(key, prompt)  # the same prompt in two tasks: each sample is made once
            slots.append((request.task_name, key))
        return slots, prompts

    def _look_up(self, prompts: dict[str, str]) -> tuple[dict[str, _Result], list[_Work]]:
        """The samples the store already answers, and the calls that make the rest."""
        found, missing = {}, {}
        for key, prompt in prompts.items():
            stored = self._store.find(key)
            remembered = None if stored or self.settings.retry_failures else self._store.failure(key)
            if stored is not None:
                found[key] = _Result(path=stored.path, reused=True)
            elif remembered is not None:
                found[key] = _Result(failure=remembered, reused=True)
            else:
                missing.setdefault(prompt, []).append(key)
        most = max(1, int(getattr(self._generator, "max_outputs", 1) or 1))
        if not callable(getattr(self._generator, "generate_many", None)):
            most = 1
        work = [_Work(prompt, chunk) for prompt, keys in missing.items()
                for chunk in chunks(keys, most, {k: self._store.job(k) for k in keys})]
        return found, work

    def _produce(self, item: _Work) -> dict[str, _Result]:
        """Make the samples of one chunk: one call, and one more for each short return (at most one per sample)."""
        made: dict[str, _Result] = {}
        pending = list(item.keys)
        tally: Counter = Counter()
        resume = True  # only the first round takes up a recorded job: what it did not answer needs a new one
        try:
            while pending:
                job = Job(self._store, pending, self._label, self.settings,
                          on_start=lambda: self._count("jobs_started"), resume=resume)
                resume = False
                if job.resumed:
                    self._count("jobs_resumed")
                stored = call_with_retries(lambda: self._attempt(item.prompt, job, tally), self._policy,  # noqa: B023 (called in this iteration)
                                           on_retry=self._on_retry)
                made.update({key: _Result(path=media.path) for key, media in stored.items()})
                asked, pending = len(pending), [key for key in pending if key not in stored]
                if pending:
                    self._count("short_returns")
                    log.info("%s: %d of %d samples got an output; asking again for the rest", self._label,
                             asked - len(pending), asked)
        except GenerationFailure as exc:
            message = redact(str(exc))
            for key in pending:
                if exc.remember:
                    self._store.put_failure(key, exc.kind, message, self._label)
                made[key] = _Result(failure=(exc.kind, message))
            log.warning("%s: no media for %d sample(s) of one prompt (%s): %s", self._label, len(pending), exc.kind,
                        message)
        except JudgeCallError as exc:
            made.update(self._unmade(pending, exc))
        except Exception as exc:  # a vendor bug must not lose the other requests' media
            log.exception("%s: unexpected error while generating", self._label)
            error = JudgeCallError(redact(f"unexpected error: {exc!r}"), kind="unexpected")
            made.update(self._unmade(pending, error))
        first = item.keys[0]
        made[first] = replace(made[first], calls=tally["calls"], outputs=tally["outputs"])
        return made

    def _unmade(self, pending: list[str], error: JudgeCallError) -> dict[str, _Result]:
        """The error for each of ``pending`` still without media (a full disk midway kept the ones before it)."""
        found = {key: self._store.find(key) for key in pending}
        return {key: _Result(path=media.path) if media else _Result(error=error) for key, media in found.items()}

    def _attempt(self, prompt: str, job: Job, tally: Counter) -> dict[str, StoredMedia]:
        if self._fatal is not None:  # another request hit a fatal error: stop spending
            raise FatalJudgeError(f"not sent: {self._fatal}", kind="aborted")
        retry, self._retrying.value = getattr(self._retrying, "value", False), False
        permit = self._limits.start(retry=retry)
        if stop.requested():  # a signal came while this attempt waited for its turn: it never starts
            permit.done("unsent")
            raise stop.stopped()
        outcome = "failed"
        count = len(job.keys)
        tally["calls"] += 1
        self._count("generation_calls")
        try:
            try:
                produced = self._ask(prompt, count, job)
            except FatalJudgeError as exc:
                with self._lock:
                    self._fatal = self._fatal or exc
                raise
            except TransientJudgeError as exc:
                if exc.status == 429 or exc.kind == "rate_limited":
                    outcome = "limited"
                raise
            outcome = "ok"
        finally:
            permit.done(outcome)
        tally["outputs"] += len(produced)
        self._count("outputs", len(produced))
        if not produced:  # retried (a recorded job is polled again, not paid for again)
            raise TransientJudgeError(f"{self._label} answered without any {self._generator.kind}",
                                      kind="bad_response")
        # Each key takes its own output: a fresh job's keys the first ones in order (more than asked: not ours
        # to keep apart from the samples asked for); a resumed job's keys the ones they were recorded with.
        claims = [(key, produced[p]) for key, p in zip(job.keys, job.positions) if p is not None and p < len(produced)]
        if not claims:  # a resumed job made fewer outputs than its recorded positions say: a new job makes them
            log.warning("%s: job %s has no output at the positions recorded for %d sample(s); a new job makes them",
                        self._label, job.id, len(job.keys))
            job.forget()
            return {}
        checked, problems = [], []
        for key, media in claims:
            try:
                checked.append((key, *self._checked(media)))
            except TransientJudgeError as exc:
                problems.append(exc)
        if not checked:  # retried, as above
            raise problems[0]
        if problems:
            log.warning("%s: %d of %d outputs dropped (%s); asking again for them", self._label, len(problems),
                        len(claims), problems[0])
        try:  # the job's outputs are all here: its other samples are asked for anew
            stored = self._store.put_many(checked, self._label, release=job.keys)
        except FatalJudgeError as exc:  # the disk refused the file: every further one would be paid and lost
            with self._lock:
                self._fatal = self._fatal or exc
            raise
        return {key: media for (key, _, _), media in zip(checked, stored)}

    def _ask(self, prompt: str, count: int, job: Job) -> list[bytes | GeneratedMedia]:
        many = getattr(self._generator, "generate_many", None)
        if not callable(many) or (count == 1 and job.id is None):  # a recorded job: all its outputs, for positions
            return [self._generator.generate(prompt, job)]
        return list(many(prompt, count, job))

    def _checked(self, produced: bytes | GeneratedMedia) -> tuple[bytes, str]:
        media = produced if isinstance(produced, GeneratedMedia) else GeneratedMedia(produced)
        found = sniff(media.data[:32])
        if not media.data or found is None or not found.startswith(self._generator.kind + "/"):
            raise TransientJudgeError(f"the {self._generator.kind} returned is not a readable "
                                      f"{self._generator.kind} ({len(media.data)} bytes, looks like {found})",
                                      kind="bad_media")
        problem = media_problem(media.data, found)
        if problem:  # retried: never stored, never judged
            raise TransientJudgeError(f"{self._label} returned a damaged file: {problem}", kind="truncated_media")
        return media.data, found  # the bytes decide, whatever the vendor declared

    def _on_retry(self, error: JudgeCallError, delay: float) -> None:
        self._retrying.value = True  # this thread's next attempt enters the gate as a retry
        self._count("retries")
        log.warning("%s: generation failed (%s); retrying in %.1fs", self._label, error, delay)

    def _count(self, name: str, n: int = 1) -> None:
        with self._lock:
            self.stats[name] += n

    # ------------------------------------------------------------------ reporting
    def _record(self, slots: list[tuple[str, str]], prompts: dict[str, str], results: dict[str, _Result]) -> None:
        for task in sorted({task for task, _ in slots}):
            keys = {key for t, key in slots if t == task}
            mine = [results[k] for k in keys]
            run = {"requests": sum(1 for t, _ in slots if t == task),
                   "unique_prompts": len({prompts[k] for k in keys}), "samples": len(keys),
                   "generation_calls": sum(r.calls for r in mine), "outputs": sum(r.outputs for r in mine),
                   "reused_files": sum(1 for r in mine if r.reused and r.path),
                   "reused_failures": sum(1 for r in mine if r.reused and r.failure),
                   "generated_files": sum(1 for r in mine if r.path and not r.reused),
                   "failures": dict(Counter(r.failure[0] for r in mine if r.failure)),
                   "errors": dict(Counter(r.error.kind for r in mine if r.error))}
            record_provenance(task, {**self.provenance(), "run": run})
            log.info("%s on %s: %s", self._label, task, run)
        log.info("%s: %s", self._label, dict(self.stats))

    def _run_error(self, errors: list[JudgeCallError], prompts: dict[str, str],
                   results: dict[str, _Result]) -> GenerationRunError:
        kinds = ", ".join(f"{k}: {n}" for k, n in sorted(Counter(e.kind for e in errors).items()))
        lacking = len({prompts[k] for k, r in results.items() if r.error is not None})
        fatal = self._fatal
        cause = (f"Last error: {errors[-1]}" if fatal is None else f"Generation stopped: {fatal}"
                 if fatal.kind == "disk_full" else f"The generator refused the requests: {fatal}")
        return GenerationRunError(
            f"{self.ADAPTER}: {lacking} of {len(set(prompts.values()))} prompts got no media ({kinds}). "
            f"{redact(str(cause))}. Nothing was scored. Every file generated so far is kept and indexed in "
            f"{self._store.directory}, so rerunning the same command generates only the missing ones (started "
            "video jobs are polled, not paid for again).")


def _question(request) -> str:
    question = question_of(request.doc or {})
    return request.args[0] if question is None else question  # not one of our tasks: the task's own prompt
