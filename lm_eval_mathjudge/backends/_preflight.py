"""What every judge's preflight shares: one free model lookup before generation, bounded and
retried a little, whose failure stops the run naming the endpoint and what to check.

A server without the lookup route (a 404 that does not name the model, or a 405: a proxy, a
gateway) raises ``NoRoute`` from the backend's lookup; it is let through with a warning unless
the backend has another way to check (the OpenAI model list), and the first judge call checks
the model.
"""

from __future__ import annotations

import logging
from typing import Any, Callable

from .. import vendors
from ..calls.retry import RetryPolicy, call_with_retries
from ..core.errors import FatalJudgeError, JudgeCallError
from ..settings.schema import JudgeSettings

log = logging.getLogger(__name__)

TIMEOUT = 30.0  # seconds per preflight attempt (at most the judge timeout)
RETRIES = 2  # transient preflight failures retried (at most judge max_retries)


class NoRoute(Exception):
    """The server has no such route (not: no such model)."""


def bounds(settings: JudgeSettings) -> tuple[float, RetryPolicy]:
    """(seconds per attempt, retry policy) of one preflight request."""
    return min(settings.timeout, TIMEOUT), RetryPolicy(max_retries=min(settings.max_retries, RETRIES))


def look_up(settings: JudgeSettings, endpoint: str, lookup: Callable[[float], Any],
            no_route: Callable[[], None] | None = None) -> Any:
    """``lookup(timeout)`` with the preflight's retries; a failure is the run's, saying what to check."""
    timeout, policy = bounds(settings)
    try:
        try:
            return call_with_retries(lambda: lookup(timeout), policy)
        except NoRoute:
            return no_route() if no_route is not None else unchecked(settings, endpoint)
    except JudgeCallError as exc:  # the no_route check's failures too
        raise failure(settings, endpoint, exc) from None


def unchecked(settings: JudgeSettings, endpoint: str) -> None:
    log.warning("the %s judge endpoint %s has no models route; preflight could not check the model %s "
                "(the first judge call will)", settings.backend, endpoint, settings.model)


def failure(settings: JudgeSettings, endpoint: str, exc: JudgeCallError) -> FatalJudgeError:
    if isinstance(exc, FatalJudgeError) and exc.kind == "preflight":
        return exc
    vendor = vendors.get(settings.backend)
    variable = vendor.endpoint.variable if vendor is not None and vendor.endpoint is not None else None
    where = f"judge_base_url / {variable}" if variable else "judge_base_url"
    return FatalJudgeError(
        f"preflight: the {settings.backend} judge at {endpoint} (model {settings.model}) did not answer the model "
        f"lookup: {str(exc).rstrip('.')}. Check {where}, the key and judge_model; judge_preflight=false skips "
        "this check", kind="preflight", status=exc.status)
