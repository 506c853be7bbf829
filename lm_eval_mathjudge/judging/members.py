"""What a judge made of member clients (a panel, a cascade) shares: one bar, and how wide a pool feeding judges is.

A combinator defines ``clients`` (the member clients that make calls); the pool draws their
progress on its one bar. ``judge_concurrency`` takes effect in one place, the judge's client
(``client.py``): it joins the gate of the judge's endpoint (``calls/limits.py``: the clients of one
endpoint share it, the larger concurrency holds) and is the client's ``concurrency``. Every pool
that drives judges (the run's pool, the early calls, a panel's helpers) is as wide as ``width``
says of its judges, never from a setting of its own.
"""

from __future__ import annotations

from typing import Any, Iterable


def width(judges: Iterable[Any]) -> int:
    """The threads a pool needs to keep the gates of ``judges`` (clients, panels, cascades) full: the widest."""
    return max((judge.concurrency for judge in judges), default=1)


class Members:
    clients: list[Any]

    def set_bar(self, bar: Any) -> None:
        for client in self.clients:
            client.set_bar(bar)

    @property
    def concurrency(self) -> int:
        return width(self.clients)
