"""The leaderboard as one self-contained HTML page: inline CSS, the SVG chart inline, no scripts."""

from __future__ import annotations

from html import escape

from . import chart
from .leaderboard import Board, methods, task_table

_CSS = """
body { font-family: system-ui, sans-serif; margin: 2em; color: #222; }
table { border-collapse: collapse; margin: 0.5em 0 2em; }
th, td { border: 1px solid #ccc; padding: 4px 8px; font-size: 13px; }
th { background: #f3f3f3; text-align: left; }
td.num { text-align: right; font-variant-numeric: tabular-nums; }
.notes li { color: #8a4b00; }
"""


def render(board: Board) -> str:
    parts = ["<!DOCTYPE html>", '<html lang="en"><head><meta charset="utf-8">',
             "<title>Leaderboard</title>", f"<style>{_CSS}</style></head><body>", "<h1>Leaderboard</h1>",
             f'<figure id="chart">{chart.svg(board)}</figure>']
    for task in board.tasks():
        header, cells = task_table(board, task)
        parts.append(f'<h2>{escape(task)}</h2><table class="leaderboard" data-task="{escape(task)}">')
        parts.append("<thead><tr>" + "".join(f"<th>{escape(h)}</th>" for h in header) + "</tr></thead><tbody>")
        for row in cells:
            tds = "".join(f'<td{" class=num" if i == 0 or h == "n" else ""}>{escape(c)}</td>'
                          for i, (h, c) in enumerate(zip(header, row)))
            parts.append(f"<tr>{tds}</tr>")
        parts.append("</tbody></table>")
    parts.append(f"<p><em>{escape(methods(board))}</em></p>")
    if board.notes:
        parts.append('<ul class="notes">' + "".join(f"<li>{escape(n)}</li>" for n in board.notes) + "</ul>")
    parts.append("</body></html>")
    return "\n".join(parts) + "\n"
