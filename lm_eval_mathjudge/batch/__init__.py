"""Batch mode's contract and bookkeeping, below the backends that implement it.

``base.py`` is the provider contract (``backends/openai/batch.py`` and
``backends/gemini/batch.py`` implement it); ``jobs.py`` keeps job ids in the judge
cache's SQLite file. The runner that drives a provider is ``judging/batch.py``.
Nothing here is imported unless a judge runs with ``judge_mode=batch``.
"""
