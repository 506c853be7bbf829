"""Test-only start-up code: SIGKILL this process in the middle of lm-eval's final write.

``tests/test_resume_kill_e2e.py`` puts this folder on ``PYTHONPATH`` of one ``lm_eval`` process and
sets ``MJ_TEST_KILL_AT``:

    results   the results file is created and nothing written into it (what a kill as the output
              folder appeared leaves: a 0-byte ``results_*.json``)
    samples   the results file is whole, the first samples file holds half a line

Nothing happens without the variable.
"""

import builtins
import os
import pathlib
import signal

_WHERE = os.environ.get("MJ_TEST_KILL_AT")


def _die() -> None:
    os.kill(os.getpid(), signal.SIGKILL)


if _WHERE == "results":
    _write_text = pathlib.Path.write_text

    def write_text(self, data, *args, **kwargs):
        if self.name.startswith("results_") and self.suffix == ".json":
            self.touch()
            _die()
        return _write_text(self, data, *args, **kwargs)

    pathlib.Path.write_text = write_text

if _WHERE == "samples":
    _open = builtins.open

    class _HalfLine:
        def __init__(self, handle):
            self._handle = handle

        def __enter__(self):
            return self

        def __exit__(self, *exc):
            self._handle.close()

        def write(self, text):
            self._handle.write(text[: len(text) // 2])
            self._handle.flush()
            os.fsync(self._handle.fileno())
            _die()

    def open(file, mode="r", *args, **kwargs):  # noqa: A001 - the builtin, for this process only
        handle = _open(file, mode, *args, **kwargs)
        if "a" in mode and os.path.basename(str(file)).startswith("samples_"):
            return _HalfLine(handle)
        return handle

    builtins.open = open
