"""What every generator is configured with: the shared model_args, credentials, and the prompt.

``--model_args`` are split in two: the shared settings (``GeneratorSettings``)
and the vendor's own options (the ``OPTIONS`` table of its lm-eval class).
Anything else is refused, and a name that looks like a credential is refused
with a hint, because lm-eval writes model_args into the results file.
"""

from __future__ import annotations

import math
import os
from dataclasses import dataclass
from typing import Any, Callable, Mapping

from ..core import prompts
from ..core.errors import ConfigError, did_you_mean
from ..core.jsontext import shown
from ..settings import credentials
from ..settings.kinds import to_bool
from ..settings.schema import default_cache_dir

# lm-eval passes these to every model.
IGNORED_ARGS = ("batch_size", "max_batch_size", "device")
MAX_RETRIES_LIMIT = 20
# One reply's bytes (raw and decoded): images and videos come as base64 in JSON or as downloads. The default
# holds 10 large images or 4 videos in one reply; far more is no generator's.
MAX_REPLY_BYTES = 256 << 20
MAX_REPLY_BYTES_LIMIT = 4 << 30


@dataclass(frozen=True)
class GeneratorSettings:
    """The model_args every generator shares."""
    model: str
    media_dir: str
    num_concurrent: int = 4
    rpm: float = 0.0  # generation requests started per minute over all threads; 0 = unlimited
    max_retries: int = 6
    timeout: float = 300.0  # seconds per HTTP attempt, connect to last byte (an image can take a minute to render)
    poll_interval: float = 5.0  # seconds between status checks of a long-running job
    poll_timeout: float = 1800.0  # seconds one job may run before the sample fails (the job stays recorded)
    prompt: str | None = None  # a template file with {{question}}; None: ours for the media kind
    retry_failures: bool = False  # ask again for prompts whose earlier failure was remembered
    max_reply_bytes: int = MAX_REPLY_BYTES  # cap on one reply (raw and decoded); over it: reply_too_large

    def __post_init__(self):
        if not self.model:
            raise ConfigError("a generator needs --model_args model=NAME")
        if not all(math.isfinite(v) for v in (self.rpm, self.timeout, self.poll_interval, self.poll_timeout)):
            raise ConfigError("rpm, timeout, poll_interval and poll_timeout must be finite numbers (not nan or inf)")
        if self.num_concurrent < 1 or self.rpm < 0 or self.timeout <= 0:
            raise ConfigError("num_concurrent must be at least 1, rpm at least 0 and timeout positive")
        if not 0 <= self.max_retries <= MAX_RETRIES_LIMIT:
            raise ConfigError(f"max_retries must be between 0 and {MAX_RETRIES_LIMIT}")
        if self.poll_interval < 0 or self.poll_timeout <= 0:
            raise ConfigError("poll_interval must be at least 0 and poll_timeout positive")
        if not 1 << 20 <= self.max_reply_bytes <= MAX_REPLY_BYTES_LIMIT:
            raise ConfigError(f"max_reply_bytes must be between {1 << 20} and {MAX_REPLY_BYTES_LIMIT} (bytes of "
                              "one reply)")


SETTING_TYPES: dict[str, Callable[[Any], Any]] = {
    "model": str, "media_dir": str, "num_concurrent": int, "rpm": float, "max_retries": int, "timeout": float,
    "poll_interval": float, "poll_timeout": float, "prompt": str, "retry_failures": to_bool, "max_reply_bytes": int}


def split_model_args(adapter: str, options: Mapping[str, Callable[[Any], Any]],
                     model_args: Mapping[str, Any]) -> tuple[GeneratorSettings, dict[str, Any]]:
    """(shared settings, the vendor options given), every value parsed; unknown names refused."""
    refuse_name_arg(adapter, model_args)
    common: dict[str, Any] = {}
    vendor: dict[str, Any] = {}
    for name, value in model_args.items():
        if name in IGNORED_ARGS:
            continue
        parser = SETTING_TYPES.get(name) or options.get(name)
        if parser is None:
            raise _unknown(adapter, name, sorted(set(SETTING_TYPES) | set(options)))
        try:
            parsed = parser(value)
        except (TypeError, ValueError, OverflowError) as exc:  # OverflowError: an int beyond any float
            raise ConfigError(f"{adapter}: --model_args {name}={shown(value)} is invalid ({str(exc)[:120]})") from None
        (common if name in SETTING_TYPES else vendor)[name] = parsed
    common.setdefault("media_dir", default_media_dir())
    if "model" not in common:
        raise ConfigError(f"--model {adapter} needs --model_args model=NAME")
    return GeneratorSettings(**common), vendor


def refuse_name_arg(adapter: str, model_args: Mapping[str, Any]) -> None:
    """``name=`` named our models in earlier releases; lm-eval records a model's name from ``model=``."""
    if "name" in model_args:
        raise ConfigError(f"--model {adapter}: --model_args name= is no longer read; lm-eval records the model's "
                          "name from model=, so give --model_args model=NAME instead")


def _unknown(adapter: str, name: str, known: list[str]) -> ConfigError:
    if credentials.looks_like_credential(name):
        return ConfigError(f"--model_args {name}=...: credentials are never read from model_args, because "
                           "lm-eval writes them to the results file; use the provider's environment variable")
    return ConfigError(f"{adapter}: unknown --model_args key {name!r}{did_you_mean(name, known)}; "
                       f"known: {', '.join(known)}")


def check_credentials(adapter: str, service: str | credentials.Service | None,
                      environ: Mapping[str, str] | None = None) -> None:
    """Stop before anything runs when none of the vendor's key variables is set (``credentials.SERVICES``)."""
    if service is not None:
        credentials.require(service, f"--model {adapter}", environ)


def load_template(kind: str, path: str | None) -> prompts.Template:
    """Our generator prompt for the media kind, or the user's file (exactly one placeholder, {{question}})."""
    if not path:
        return prompts.load(f"generator_{kind}")
    try:
        with open(os.path.expanduser(path), encoding="utf-8") as fh:
            text = fh.read()
    except OSError as exc:
        raise ConfigError(f"prompt={path}: cannot read it ({exc.strerror or exc})") from None
    template = prompts.Template(name=f"custom_{kind}", text=text)
    if template.placeholders != {"question"}:
        raise ConfigError(f"prompt={path} must contain the placeholder {{{{question}}}} and no other")
    return template


def default_media_dir(environ: Mapping[str, str] | None = None) -> str:
    environ = os.environ if environ is None else environ
    return os.path.join(environ.get("MATHJUDGE_CACHE_DIR") or default_cache_dir(), "media")
