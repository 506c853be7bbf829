"""The error hook (``lm_eval_mathjudge_hook.ErrorHook``, reporting through ``_startup.report``) under another
hook that wraps it.

torch.distributed wraps ``sys.excepthook`` once a process group starts: it points ``sys.stderr`` at a
buffer, calls the hook it replaced (ours), then prefixes the buffer with the rank and prints it. Our
hook ends the process (``SystemExit`` with the documented status), so the buffer is never printed:
the report must reach the process's real stderr all the same.
"""

from __future__ import annotations

import io
import sys
from unittest import mock

import pytest

import lm_eval_mathjudge_hook
from lm_eval_mathjudge.core.errors import ConfigError
from lm_eval_mathjudge.cost.budget import DryRunDone


def _buffering(hook):
    """What torch.distributed does to the hook it finds (distributed_c10d's _distributed_excepthook)."""
    def wrapped(*args):
        old, sys.stderr = sys.stderr, io.StringIO()
        try:
            hook(*args)
        finally:
            buffered, sys.stderr = sys.stderr.getvalue(), old
        sys.stderr.write("".join(f"[rank0]: {line}\n" for line in buffered.splitlines()))
    return wrapped


@pytest.mark.parametrize("error, code, says", [
    (DryRunDone("dry run (judge_dry_run=true): nothing was sent to any judge.", None), 0,
     "lm_eval: dry run (judge_dry_run=true): nothing was sent"),
    (ConfigError("judge_backend='nope' is not a backend"), 2, "what went wrong: judge_backend='nope'"),
])
def test_the_report_reaches_the_real_stderr_under_a_buffering_hook(error, code, says):
    real, seen = io.StringIO(), io.StringIO()
    hook = _buffering(lm_eval_mathjudge_hook.ErrorHook(lambda *args: None))
    with mock.patch.object(sys, "__stderr__", real), mock.patch.object(sys, "stderr", seen), \
            mock.patch.object(sys, "argv", ["/venv/lib/python3.11/site-packages/lm_eval/__main__.py", "run"]):
        with pytest.raises(SystemExit) as done:
            hook(type(error), error, None)
    assert done.value.code == code
    assert says in real.getvalue()
