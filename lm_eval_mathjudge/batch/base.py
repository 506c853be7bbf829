"""The contract between the batch runner and a provider's batch API.

Batch mode is a cache pre-fill: the runner (``judging/batch.py``) hands the judge
requests that are not cached yet to a provider, waits for the job, and stores
each reply under the same cache key an online call would use. A provider only
moves requests and replies; it never touches the cache, the job table or the
progress bar.

A provider is built from a judge backend by ``backends.batch_provider``
(only services with a batch API have a batch module; the SDK is imported
by that module, never here). It implements ``BatchProvider``:

    submit(items)    -> job id       one job for these (key, request) pairs;
                                      the key is the item's id inside the job
    status(job_id)   -> JobStatus    one read of the job's state (no waiting)
    results(job_id)  -> iterator     (key, Reply | JudgeCallError) per item
                                      the job answered (a finished job only)
    cleanup(job_id)                  delete what was uploaded for the job
                                      (input and output files); never raises

Items a provider cannot encode (a video for an OpenAI judge, invalid text)
are left out of the job and simply get no result: the online pass then fails
them the same way online mode would, without spending anything.

Errors, on top of ``errors.py``'s tree::

    JudgeRunError
    └── BatchPending      the job is submitted (or still running) and the run
                          stops; rerunning the same command collects it
    ConfigError
    └── BatchUnavailable  judge_mode=batch with a backend that has no batch API
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import IO, Iterable, Iterator, Protocol, Sequence

from ..core.errors import ConfigError, JudgeCallError, JudgeRefusal, JudgeRunError
from ..core.types import JudgeRequest, Reply

# Provider-neutral job states (``JobStatus.state``); each provider maps its own words onto these.
RUNNING = "running"  # queued, validating, in progress, finalizing: poll again
COMPLETED = "completed"  # finished; results() yields every item it answered
FAILED = "failed"  # the whole job was rejected (bad input file, quota): no results
EXPIRED = "expired"  # the completion window ran out; results() yields what finished
CANCELLED = "cancelled"  # cancelled by someone; results() yields what finished
STATES = (RUNNING, COMPLETED, FAILED, EXPIRED, CANCELLED)

# ``JudgeCallError.kind`` of an item the job did not answer, as counted in reports.
ITEM_EXPIRED = "batch_expired"  # the window ran out before this item ran
ITEM_FAILED = "batch_failed"  # the job or this item failed (the message says why)

# A result file or job read holds at most this per item besides the reply itself (ids, status, error).
RESULT_OVERHEAD = 16 * 1024
RESULT_BASE = 1 << 20  # and this once (the job's own fields, an error file's header)
# A download of results gets at least this long, plus the time a typical line (a verdict of a few hundred
# tokens in its envelope) takes at the slowest transfer rate still taken for a working connection.
RESULT_MIN_SECONDS = 600.0
RESULT_LINE_BYTES = 8 * 1024
MIN_TRANSFER_RATE = 512 * 1024  # bytes/s: an upload or download may take size / rate (at least the judge timeout)

Item = tuple[str, JudgeRequest]  # (cache key, request); the key doubles as the item id in the job
Result = tuple[str, Reply | JudgeCallError]


@dataclass(frozen=True)
class JobStatus:
    """One reading of a batch job.

    ``state`` is one of ``STATES``; ``raw_state`` is the provider's own word
    (shown to the user); ``done`` counts items answered so far (successes and
    failures), ``failed`` the failures among them; ``message`` says why a job
    failed as a whole (empty otherwise).
    """
    state: str
    done: int = 0
    total: int = 0
    failed: int = 0
    raw_state: str = ""
    message: str = ""

    def __post_init__(self):
        if self.state not in STATES:
            raise ValueError(f"unknown batch job state {self.state!r}; expected one of {', '.join(STATES)}")

    @property
    def finished(self) -> bool:
        return self.state != RUNNING


@dataclass(frozen=True)
class Limits:
    """What one job of the provider accepts; the runner splits larger runs into several jobs."""
    max_requests: int
    max_bytes: int  # size of the request file (or inline payload), with a margin for the encoding


class BatchProvider(Protocol):
    """One provider's batch API for one judge (model, endpoint, settings)."""

    name: str  # "openai", "azure", "gemini": shown in messages and stored with the job id
    limits: Limits

    def submit(self, items: Sequence[Item]) -> str:
        """Upload and create one job for ``items``; return its id ("" when no item could be encoded,
        so there is no job). Raises JudgeCallError (nothing is left uploaded when it does)."""

    def status(self, job_id: str) -> JobStatus:
        """One read of the job's state. Raises JudgeCallError (transient ones are retried by the runner)."""

    def results(self, job_id: str) -> Iterator[Result]:
        """Every item the finished job answered: a Reply, or the item's own error
        (kind ``ITEM_EXPIRED``/``ITEM_FAILED``, or a ``JudgeRefusal`` such as max_tokens)."""

    def cleanup(self, job_id: str) -> None:
        """Delete the job's uploaded input and its output/error files. Never raises."""


