"""The one place where concurrency, rate limiting, caching and retries meet.

A client judges one unique request at a time (``judge_one``): it answers what it
can from the cache and makes the calls (optionally rate limited) otherwise. The
run's pool (``schedule.py``) keys the requests (``key``), counts them
(``count_requests``), pre-fills the cache in batch mode (``prefill``), hands each
unique request to ``judge_one`` and counts the failures (``finish``); panels and
the cascade are built from the same pieces. ``judge_all`` is that pool for one
client's requests. Per request:

    if cache[key(ask)] parses for ask 0 or 1:  -> verdict, no call
    if both asks are cached and off-contract:  -> failure "unparseable", no call
    for ask in (0, 1):                 # an off-contract reply is asked again once
        reply = judge call (with retries)   -> cached under key(ask)
        parse(reply) -> verdict        # done
    -> failure "unparseable"

A cached reply is always re-parsed, so a parser fix rescores old replies for
free, and a rerun of the same evaluation makes no call at all.
A fatal error (bad key, unknown model) stops new calls at once: the run fails
with one message instead of a storm of identical errors. So does an endpoint that
stopped answering: once ``UNRESPONSIVE_CALLS`` calls in a row (no reply in between)
have timed out on every attempt, no further attempt is sent, and each sample left
is a counted ``timeout`` failure; a run against a dead or dripping endpoint then
ends after about one call's attempts (``judge_timeout`` x attempts), not one per
wave of ``judge_concurrency`` samples.

Every reply is cleaned (invalid Unicode replaced) and scrubbed of credentials
before it is cached, parsed or shown; every error message is scrubbed before
it reaches an ``Outcome``. Processes sharing a cache share in-flight calls
through the cache's leases: a key another process is already paying for is
waited for, not asked again; inside the process, a key already in flight in this
client is waited for the same way (``flights.py``), so two identical requests
asked at once never race as two cache misses.
"""

from __future__ import annotations

import logging
import sqlite3
import threading
from collections import Counter
from dataclasses import dataclass, field
from typing import Any, Callable, Iterable, Sequence

from ..calls import stop
from ..calls.limits import backend_limits, estimate_tokens
from ..calls.retry import MAX_DELAY, RetryPolicy, call_with_retries
from ..core.errors import (FatalJudgeError, JudgeCallError, JudgeRefusal, MathJudgeError, MediaError,
                           TransientJudgeError, UnparseableReply)
from ..core.redact import redact
from ..core.types import Backend, JudgeRequest, Outcome, Reply, clean_reply, clean_text
from ..settings.schema import JudgeSettings, judge_label
from . import preflight
from .cache import ReplyCache, request_key
from .flights import Flights

log = logging.getLogger(__name__)

PARSE_ASKS = 2  # first ask + one re-ask after an off-contract reply
MEDIA_STATUSES = (400, 413, 415, 422)  # refusals of a request carrying media: about this sample's media
TRUNCATED = frozenset({"length", "MAX_TOKENS"})  # finish reasons of a reply cut at max tokens (OpenAI, Gemini)
UNRESPONSIVE_CALLS = 3  # calls in a row that timed out on every attempt: the endpoint stopped answering


def outcome_from_error(error: MathJudgeError, *, calls: int = 0, reply: Reply | None = None) -> Outcome:
    """The one place an error becomes an Outcome; the error class says whether it is scored."""
    return Outcome(failure=getattr(error, "kind", None) or "error", transport=not getattr(error, "scored", False),
                   error=redact(clean_text(str(error))), calls=calls,
                   raw_reply=reply.text if reply is not None else None,
                   usage=reply.usage if reply is not None else {})


_PREFLIGHTED: set[str] = set()  # backend identities checked in this process
_PREFLIGHT_LOCK = threading.Lock()


