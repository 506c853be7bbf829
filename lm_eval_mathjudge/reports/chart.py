"""The leaderboard chart: the primary metric per task, a bar per model, 95% error bars.

The SVG is written by hand (no dependency, stable bytes for the docs); the PNG uses
matplotlib, an optional extra (``png_hint`` says how to add it, for a wheel or a checkout).
Both charts label the y axis with the metric the bars show.
"""

from __future__ import annotations

from dataclasses import dataclass
from html import escape

from .leaderboard import Board

PALETTE = ("#4e79a7", "#f28e2b", "#59a14f", "#e15759", "#76b7b2", "#edc948", "#b07aa1", "#ff9da7",
           "#9c755f", "#bab0ac")
DISTRIBUTION = "lm-eval-mathjudge"


class MissingMatplotlib(RuntimeError):
    pass


def png_hint() -> str:
    """How to add matplotlib the way this package was installed: an editable checkout names its folder."""
    import json
    from importlib import metadata

    where = None
    try:
        text = metadata.distribution(DISTRIBUTION).read_text("direct_url.json")
        info = json.loads(text) if text else {}
        if (info.get("dir_info") or {}).get("editable") and str(info.get("url", "")).startswith("file://"):
            from urllib.parse import unquote, urlsplit

            where = unquote(urlsplit(info["url"]).path)
    except (metadata.PackageNotFoundError, ValueError, TypeError, OSError):
        pass
    target = f"-e '{where}[report]'" if where else f"'{DISTRIBUTION}[report]'"
    return f"the PNG chart needs matplotlib: pip install {target} (or pip install matplotlib)"


def y_label(items: list[Bar]) -> str:
    """The metric the bars show: its name when every task's primary metric is the same one."""
    from .runs import metric_label

    names = list(dict.fromkeys(metric_label(b.metric) for b in items))
    return f"{names[0]} (95% CI)" if len(names) == 1 else "primary metric per task (95% CI)"


@dataclass(frozen=True)
class Bar:
    task: str
    metric: str
    model: str
    value: float
    low: float | None
    high: float | None


def bars(board: Board) -> tuple[list[str], list[str], list[Bar]]:
    """(tasks, models in first-seen rank order, bars of each task's primary metric)."""
    chosen = [r for r in board.rows if r.primary]
    tasks = list(dict.fromkeys(r.task for r in chosen))
    models = list(dict.fromkeys(r.model for r in sorted(chosen, key=lambda r: r.rank)))
    return tasks, models, [Bar(r.task, r.metric, r.model, r.value, r.ci_low, r.ci_high) for r in chosen]


# ---------------------------------------------------------------------- SVG
PLOT_H, TOP, LEFT, BAR_W, GAP, LEGEND_ROW, MIN_WIDTH, RIGHT = 240, 40, 56, 22, 28, 18, 320, 20
TITLE_PX, TEXT_PX = 13, 11
EM_SHARE = 0.62  # a sans-serif character's mean width as a share of its font size (digits and capitals: ~0.6)


def text_px(text: str, size: float) -> float:
    """A generous estimate of a sans-serif line's width: the SVG is sized so that no text is cut."""
    return len(text) * size * EM_SHARE


def svg(board: Board, title: str = "Leaderboard (primary metric, 95% CI)") -> str:
    tasks, models, items = bars(board)
    bars_w = BAR_W * len(models)
    group_w = max(bars_w + GAP, (MIN_WIDTH - LEFT - RIGHT) / max(1, len(tasks)),  # few tasks: spread, centred
                  max((text_px(t, TEXT_PX) + 8 for t in tasks), default=0))  # a task's name fits under its bars
    plot_w = group_w * len(tasks)
    # wide enough for the plot, the whole title and the longest legend entry
    width = round(max(LEFT + plot_w + RIGHT, LEFT + text_px(title, TITLE_PX) + RIGHT,
                      LEFT + 18 + max((text_px(m, TEXT_PX) for m in models), default=0) + RIGHT))
    plot_left = LEFT + (width - RIGHT - LEFT - plot_w) / 2  # the bars centred when the title is wider
    legend_top = TOP + PLOT_H + 46
    height = legend_top + LEGEND_ROW * len(models) + 10
    y = lambda v: TOP + PLOT_H * (1 - max(0.0, min(1.0, v)))  # noqa: E731  -- metrics are shares in [0, 1]
    out = [f'<svg xmlns="http://www.w3.org/2000/svg" width="{width}" height="{height}" '
           f'viewBox="0 0 {width} {height}" font-family="sans-serif" font-size="{TEXT_PX}">',
           f"<title>{escape(title)}</title>", '<rect width="100%" height="100%" fill="white"/>',
           f'<text class="title" x="{LEFT}" y="20" font-size="{TITLE_PX}" font-weight="bold">{escape(title)}</text>']
    for tick in range(0, 11, 2):
        ty = y(tick / 10)
        out.append(f'<line class="grid" x1="{LEFT}" y1="{ty:.1f}" x2="{width - RIGHT}" y2="{ty:.1f}" stroke="#ddd"/>')
        out.append(f'<text x="{LEFT - 6}" y="{ty + 4:.1f}" text-anchor="end">{tick / 10:.1f}</text>')
    for t, task in enumerate(tasks):
        x0 = plot_left + t * group_w + (group_w - bars_w) / 2
        out.append(f'<text class="task" x="{x0 + bars_w / 2:.1f}" y="{TOP + PLOT_H + 16}" '
                   f'text-anchor="middle">{escape(task)}</text>')
        for item in (b for b in items if b.task == task):
            i = models.index(item.model)
            out += _svg_bar(x0 + i * BAR_W, item, PALETTE[i % len(PALETTE)], y)
    out.append(f'<line x1="{LEFT}" y1="{TOP + PLOT_H}" x2="{width - RIGHT}" y2="{TOP + PLOT_H}" stroke="#333"/>')
    mid = TOP + PLOT_H / 2
    out.append(f'<text class="ylabel" x="12" y="{mid:.1f}" text-anchor="middle" font-size="10" '
               f'transform="rotate(-90 12 {mid:.1f})">{escape(y_label(items))}</text>')
    for i, model in enumerate(models):
        ly = legend_top + i * LEGEND_ROW
        out.append(f'<rect class="legend" x="{LEFT}" y="{ly - 10}" width="12" height="12" '
                   f'fill="{PALETTE[i % len(PALETTE)]}"/>')
        out.append(f'<text class="legend-label" x="{LEFT + 18}" y="{ly}">{escape(model)}</text>')
    out.append("</svg>")
    return "\n".join(out) + "\n"


