"""Settings to a judge: one client, or a panel or a cascade of member clients (each preflighted, cached).

``member_settings`` resolves the judges a task runs (a panel's members, a cascade's two stages, or
the task's own judge); ``open_judge`` opens a client per member and wraps them in the panel or
cascade the run options ask for. Every caller that judges (a task, the audit, the Python API) opens
its clients here, so they all get the same cache, limits, retries and preflight. The caller closes
what it gets.
"""

from __future__ import annotations

import logging
import sqlite3
from typing import Any, Mapping, Sequence

from .. import backends, vendors
from ..core import prompts
from ..core.errors import ConfigError, CredentialsError, JudgeCallError
from ..core.judges import Judge
from ..core.redact import install_log_filter
from ..settings.layers import resolve_settings
from ..settings.schema import JudgeSettings, RunOptions, judge_label
from . import cascade
from .cache import ReplyCache
from .client import JudgeClient, preflight_once
from .counterfactual import Counterfactual
from .panel import Panel

log = logging.getLogger(__name__)


def member_settings(judge: str, options: RunOptions, settings: JudgeSettings, yaml_settings: Mapping | None,
                    metadata: Mapping | None) -> list[JudgeSettings]:
    """The judges a panel or cascade runs, each resolved like the task's own settings."""
    if options.panel:
        members = [resolve_settings(judge, yaml_settings, metadata, overrides=m) for m in options.panel]
        seen = [m.public() for m in members]
        if any(seen.count(m) > 1 for m in seen):
            raise ConfigError("judge_panel names the same judge twice (identical settings): it would only "
                              "repeat its cached verdicts; give each member another backend or model")
        return members
    if options.cascade:
        if settings.backend == "local":
            raise ConfigError("judge_cascade sends what the local rule does not accept to an LLM judge, but "
                              f"the judge backend is local; set judge_backend to "
                              f"{vendors.listed(vendors.names(judge, api=True))}")
        return [resolve_settings(judge, yaml_settings, metadata, overrides={"backend": "local"}), settings]
    return [settings]


def open_judge(judge: Judge, options: RunOptions, members: Sequence[JudgeSettings]) -> tuple[Any, list[JudgeClient]]:
    """A new judge (one client, a panel or a cascade) and its member clients; the caller closes the judge."""
    clients: list[tuple[str, JudgeClient]] = []
    try:
        for settings in members:
            clients.append((_label(settings, clients), open_client(judge, settings)))
    except BaseException:
        for _, client in clients:
            client.close()
        raise
    opened = [client for _, client in clients]
    if options.counterfactual:  # each LLM judge's credited verdicts re-checked; the offline rule's never
        clients = [(label, client if client.settings.backend == "local" else
                    Counterfactual(client, judge.credits, judge.describe)) for label, client in clients]
    if options.panel:
        return Panel(clients, options.panel_rule, options.quorum, judge.describe), opened
    if options.cascade:
        return cascade.Cascade(clients[0], clients[1], judge.describe), opened
    return clients[0][1], opened


def open_client(judge: Judge, settings: JudgeSettings, *, progress: bool = True) -> JudgeClient:
    """One client (a task's member, or the Python API's): credentials checked, backend built, cache
    opened, one free preflight call; the caller closes it (which closes its backend and cache)."""
    try:
        backends.check_credentials(settings, judge.name)
    except CredentialsError as exc:
        if not settings.dry_run:
            raise
        # A dry run sends nothing: the missing key is worth knowing before the real run, not a stop.
        log.warning("note (dry run): %s", exc)
    backend = backends.build(settings, judge.name)
    install_log_filter()  # after the backend's module exists: its logger is scrubbed too
    cache = None
    try:
        cache = ReplyCache(settings.resolved_cache_dir(), settings.cache_network_fs) if settings.cache else None
        # One free call (endpoint, key and model answer), unless the cache remembers a recent pass;
        # a dry run asks no judge anything, so it needs neither the check nor a reachable judge.
        if not settings.dry_run:
            try:
                preflight_once(backend, settings, cache)
            except JudgeCallError as exc:
                exc.family = "preflight"  # its own exit code (core/errors.py)
                raise
    except (OSError, sqlite3.Error) as exc:
        backend.close()
        raise ConfigError(f"cannot open the judge cache in {settings.resolved_cache_dir()} ({exc}); "
                          "set MATHJUDGE_CACHE_DIR to a writable folder, or judge_cache=false") from None
    except BaseException:
        backend.close()
        if cache is not None:
            cache.close()
        raise
    return JudgeClient(backend, judge.parse, settings, prompts.load(judge.template).version, cache,
                       progress=progress)


def _label(settings: JudgeSettings, taken: list[tuple[str, Any]]) -> str:
    label = judge_label(settings)
    names = [name for name, _ in taken]
    return label if label not in names else f"{label}#{len(taken) + 1}"
