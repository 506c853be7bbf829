"""Error tree of the judge and generation stages.

    MathJudgeError
    ├── ConfigError            bad settings or input; raised before anything is spent
    ├── UnparseableReply       the judge answered, but not in the contract's format
    ├── JudgeCallError         one judge or generator call failed
    │   ├── TransientJudgeError   429, 5xx, timeout (one deadline per attempt, connect to
    │   │                         last byte: ``timeout``), connection: retried with backoff
    │   ├── FatalJudgeError       400/401/403/404, a redirect to another origin (``redirect``):
    │   │                         never retried, stops the run
    │   ├── JudgeRefusal          the judge answered without a verdict (safety block,
    │   │                         truncation, no candidates, a reply over the byte cap:
    │   │                         ``reply_too_large``): a counted judge failure
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

Exit codes of ``lm_eval`` and ``mathjudge`` when one of these errors ends the run (``family_of``;
``_startup`` prints one block instead of a traceback, ``MATHJUDGE_DEBUG=1`` adds the traceback):

    ====  ==============  ==========================================================================
    code  family          raised by
    ====  ==============  ==========================================================================
    0     dry run         ``DryRunDone``: the estimate was printed, nothing was sent (not an error)
    2     configuration   ``ConfigError`` not listed below: a setting, metadata or input file;
                          also a ``mathjudge`` usage error (argparse)
    3     credentials     ``CredentialsError``: no key in the environment for a judge or generator
    4     preflight       the judge's free check before generation failed (endpoint, key or model)
    5     budget          ``BudgetExceeded``: the estimate is above judge_budget_usd, nothing was sent
    6     data            ``DataError``: a data set is neither local nor loadable from the hub
    7     version         ``UnsupportedLmEvalError`` (``compat.py``): an lm-eval this release does not support
    8     judging         ``JudgeRunError``, ``GenerationRunError``, any other error of ours: the run
                          could not finish; the message says what was kept and how to resume
    9     batch pending   ``BatchPending`` (``batch/base.py``): batch jobs were submitted; rerun to collect
    1     (none)          an error that is not ours: Python's traceback, as usual
    130   stopped         SIGINT (Ctrl-C), ``stop.py``; 143 for SIGTERM
    ====  ==============  ==========================================================================
"""

from __future__ import annotations


EXIT_CODES = {"dry run": 0, "configuration": 2, "credentials": 3, "preflight": 4, "budget": 5, "data": 6,
              "version": 7, "judging": 8, "batch pending": 9}
# What to do, per family, when the message itself does not end the matter (shown under the message).
NEXT_STEPS = {
    "configuration": "fix what the message names and rerun the same command; nothing was spent",
    "credentials": "export the variable the message names (keys are read from the environment only) and "
                   "rerun, or choose another judge backend",
    "preflight": "check the endpoint, the key and the model the message names; judge_preflight=false skips "
                 "this check (a dry run never needs it)",
    "budget": "raise judge_budget_usd, judge fewer samples or choose a cheaper judge (a judge without a price: "
              "give it with judge_prices), then rerun; nothing was sent",
    "data": "set MATHJUDGE_DATA_DIR to a local copy (<dataset>/test.jsonl), or HF_HUB_OFFLINE=1 and "
            "HF_DATASETS_OFFLINE=1 when the Hugging Face cache already holds the data",
    "version": "install a supported lm-eval (the message names them) in this environment",
    "judging": "rerun the same command: judge replies received are cached and the generations kept (see the "
               "message)",
    "batch pending": "rerun the same command later to collect the batch results",
}


class MathJudgeError(Exception):
    """Base class of every error raised by lm_eval_mathjudge.

    ``family`` picks the exit code (``EXIT_CODES``); an instance may set its own (a preflight failure
    is a ``FatalJudgeError`` raised before generation, marked ``family = "preflight"``).
    """

    family = "judging"


def family_of(exc: BaseException) -> str:
    return getattr(exc, "family", None) or "judging"


def exit_code(exc: BaseException) -> int:
    """The documented exit status for an error of ours (the table in this module's docstring)."""
    return EXIT_CODES.get(family_of(exc), EXIT_CODES["judging"])


class ConfigError(MathJudgeError, ValueError):
    """Invalid settings, metadata or input files."""

    family = "configuration"


class CredentialsError(ConfigError):
    """A judge or generator needs a key, and none of its variables is set."""

    family = "credentials"


class DataError(ConfigError):
    """A data set cannot be read: not local, and the Hugging Face hub cannot give it."""

    family = "data"


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


# ---------------------------------------------------------------------- the clean block
DEBUG_ENV = "MATHJUDGE_DEBUG"  # "1": the traceback too, before the block
_PACKAGE = __name__.split(".")[0]


def clean_report(exc: BaseException, tb=None, command: str = "mathjudge", code: int | None = None) -> str:
    """What an error of ours shows instead of a traceback: what went wrong, what to do, where.

    A dry run is no error: its message is the whole report. ``tb`` (the traceback) only names the
    place; nothing of it is shown unless ``MATHJUDGE_DEBUG=1``.
    """
    family = family_of(exc)
    message = " ".join(str(exc).split()) or type(exc).__name__
    if family == "dry run":
        return f"{command}: {message}\n"
    code = exit_code(exc) if code is None else code
    lines = [f"{command}: {family} error ({type(exc).__name__}, exit status {code})",
             f"  what went wrong: {message}",
             f"  what to do:      {NEXT_STEPS.get(family, NEXT_STEPS['judging'])}"]
    where = _where(tb if tb is not None else exc.__traceback__)
    if where:
        lines.append(f"  where:           {where}")
    lines.append(f"  ({DEBUG_ENV}=1 shows the traceback)")
    return "\n".join(lines) + "\n"


def _where(tb) -> str:
    """The innermost frame of this package, and the frame outside it that called into it (lm-eval's)."""
    import os
    import traceback

    frames = traceback.extract_tb(tb) if tb is not None else []
    def ours(frame) -> bool:
        return f"{os.sep}{_PACKAGE}{os.sep}" in frame.filename

    def short(frame) -> str:
        parts = frame.filename.split(os.sep)
        for anchor in (_PACKAGE, "lm_eval"):  # package-relative: no local folder in the report
            if anchor in parts:
                parts = parts[len(parts) - 1 - parts[::-1].index(anchor):]
                break
        else:
            parts = parts[-1:]
        return f"{'/'.join(parts)}:{frame.lineno} in {frame.name}"

    inner = next((f for f in reversed(frames) if ours(f)), None)
    if inner is None:
        return short(frames[-1]) if frames else ""
    first = next(i for i, f in enumerate(frames) if ours(f))
    caller = frames[first - 1] if first > 0 else None
    return short(inner) + (f" (reached from {short(caller)})" if caller is not None else "")


def did_you_mean(word: str, choices, prefix: str = "") -> str:
    """`` (did you mean judge_backend?)`` for a misspelt name close to one of ``choices``; else ""."""
    import difflib

    close = difflib.get_close_matches(str(word), [str(c) for c in choices], n=2, cutoff=0.7)
    if not close:
        return ""
    return f" (did you mean {' or '.join(prefix + c for c in close)}?)"