def _svg_bar(x: float, item: Bar, colour: str, y) -> list[str]:
    label = f"{item.model} on {item.task}: {item.metric} {item.value:.3f}"
    parts = [f'<rect class="bar" x="{x + 2:.1f}" y="{y(item.value):.1f}" width="{BAR_W - 4}" '
             f'height="{y(0) - y(item.value):.1f}" fill="{colour}" data-model="{escape(item.model)}" '
             f'data-task="{escape(item.task)}" data-value="{item.value:.6f}"><title>{escape(label)}</title></rect>']
    if item.low is not None and item.high is not None:
        cx = x + BAR_W / 2
        lo, hi = y(item.low), y(item.high)
        parts.append(f'<g class="errorbar" data-low="{item.low:.6f}" data-high="{item.high:.6f}" stroke="#222">'
                     f'<line x1="{cx:.1f}" y1="{hi:.1f}" x2="{cx:.1f}" y2="{lo:.1f}"/>'
                     f'<line x1="{cx - 4:.1f}" y1="{hi:.1f}" x2="{cx + 4:.1f}" y2="{hi:.1f}"/>'
                     f'<line x1="{cx - 4:.1f}" y1="{lo:.1f}" x2="{cx + 4:.1f}" y2="{lo:.1f}"/></g>')
    return parts


# ---------------------------------------------------------------------- PNG
def _plain(label: str) -> str:
    """A label matplotlib draws as written: a ``$`` would start its maths mode (and a bad one aborts the chart)."""
    return "".join(c if c.isprintable() else " " for c in label).replace("$", r"\$")


def figure(board: Board, title: str = "Leaderboard (primary metric, 95% CI)"):
    """The matplotlib figure of the chart: the title above, the legend below the axes in as many columns as
    fit, the figure as wide as its widest part, so the plot keeps its width however long the names are."""
    try:
        import matplotlib
    except ImportError:
        raise MissingMatplotlib(png_hint()) from None
    matplotlib.use("Agg", force=True)  # files only, never a window
    import matplotlib.pyplot as plt

    tasks, models, items = bars(board)
    labels = [_plain(m) for m in models]
    plot_w = max(3.0, 0.35 * len(models) * len(tasks) + 0.4 * len(tasks))
    label_w = max((len(label) for label in labels), default=0) * LEGEND_PT * EM_SHARE / 72 + 0.45  # swatch, gap
    width = max(plot_w + 1.0, len(title) * TITLE_PT * EM_SHARE / 72 + 0.4, min(label_w, MAX_WIDTH_IN) + 0.4)
    columns = max(1, min(len(labels), int((width - 0.4) // label_w)))
    rows = -(-len(labels) // columns)
    fig = plt.figure(figsize=(width, 3.4 + 0.2 * rows), layout="constrained")
    ax = fig.add_subplot()
    slot = 0.8 / max(1, len(models))
    for i, (model, label) in enumerate(zip(models, labels)):
        mine = {b.task: b for b in items if b.model == model}
        xs = [t + (i - (len(models) - 1) / 2) * slot for t, task in enumerate(tasks) if task in mine]
        chosen = [mine[task] for task in tasks if task in mine]
        errors = [[b.value - (b.low if b.low is not None else b.value) for b in chosen],
                  [(b.high if b.high is not None else b.value) - b.value for b in chosen]]
        ax.bar(xs, [b.value for b in chosen], slot, yerr=errors, capsize=3, label=label,
               color=PALETTE[i % len(PALETTE)])
    ax.set_xticks(range(len(tasks)), [_plain(t) for t in tasks])
    ax.set_ylim(0, 1)
    ax.set_ylabel(_plain(y_label(items)), fontsize=8)
    fig.suptitle(_plain(title), fontsize=TITLE_PT)
    fig.legend(loc="outside lower center", ncols=columns, fontsize=LEGEND_PT, frameon=False)
    return fig


TITLE_PT, LEGEND_PT, MAX_WIDTH_IN = 10, 7, 16.0


def png(board: Board, path: str, title: str = "Leaderboard (primary metric, 95% CI)") -> None:
    fig = figure(board, title)
    import matplotlib.pyplot as plt

    try:
        fig.savefig(path, dpi=120, bbox_inches="tight", pad_inches=0.1)  # a legend entry wider still is not cut
    finally:
        plt.close(fig)
