"""Credentials: where each service's key lives, and the refusal of keys anywhere else.

API keys are deliberately not settings: lm-eval writes metadata and model_args
to disk, so keys come from the SDKs' own environment variables only. A setting,
metadata key or model arg that looks like a credential (or a URL that carries
one) is refused before anything runs, with a hint that names the variable.

``SERVICES`` is the one table of those variables and hints (what to set, and
what to check when a service refuses a key), read from the vendor records; the
judge backends and the generators check it before any generation (``require``)
and name it in errors.
"""

from __future__ import annotations

import os
import re
from typing import Any, Iterable, Mapping
from urllib.parse import parse_qsl, urlsplit

from .. import vendors
from ..core.errors import ConfigError, CredentialsError
from ..vendors.gemini import GEMINI_API, VERTEX
from ..vendors.record import Credentials

Service = Credentials  # what one API needs (the vendor records' type; generators declare their own)

# The judge backends' services, from their vendor records, and the generators' two Google APIs.
SERVICES: dict[str, Service] = {
    **{v.name: v.credentials for v in vendors.VENDORS if v.credentials is not None},
    "gemini_api": GEMINI_API, "vertex": VERTEX}
# The variables that hold a key (not a switch or a project), named in every refusal.
KEY_VARIABLES = tuple(dict.fromkeys(k for service in SERVICES.values() for k in service.keys))


def hint(service: str) -> str:
    return SERVICES[service].hint


def require(service: str | Service, who: str, environ: Mapping[str, str] | None = None, otherwise: str = "") -> None:
    """Stop before anything runs when none of the service's variables is set.

    ``service``: a name in ``SERVICES``, or a plug-in's own ``Service``. ``who`` names what needs
    them ("the openai judge (gpt-4o)", "--model mathjudge-sora"); ``otherwise`` is a sentence
    offering another way (another judge, say)."""
    environ = os.environ if environ is None else environ
    entry = SERVICES[service] if isinstance(service, str) else service
    if entry.variables and not any(environ.get(n, "").strip().lower() not in ("", "0", "false") for n in entry.variables):
        raise CredentialsError(f"{who} needs credentials, and none of {', '.join(entry.variables)} is set: "
                          f"{entry.hint}.{' ' + otherwise if otherwise else ''}")


# ---------------------------------------------------------------------- names and URLs that carry keys
# Name parts that mark a credential. Whole parts only: "tokenizer", "max_tokens" and
# "tokenized_requests" (lm-eval model_args) are not credentials, "api_key" and "token" are.
_CREDENTIAL_PARTS = {"key", "apikey", "token", "secret", "password", "passwd", "pwd", "credential",
                     "credentials", "auth", "authorization", "bearer", "cookie", "signature", "sig"}
_CREDENTIAL_QUERY = {"key", "api_key", "apikey", "api-key", "token", "access_token", "auth", "sig",
                     "signature", "secret", "password", "code", "x-goog-api-key"}


def looks_like_credential(name: str) -> bool:
    parts = re.split(r"[^a-z0-9]+", re.sub(r"([a-z])([A-Z])", r"\1_\2", str(name)).lower())
    return any(part in _CREDENTIAL_PARTS for part in parts)


def url_carries_credentials(value: str) -> bool:
    """A URL with user:password@ or a credential-like query parameter (``?api_key=...``, ``?key=``)."""
    if "://" not in value:
        return False
    try:
        parts = urlsplit(value.strip())
        userinfo = parts.username is not None or parts.password is not None
    except ValueError:  # e.g. a malformed port: treat as suspicious rather than crash
        return "@" in value
    query = [k for k, _ in parse_qsl(parts.query, keep_blank_values=True)]
    return userinfo or any(k.lower() in _CREDENTIAL_QUERY or looks_like_credential(k) for k in query)


def refused_name(where: str, name: str) -> str:
    """The message for a credential given as a setting, metadata key or model arg."""
    return (f"{where} sets {name}: credentials are never read from metadata, model_args or YAML, "
            "because lm-eval writes them to the results file. Put the key in the provider's "
            f"environment variable ({', '.join(KEY_VARIABLES)}, ...) and remove it from the command line.")


def refuse_credentials(values: Mapping[str, Any], where: str, known: Iterable[str] = ()) -> None:
    """Refuse keys that look like credentials and URLs that carry them: lm-eval writes both
    metadata and model_args verbatim to the results file (and prints them).

    ``known``: names that are settings, never secrets (``max_tokens`` contains "token")."""
    known = set(known)
    for name, value in values.items():
        if name not in known and looks_like_credential(name):
            raise ConfigError(refused_name(where, name))
        if isinstance(value, str) and url_carries_credentials(value):
            raise ConfigError(
                f"{where} sets {name} to a URL that carries credentials (user:password@ or a key in the query "
                "string); lm-eval writes it to the results file. Give the plain endpoint and put the key in the "
                f"provider's environment variable ({', '.join(KEY_VARIABLES)}, ...).")