def preflight_once(backend: Backend, settings: JudgeSettings, cache: ReplyCache | None = None) -> bool:
    """Run the backend's free check (a model lookup) once per judge identity per process.

    With a cache, a check passed within ``preflight.MEMO_SECONDS`` under the same
    credentials is not repeated (a fully cached rerun then never imports the SDK).
    Raises what the backend raises (``FatalJudgeError`` naming the endpoint); returns
    whether a check ran. Backends without ``preflight`` (the local judge) are skipped.
    With ``judge_preflight=false`` nothing is sent, but the SDK client is still built,
    so a client that cannot exist (no Azure endpoint) fails before generation.
    """
    if not hasattr(backend, "preflight"):
        return False
    if not settings.preflight:
        connect = getattr(backend, "connect", None)
        if callable(connect):
            connect()
        return False
    ident = preflight.identity(backend, settings)
    with _PREFLIGHT_LOCK:
        if ident in _PREFLIGHTED:
            return False
        if preflight.recently_checked(cache, ident):
            log.info("the %s judge %s passed its preflight within %d h (remembered in the judge cache); not "
                     "checked again", settings.backend, settings.model, preflight.MEMO_SECONDS // 3600)
            _PREFLIGHTED.add(ident)
            return False
        backend.preflight()
        _PREFLIGHTED.add(ident)
        preflight.remember(cache, ident)
    return True


def _tokens_used(reply: Reply) -> float | None:
    """The reply's real token count (thinking included), or None when the backend reports none."""
    usage = reply.usage
    if isinstance(usage.get("total_tokens"), int):
        return float(usage["total_tokens"])
    parts = [usage.get(k) for k in ("prompt_tokens", "completion_tokens", "thoughts_tokens")]
    counted = [v for v in parts if isinstance(v, int)]
    return float(sum(counted)) if counted else None


@dataclass
class JudgeStats:
    requests: int = 0
    unique: int = 0
    cache_hits: int = 0
    calls: int = 0
    retries: int = 0
    rate_limited: int = 0  # retries caused by a 429
    shared: int = 0  # replies another process paid for while this one waited
    in_flight: int = 0  # identical requests that waited for this client's call already in flight
    failures: Counter = field(default_factory=Counter)
    usage: Counter = field(default_factory=Counter)
    batch: Counter = field(default_factory=Counter)  # judge_mode=batch: submitted, succeeded, failed, expired, ...
    batch_usage: Counter = field(default_factory=Counter)  # tokens paid at batch prices (not in ``usage``)
    cache_failures: Counter = field(default_factory=Counter)  # cache writes/reads a full or failing disk refused
    reported_models: Counter = field(default_factory=Counter)  # paid replies per model version the API reported
    # Every reply a verdict was read from (paid, cached, or filled by a batch job) per reported model version,
    # and per OpenAI system_fingerprint: a rerun from the cache still says which snapshot judged it.
    used_models: Counter = field(default_factory=Counter)
    fingerprints: Counter = field(default_factory=Counter)

    def as_dict(self) -> dict[str, Any]:
        return {"requests": self.requests, "unique_requests": self.unique, "cache_hits": self.cache_hits,
                "judge_calls": self.calls, "retries": self.retries, "rate_limited": self.rate_limited,
                "shared_with_other_processes": self.shared, "failures": dict(self.failures),
                **({"shared_in_flight": self.in_flight} if self.in_flight else {}),
                "usage": dict(self.usage),
                **({"batch": dict(self.batch), "batch_usage": dict(self.batch_usage)} if self.batch else {}),
                **({"cache_failures": dict(self.cache_failures)} if self.cache_failures else {}),
                **({"reported_models": dict(self.reported_models)} if self.reported_models else {}),
                **({"used_models": dict(self.used_models)} if self.used_models else {}),
                **({"fingerprints": dict(self.fingerprints)} if self.fingerprints else {})}


class JudgeClient:
    def __init__(self, backend: Backend, parse: Callable[[str], Any], settings: JudgeSettings,
                 template_version: str, cache: ReplyCache | None, *, progress: bool = True):
        self._backend = backend
        self._parse = parse
        self._settings = settings
        self._cache = cache
        self._progress = progress
        self._identity = {**backend.identity(), "template": template_version}
        self._judge_label = judge_label(self._identity)
        self._policy = RetryPolicy(max_retries=settings.max_retries)
        # Shared with every client of the same endpoint + model in this process (pool.py).
        self._limits = backend_limits(backend.identity(), rpm=settings.rpm, tpm=settings.tpm,
                                      concurrency=settings.concurrency, adaptive=settings.adaptive)
        self._retrying = threading.local()  # set by _on_retry: the next attempt of this thread is a retry
        self._lock = threading.Lock()
        self._fatal: FatalJudgeError | None = None
        self._silent = 0  # calls in a row (no reply in between) that timed out on every attempt
        self._bar: Any = None
        self._settled: dict[str, JudgeCallError] = {}  # batch mode: keys whose sample ends without an online call
        self._flights = Flights()  # a key in flight here is waited for, not sent twice
        self.stats = JudgeStats()
        if settings.mode == "batch":  # refuse a batch mode that cannot work before anything is generated
            from .batch import check

            check(backend, settings, cache)

    @property
    def identity(self) -> dict[str, Any]:
        return dict(self._identity)

    def judge_all(self, requests: Sequence[JudgeRequest], desc: str = "judging") -> list[Outcome]:
        """One outcome per request, in input order, through the run's pool (``schedule.judge_all``)."""
        from .schedule import judge_all  # the one path: keys, dedup, batch pre-fill, one pool, finish

        return judge_all(self, requests, desc, progress=self._progress)

    # The pieces the run's pool (schedule.py) judges with, for any number of clients at once.
    def key(self, request: JudgeRequest) -> str:
        """The cache key of a request's first ask (the judge identity and everything sent)."""
        return request_key({**self._identity, **request.key_payload()})

    def count_requests(self, requests: int, unique: int) -> None:
        with self._lock:
            self.stats.requests += requests
            self.stats.unique += unique

    def prefill(self, items: Sequence[tuple[str, JudgeRequest]]) -> None:
        """Batch mode: the provider's batch API fills the cache before the online pass."""
        if self.batch_mode:
            from .batch import prefill  # lazy: online runs never load the batch modules

            report = prefill(self._backend, self._cache, self._settings, items, label=self._judge_label,
                             progress=self._progress)
            with self._lock:
                self.stats.batch.update(report.counts())
                self.stats.batch_usage.update(report.usage)
            self._settled.update(report.settled)

    def finish(self, outcomes: Iterable[Outcome]) -> None:
        """Count the failures of the unique requests judged (one per unique request), and the cache's."""
        with self._lock:
            for outcome in outcomes:
                if outcome.failure:
                    self.stats.failures[outcome.failure] += 1
            if self._cache is not None:  # what a full disk refused (reply, lease, note, read): cache.py
                self.stats.cache_failures = Counter(self._cache.failures)

    @property
    def batch_mode(self) -> bool:
        return getattr(self._settings, "mode", "online") == "batch"

    @property
    def settings(self) -> JudgeSettings:
        return self._settings

    @property
    def concurrency(self) -> int:
        """How many calls this client keeps going at once (``judge_concurrency``, which it also gives the gate
        of its endpoint: ``__init__``); pools size themselves by it through ``members.width`` only."""
        return self._settings.concurrency

    def set_bar(self, bar: Any) -> None:
        """The progress bar retries are summarised on (None when the pass is over)."""
        self._bar = bar

    def settled(self, key: str) -> bool:
        """True when judging ``key`` would make no call (the cache already decides it)."""
        if key in self._settled:
            return True
        if self._cache is None:
            return False
        stored = [self._cache.get(k) for k in self._ask_keys(key)]
        return all(r is not None for r in stored) or any(
            r is not None and self._try_parse(r)[0] is not None for r in stored)

    def known_verdict(self, key: str) -> Any | None:
        """The verdict the cache already holds for ``key`` (nothing asked, nothing counted), or None."""
        if self._cache is None:
            return None
        for ask_key in self._ask_keys(key):
            reply = self._cache.get(ask_key)
            if reply is not None and (verdict := self._try_parse(reply)[0]) is not None:
                return verdict
        return None

    @staticmethod
    def _ask_keys(key: str) -> list[str]:
        return [key] + [f"{key}:ask{ask}" for ask in range(1, PARSE_ASKS)]

    def judge_one(self, key: str, request: JudgeRequest) -> Outcome:
        """Judge one unique request: cache first, then calls (one re-ask after an off-contract reply).
        The same key asked again while its first ask is in flight waits for it (bounded) instead."""
        outcome, shared = self._flights.run(key, lambda: self._judge_one(key, request), self.wait_limit)
        if shared:
            with self._lock:
                self.stats.in_flight += 1
        return outcome

    def _judge_one(self, key: str, request: JudgeRequest) -> Outcome:
        if key in self._settled:  # batch mode: a refusal, or a failure batch_fallback=fail counts
            return outcome_from_error(self._settled[key])
        keys = self._ask_keys(key)
        stored = [self._cache.get(k) if self._cache is not None else None for k in keys]
        parsed = [self._try_parse(reply) if reply is not None else (None, None) for reply in stored]
        for reply, (verdict, _) in zip(stored, parsed):  # any reply already paid for that parses wins
            if verdict is not None:
                self._count_hit(reply)
                return Outcome(verdict=verdict, raw_reply=reply.text, cached=True, usage=reply.usage)
        if all(reply is not None for reply in stored):  # every ask was answered off-contract: no new call
            self._count_hit(stored[-1])
            return Outcome(failure="unparseable", raw_reply=stored[-1].text, cached=True, usage=stored[-1].usage,
                           error=f"unparseable reply (cached): {parsed[-1][1]}")
        reply, calls, error = None, 0, None
        for ask_key in keys:
            try:
                reply, paid = self._fresh(ask_key, request)
            except (JudgeCallError, MediaError) as exc:
                return outcome_from_error(exc, calls=calls + isinstance(exc, JudgeRefusal), reply=reply)
            calls += paid
            self._count_used(reply)
            try:
                return Outcome(verdict=self._read(reply), raw_reply=reply.text, calls=calls,
                               usage=reply.usage, cached=not paid)
            except UnparseableReply as exc:
                error = f"unparseable reply: {exc.reason}"
        return Outcome(failure="unparseable", error=error, raw_reply=reply.text, calls=calls, usage=reply.usage)

    def _count_hit(self, reply: Reply) -> None:
        with self._lock:
            self.stats.cache_hits += 1
        self._count_used(reply)

    def _count_used(self, reply: Reply) -> None:
        """Judge drift: the snapshot (and fingerprint) behind a reply a verdict is read from."""
        if reply.model or reply.fingerprint:
            with self._lock:
                if reply.model:
                    self.stats.used_models[reply.model] += 1
                if reply.fingerprint:
                    self.stats.fingerprints[reply.fingerprint] += 1

    def _read(self, reply: Reply) -> Any:
        """The verdict of a reply; a reply cut at the judge's token limit is off-contract whatever it
        says (an earlier verdict line in it may be the judge quoting the student). The backends
        refuse such replies as they arrive; this also covers ones stored by an older version."""
        if reply.finish_reason in TRUNCATED:
            raise UnparseableReply(f"the judge's reply was cut at its token limit (finish reason "
                                   f"{reply.finish_reason}); raise judge_max_tokens")
        return self._parse(reply.text)

    def _try_parse(self, reply: Reply) -> tuple[Any, str | None]:
        """(verdict, None), or (None, the reason the reply is off-contract)."""
        try:
            return self._read(reply), None
        except UnparseableReply as exc:
            return None, exc.reason

    def _fresh(self, key: str, request: JudgeRequest) -> tuple[Reply, bool]:
        """(reply, paid): a new reply, or one another process sharing the cache paid for meanwhile."""
        if self._cache is None:
            return self._ask(request), True
        for _ in range(PARSE_ASKS + 1):  # bounded: each round either pays, or waits at most one lease
            if self._cache.claim(key, self._lease_seconds):
                try:
                    reply = self._ask(request)
                    self._store(key, reply)
                    return reply, True
                finally:
                    self._cache.release(key)
            shared = self._cache.wait_for(key, self._lease_seconds, sleep=stop.sleep)
            if shared is not None:
                with self._lock:
                    self.stats.shared += 1
                return shared, False
        reply = self._ask(request)  # the other process kept failing: pay ourselves
        self._store(key, reply)
        return reply, True

    def _ask(self, request: JudgeRequest) -> Reply:
        try:
            reply = clean_reply(call_with_retries(lambda: self._call(request), self._policy, on_retry=self._on_retry))
        except TransientJudgeError as exc:
            if exc.kind == "timeout":
                with self._lock:
                    self._silent += 1
            raise
        with self._lock:
            self._silent = 0
        if reply.model:  # judge drift: which snapshot answered (reports refuse to rank mixed snapshots)
            with self._lock:
                self.stats.reported_models[reply.model] += 1
        return reply

    def _store(self, key: str, reply: Reply) -> None:
        try:  # a full disk is the cache's to count and report (once); the reply is used either way
            self._cache.put(key, reply, self._judge_label)
        except sqlite3.Error as exc:  # the reply is paid and still used; only the cache copy is lost
            log.warning("could not store a judge reply in the cache (%s); this sample is still judged", exc)

    @property
    def wait_limit(self) -> float:
        """The longest one ``judge_one`` can take (every ask, every attempt and backoff): how long an
        identical request waits for it."""
        return self._lease_seconds * PARSE_ASKS

    @property
    def _lease_seconds(self) -> float:
        """Long enough for every attempt and every backoff of one call."""
        policy = self._policy
        return self._settings.timeout * (policy.max_retries + 1) + policy.max_retries * MAX_DELAY + 5.0

    def _call(self, request: JudgeRequest) -> Reply:
        """One attempt, inside the backend's limits (gate, requests/min, tokens/min: pool.py)."""
        if self._fatal is not None:  # another thread hit a fatal error: stop spending
            raise FatalJudgeError(f"not sent: {self._fatal}", kind="aborted")
        self._check_responsive()
        retry, self._retrying.value = getattr(self._retrying, "value", False), False
        text = len(request.prompt) + len(request.output_text or "")
        permit = self._limits.start(estimate_tokens(text, len(request.media), self._settings.max_tokens), retry)
        outcome, tokens = "failed", None
        try:
            if self._fatal is not None:  # it happened while this attempt waited for its turn
                outcome = "unsent"
                raise FatalJudgeError(f"not sent: {self._fatal}", kind="aborted")
            if stop.requested():  # a signal came while this attempt waited for its turn: it never starts
                outcome = "unsent"
                raise stop.stopped()
            try:
                reply = self._backend.complete(request)
            except MediaError:  # refused before anything was sent (e.g. video to an openai judge)
                outcome = "unsent"
                raise
            except FatalJudgeError as exc:
                self._count_call(None)
                if exc.status in MEDIA_STATUSES and exc.kind != "auth" and request.media:  # this sample only
                    raise JudgeRefusal(f"the judge rejected the attached media: {exc}", kind="media_rejected") from None
                with self._lock:
                    self._fatal = self._fatal or exc
                raise
            except JudgeCallError as exc:
                self._count_call(None)
                if exc.status == 429 or exc.kind == "rate_limited":
                    outcome = "limited"
                raise
            outcome, tokens = "ok", _tokens_used(reply)
            self._count_call(reply)
            return reply
        finally:
            permit.done(outcome, tokens)

    def _check_responsive(self) -> None:
        """Refuse to send (a counted ``timeout``, not retried) once the endpoint stopped answering."""
        if self._silent >= UNRESPONSIVE_CALLS:
            raise JudgeCallError(
                f"not sent: the judge endpoint stopped answering ({self._silent} calls in a row timed out on every "
                f"attempt at judge_timeout {self._settings.timeout:g}s); rerun the same command once it answers "
                "(only the samples without a verdict are judged), or raise judge_timeout", kind="timeout")

    def _count_call(self, reply: Reply | None) -> None:
        """Every request that went out counts, failed attempts included."""
        with self._lock:
            self.stats.calls += 1
            if reply is not None:
                self.stats.usage.update({k: v for k, v in reply.usage.items() if isinstance(v, int)})

    def _on_retry(self, error: JudgeCallError, delay: float) -> None:
        self._retrying.value = True  # called in the retrying thread, before its wait
        with self._lock:
            self.stats.retries += 1
            self.stats.rate_limited += error.status == 429 or error.kind == "rate_limited"
            retries, limited = self.stats.retries, self.stats.rate_limited
        # A summary on the bar, not a line per retry (lines break the bar); details at debug level.
        bar = self._bar
        if bar is not None:
            bar.set_postfix(retries=retries, rate_limited=limited, refresh=False)
        log.debug("judge call failed (%s); retrying in %.1fs", redact(str(error)), delay)

    @property
    def fatal_error(self) -> FatalJudgeError | None:
        return self._fatal

    def close(self) -> None:
        """Release the backend and the cache (the client owns both once built)."""
        if self._fatal is not None:  # the judge refused (key, model, endpoint): the next run checks it first
            ident = preflight.identity(self._backend, self._settings)
            with _PREFLIGHT_LOCK:
                _PREFLIGHTED.discard(ident)
            preflight.forget(self._cache, ident)
        self._backend.close()
        if self._cache is not None:
            self._cache.close()