class BatchPending(JudgeRunError):
    """The batch job is submitted or still running; the run stops without scoring anything.

    Rerunning the same command finds the job ids in the cache folder and collects
    the results instead of submitting (and paying) again.
    """

    family = "batch pending"

    def __init__(self, message: str, *, job_ids: Sequence[str] = ()):
        super().__init__(message)
        self.job_ids = tuple(job_ids)


class BatchUnavailable(ConfigError):
    """judge_mode=batch was asked of a judge whose service has no batch API here."""


def item_error(kind: str, message: str) -> JudgeCallError:
    """An item the job did not answer. Not scored by itself: the runner decides (online fallback or a failure)."""
    return JudgeCallError(message, kind=kind)


def scored_failure(error: JudgeCallError) -> JudgeRefusal:
    """What an unanswered item becomes with batch_fallback=fail: that sample's counted judge failure."""
    if isinstance(error, JudgeRefusal):
        return error
    return JudgeRefusal(f"{error} (batch_fallback=fail: counted as a judge failure, not sent online)",
                        kind=error.kind if error.kind.startswith("batch_") else ITEM_FAILED)


def approx_size(request: JudgeRequest) -> int:
    """Bytes one request takes in a request file, a little over (used to split jobs; no encoding needed)."""
    text = len(request.prompt.encode("utf-8", "replace")) + len((request.output_text or "").encode("utf-8", "replace"))
    media = sum(m.size * 4 // 3 + 64 for m in request.media)  # base64 grows data by a third
    return 2 * text + media + 1024  # JSON escapes at most double text here; 1 KB for the envelope


def chunks(items: Sequence[Item], limits: Limits) -> Iterable[list[Item]]:
    """Split items into jobs within the provider's limits, in order (an oversized item gets a job of its own)."""
    chunk: list[Item] = []
    size = 0
    for item in items:
        grow = approx_size(item[1])
        if chunk and (len(chunk) >= limits.max_requests or size + grow > limits.max_bytes):
            yield chunk
            chunk, size = [], 0
        chunk.append(item)
        size += grow
    if chunk:
        yield chunk


def result_line_bytes(reply_bytes: int) -> int:
    """The byte cap on one item's result (a line of a result file): its reply at the judge's cap, its envelope."""
    return reply_bytes + RESULT_OVERHEAD


def result_bytes(items: int, reply_bytes: int) -> int:
    """The byte cap on a finished job's results: every item's at ``result_line_bytes``."""
    return RESULT_BASE + max(items, 1) * result_line_bytes(reply_bytes)


def result_seconds(items: int, timeout: float) -> float:
    """The deadline of one result download (wall clock, connect to the last byte)."""
    return max(timeout, RESULT_MIN_SECONDS) + max(items, 1) * RESULT_LINE_BYTES / MIN_TRANSFER_RATE


def result_lines(spool: IO[bytes], limit: int) -> Iterator[str | None]:
    """The lines of a downloaded result file; None for a line over ``limit`` bytes, skipped without
    ever being held whole (its item stays unanswered: the runner's fallback decides)."""
    while True:
        line = spool.readline(limit + 1)
        if not line:
            return
        if len(line) > limit and not line.endswith(b"\n"):
            while line and not line.endswith(b"\n"):
                line = spool.readline(limit + 1)
            yield None
            continue
        yield line.decode("utf-8", "replace")
