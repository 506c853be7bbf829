"""What a judge made of member clients (a panel, a cascade) shares: one bar and the widest width.

A combinator defines ``clients`` (the member clients that make calls); the pool draws their
progress on its one bar and sizes itself by the widest member.
"""

from __future__ import annotations

from typing import Any


class Members:
    clients: list[Any]

    def set_bar(self, bar: Any) -> None:
        for client in self.clients:
            client.set_bar(bar)

    @property
    def concurrency(self) -> int:
        return max(client.concurrency for client in self.clients)
