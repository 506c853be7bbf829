"""Settings to a judging client: credentials checked, backend built, cache opened, one free preflight call.

Every caller that judges (a task, the Python API) opens its clients here, so
they all get the same cache, limits, retries and preflight.
"""

from __future__ import annotations

import sqlite3

from .. import backends
from ..core import prompts
from ..core.errors import ConfigError
from ..core.judges import Judge
from ..core.redact import install_log_filter
from ..settings.schema import JudgeSettings
from .cache import ReplyCache
from .client import JudgeClient, preflight_once


def open_client(judge: Judge, settings: JudgeSettings, *, progress: bool = True) -> JudgeClient:
    """One client; the caller closes it (which closes its backend and cache)."""
    backends.check_credentials(settings, judge.name)
    backend = backends.build(settings, judge.name)
    install_log_filter()  # after the backend's module exists: its logger is scrubbed too
    cache = None
    try:
        cache = ReplyCache(settings.resolved_cache_dir(), settings.cache_network_fs) if settings.cache else None
        # One free call (endpoint, key and model answer), unless the cache remembers a recent pass.
        preflight_once(backend, settings, cache)
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
