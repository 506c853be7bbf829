"""The lm-eval glue: the judged task class the YAMLs name, the run's one judging pass, recovery
of what was paid for, the replay model, and what the results record.

``lm_eval_mathjudge.harness.JudgedTask`` (the class a YAML of an earlier release names) still
resolves, to ``harness.task.JudgedTask``, and is imported only when asked for.
"""


def __getattr__(name: str):
    if name == "JudgedTask":
        from .task import JudgedTask

        return JudgedTask
    raise AttributeError(f"module {__name__!r} has no attribute {name!r}")
