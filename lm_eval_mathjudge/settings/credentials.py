"""Credentials: where each service's key lives, and the refusal of keys anywhere else.

API keys are deliberately not settings: lm-eval writes metadata and model_args
to disk, so keys come from the SDKs' own environment variables only. A setting,
metadata key or model arg that looks like a credential (or a URL that carries
one) is refused before anything runs, with a hint that names the variable.

``SERVICES`` is the one table of those variables and hints (what to set, and
what to check when a service refuses a key); the judge backends and the
generators check it before any generation (``require``) and name it in errors.
"""

from __future__ import annotations

import os
import re
from dataclasses import dataclass
from typing import Any, Iterable, Mapping
from urllib.parse import parse_qsl, urlsplit

from ..core.errors import ConfigError, CredentialsError


@dataclass(frozen=True)
class Service:
    """What one API needs: any one of ``variables`` set, and how to set it."""
    variables: tuple[str, ...]  # any one, set to something other than ""/0/false, will do; () = the SDK checks
    hint: str  # what to set, in a user's words
    rejected: str = "the credentials"  # what to check when the service refuses them (a 401 or 403)


_VERTEX = ("GOOGLE_CLOUD_PROJECT and GOOGLE_CLOUD_LOCATION with application default credentials "
           "(gcloud auth application-default login), or a Vertex AI express-mode key in GOOGLE_API_KEY")
SERVICES: dict[str, Service] = {
    "openai": Service(("OPENAI_API_KEY",),
                      "export OPENAI_API_KEY=... (OPENAI_BASE_URL=... for a compatible server; one that checks no "
                      "key, such as a local vLLM, accepts any value, e.g. EMPTY)",
                      "the API key variable (OPENAI_API_KEY)"),
    "azure": Service(("AZURE_OPENAI_API_KEY", "AZURE_OPENAI_AD_TOKEN"),
                     "export AZURE_OPENAI_API_KEY=..., AZURE_OPENAI_ENDPOINT=... and OPENAI_API_VERSION=...",
                     "the API key variable (AZURE_OPENAI_API_KEY, or AZURE_OPENAI_AD_TOKEN)"),
    "gemini_api": Service(("GEMINI_API_KEY", "GOOGLE_API_KEY"), "GEMINI_API_KEY (or GOOGLE_API_KEY)"),
    "vertex": Service((), _VERTEX),  # application default credentials are found by the SDK, not by a variable
    # The Gemini judge runs on either Google API; the SDK's switch selects Vertex AI.
    "gemini": Service(("GEMINI_API_KEY", "GOOGLE_API_KEY", "GOOGLE_GENAI_USE_VERTEXAI", "GOOGLE_GENAI_USE_ENTERPRISE"),
                      "export GEMINI_API_KEY=... (or GOOGLE_API_KEY), or GOOGLE_GENAI_USE_VERTEXAI=true with "
                      + _VERTEX + " for Vertex AI",
                      "GEMINI_API_KEY / GOOGLE_API_KEY, or the Vertex AI credentials and project"),
}
# The variables that hold a key (not a switch or a project), named in every refusal.
KEY_VARIABLES = ("OPENAI_API_KEY", "AZURE_OPENAI_API_KEY", "GEMINI_API_KEY", "GOOGLE_API_KEY")


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
