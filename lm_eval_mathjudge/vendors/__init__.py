"""Every judge service the package knows, one record each: the one place a vendor is described.

A record (``record.Vendor``) holds the service's name, SDK and pip extra, credentials, endpoint
rule, default models per judge, prices, token rules, thinking and alias rules; its transport is
``backends/<transport>``. The settings, the cost estimate, the results, the preflight memory and
every message that lists backends read ``VENDORS``; nothing else names a vendor. This room is data
only and imports nothing else of the package. Adding a vendor: a module here, a line below, a
transport under ``backends/`` (docs: Development, "How to add a vendor").
"""

from __future__ import annotations

from .anthropic import ANTHROPIC
from .gemini import GEMINI
from .local import LOCAL
from .openai import AZURE, OPENAI
from .record import Vendor

VENDORS: tuple[Vendor, ...] = (OPENAI, AZURE, GEMINI, ANTHROPIC, LOCAL)
BY_NAME = {vendor.name: vendor for vendor in VENDORS}
NAMES = tuple(BY_NAME)


def get(name: str) -> Vendor | None:
    return BY_NAME.get(name)


def names(judge: str | None = None, *, batch: bool = False, api: bool = False) -> tuple[str, ...]:
    """The backend names that can run ``judge`` (all if None), that have a batch API, or that call an API."""
    return tuple(v.name for v in VENDORS if (judge is None or judge in v.judges) and (v.batch or not batch)
                 and (v.credentials is not None or not api))


def listed(items: tuple[str, ...] | list[str], conjunction: str = "or") -> str:
    """``a, b or c``: a list of backends in a message."""
    items = list(items)
    return items[0] if len(items) == 1 else f"{', '.join(items[:-1])} {conjunction} {items[-1]}"
