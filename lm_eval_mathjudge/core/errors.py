"""Error tree of the judge and generation stages.

    MathJudgeError
    ├── ConfigError            bad settings or input; raised before anything is spent
    ├── UnparseableReply       the judge answered, but not in the contract's format
    ├── JudgeCallError         one judge or generator call failed
    │   ├── TransientJudgeError   429, 5xx, timeout, connection: retried with backoff
    │   ├── FatalJudgeError       400/401/403/404: never retried, stops the run
    │   ├── JudgeRefusal          the judge answered without a verdict (safety block,
    │   │                         truncation, no candidates): a counted judge failure
    │   └── GenerationFailure     the generator made no media for this prompt (content
    │                             policy, safety block, failed job, missing file): that
    │                             sample's counted failure, never retried
    ├── MediaError             a media response that cannot be attached (names the file;
    │   │                      kind ``bad_media`` when its bytes fail the format check)
    │   └── UnsendableRequest     a request that cannot be built or encoded (e.g. invalid
    │                             text): never sent, never retried, a counted judge failure
    ├── JudgeRunError          the run could not judge every sample; says how to resume
    └── GenerationRunError     some requests got no media and no counted failure (the
                               generator was unreachable or refused the run); says how to resume

Outside the tree, because no ``except Exception`` (ours, lm-eval's, an SDK's) may swallow it:

    SystemExit
    └── Stopped                a SIGINT or SIGTERM stopped the run (``stop.py``); its code is the
                               exit status (130, 143), and the savers have said how to resume

Each failure class says whether a sample that ends with it is *scored*
(``scored = True``: 0 on every metric and 1 on judge_failed, because the
judge itself could not give a verdict) or not (the judge could not be
reached; the run stops and says how to resume). ``client.outcome_from_error``
is the one place that turns an error into an ``Outcome``.

Messages never contain API keys: backends build them from status codes and
server error text only, and the client scrubs them again before storing.
"""

from __future__ import annotations


class MathJudgeError(Exception):
    """Base class of every error raised by lm_eval_mathjudge."""


class ConfigError(MathJudgeError, ValueError):
    """Invalid settings, metadata or input files."""


class UnparseableReply(MathJudgeError):
    """The judge's reply does not follow the verdict contract."""

    kind = "unparseable"
    scored = True

    def __init__(self, reason: str):
        super().__init__(reason)
        self.reason = reason


class JudgeCallError(MathJudgeError):
    """A judge call failed. `kind` is a short stable label counted in reports."""

    scored = False  # transport: the run stops, nothing is scored as wrong

    def __init__(self, message: str, *, kind: str = "error", status: int | None = None,
                 retry_after: float | None = None):
        super().__init__(message)
        self.kind = kind
        self.status = status
        self.retry_after = retry_after


class TransientJudgeError(JudgeCallError):
    """Worth retrying: rate limits, server errors, timeouts, dropped connections."""


class FatalJudgeError(JudgeCallError):
    """Retrying cannot help: bad request, bad credentials, unknown model."""


class JudgeRefusal(JudgeCallError):
    """The service answered but gave no usable reply; asking again would not help."""

    scored = True


class GenerationFailure(JudgeCallError):
    """No media for this one prompt, and asking again would not help (or not now).

    ``remember``: store the failure so a rerun does not pay again (a content-policy
    refusal); False when a rerun should try again (a job still running at the timeout).
    """

    scored = True

    def __init__(self, message: str, *, kind: str, remember: bool = True):
        super().__init__(message, kind=kind)
        self.remember = remember


class MediaError(MathJudgeError):
    """A response that points at media which cannot be read or sent (``bad_media``: it fails its format check)."""

    kind = "media"
    scored = True

    def __init__(self, message: str, *, kind: str | None = None):
        super().__init__(message)
        if kind is not None:
            self.kind = kind


class UnsendableRequest(MediaError):
    """This one request cannot be built or encoded, so it is never sent.

    A MediaError because the client treats both the same way: refused before
    anything went out, this sample only, counted under ``kind``.
    """

    def __init__(self, message: str, *, kind: str = "bad_request"):
        super().__init__(message)
        self.kind = kind


class JudgeRunError(MathJudgeError, RuntimeError):
    """Raised at the end of judging when some samples got no verdict at all."""


class GenerationRunError(MathJudgeError, RuntimeError):
    """Raised after generation when some requests got neither media nor a counted failure."""


class Stopped(SystemExit):
    """A signal stopped the run: unwinds our frames to the guard that says how to resume (``stop.py``)."""

    def __init__(self, code: int, *, signal: str = "SIGINT"):
        super().__init__(code)
        self.signal = signal
