"""Reports on lm-eval runs: leaderboards, paired tests, judge agreement, re-judging.

    runs.py         read lm-eval's results and samples files
    stats.py        intervals, McNemar, paired bootstrap, Cohen's kappa (pure functions)
    paired.py       two runs on one task and metric, doc by doc
    leaderboard.py  the table (Markdown, CSV) and the mixed-judge check
    chart.py        the chart (hand-written SVG; PNG through matplotlib)
    html.py         the self-contained HTML page
    agreement.py    judge vs judge, or judge vs labels
    rejudge.py      replay saved samples through lm-eval with another judge
    audit.py        ``mathjudge audit``: load tasks as lm-eval does, audit their judges (lm_eval_mathjudge.audit)
    cli.py          the ``mathjudge`` subcommands

Nothing here is imported by the task plugin, except the pure ``stats.py`` (the judge audit's
intervals, under ``judge_audit=true``); the CLI imports modules lazily.
"""
