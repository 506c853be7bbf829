"""The math-verify worker process behind the local judge (``local._BOOT`` starts ``main``).

One job per line on stdin, one result per line on stdout, both JSON with
ASCII escapes (so any text, lone surrogates included, crosses the pipe
intact). A job is ``{"answer": gold, "response": text, "limit": seconds}``;
a result is ``{"outcome": "correct" | "incorrect" | "undecided", "extracted": str | null, "reason": str}``
or ``{"error": str}``. A job
``{"answer": gold, "responses": [text, ...]}`` asks for the final answers of k samples
of one problem grouped by equivalence: ``{"classes": [int | null, ...]}`` (maj@k).
The first line written is ``{"ready": true}``, sent once math-verify is
imported and warmed up, so start-up never counts against an item's limit.

The parent enforces each item's wall-clock limit by killing this process.
The worker also bounds itself, for when the parent cannot: CPU seconds per
item (RLIMIT_CPU: the kernel ends an overrunning worker even if its parent was
SIGKILLed mid-item) and address space (RLIMIT_AS: ``10^{10^{10}}`` has ten
billion digits), and it exits when stdin closes. math-verify's own timeouts
stay off: they use SIGALRM, which cannot interrupt one long C-level
big-integer operation anyway.
"""

from __future__ import annotations

import json
import logging
import math
import os
import signal
import sys

try:
    import resource
except ImportError:  # Windows: only the parent's wall-clock limit applies
    resource = None

MEMORY_LIMIT = 2 * 1024 ** 3  # bytes of address space; the worker needs ~70 MB
CPU_SLACK = 2.0  # seconds beyond the item limit before the kernel steps in


def _limit(resource_id: int, soft: int) -> None:
    try:
        _, hard = resource.getrlimit(resource_id)
        if hard != resource.RLIM_INFINITY:
            soft = min(soft, hard)
        resource.setrlimit(resource_id, (soft, hard))
    except (ValueError, OSError):  # not enforced on this platform (macOS RLIMIT_AS): the parent still kills
        pass


def _cpu_budget(seconds: float) -> None:
    if resource is None:
        return
    usage = resource.getrusage(resource.RUSAGE_SELF)
    _limit(resource.RLIMIT_CPU, math.ceil(usage.ru_utime + usage.ru_stime + seconds + CPU_SLACK))


def judge(values, answer: str, response: str, question: str = "") -> dict:
    """The answer policy (``answers``) decides what the response's one final answer is;
    math-verify (``local_math``) whether it equals the gold: correct, incorrect or undecided."""
    from ..core import answers

    decision = answers.decide(answers.read(response, answer, question), answer, values.compare)
    return {"outcome": decision.outcome, "extracted": decision.answer, "reason": decision.reason}


def classes(values, answer: str, responses: list[str], question: str = "") -> dict:
    """Each response's one final answer (the answer policy's), grouped by proved equality."""
    from ..core import answers

    finals = [answers.decide(answers.read(r, answer, question), answer, values.compare).answer for r in responses]
    return {"classes": answers.answer_classes(finals, answer, values.compare)}


def serve(jobs, out) -> None:
    from .local_math import Values

    logging.getLogger("math_verify").setLevel(logging.ERROR)  # silence the "timeout disabled" notes
    logging.getLogger("latex2sympy2_extended").setLevel(logging.ERROR)
    values = Values.load()
    # Load the policy, the grammars and caches before "ready" (an expression gold: math-verify is asked).
    judge(values, r"\frac{\sqrt{3}}{2}", "so the height is \\boxed{\\frac{\\sqrt3}{2}}")
    _send(out, {"ready": True})
    for line in jobs:
        if not line.strip():
            continue
        job = json.loads(line)
        if "limit" in job:
            _cpu_budget(float(job["limit"]))
        try:
            if "responses" in job:
                result = classes(values, job["answer"], list(job["responses"]), job.get("question", ""))
            else:
                result = judge(values, job["answer"], job["response"], job.get("question", ""))
        except MemoryError:
            result = {"error": f"math-verify needed more than {MEMORY_LIMIT // 1024 ** 3} GiB of memory"}
        except Exception as exc:  # noqa: BLE001 - any failure is this item's, never the worker's
            result = {"error": f"math-verify failed: {type(exc).__name__}: {str(exc)[:200]}"}
        _send(out, result)


def _send(out, message: dict) -> None:
    out.write(json.dumps(message, ensure_ascii=True) + "\n")
    out.flush()


def main() -> None:
    # A Ctrl-C reaches the whole process group; the parent decides when this worker ends (it stops
    # judging, then closes stdin), so the signal must not kill it with a traceback mid-item.
    signal.signal(signal.SIGINT, signal.SIG_IGN)
    # The protocol gets its own copy of stdout; fd 1 becomes stderr, so a stray
    # print in a library can never corrupt a result line.
    out = os.fdopen(os.dup(1), "w", encoding="ascii")
    os.dup2(2, 1)
    if resource is not None:
        _limit(resource.RLIMIT_AS, MEMORY_LIMIT)
    serve(sys.stdin, out)


if __name__ == "__main__":
    main()
