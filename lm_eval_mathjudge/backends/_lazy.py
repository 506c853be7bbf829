"""The SDK client of a backend, built (and its SDK imported) on first use.

Importing ``openai`` or ``google.genai`` costs about half a second; a rerun whose
verdicts are all cached never needs either, so the backends build their client
only when a call, the preflight or a batch job first asks for it.
"""

from __future__ import annotations

import threading
from typing import Any

_BUILD_LOCK = threading.Lock()  # one lock for all backends: a client is built once per backend


class LazyClient:
    _sdk_client: Any = None

    def _build_client(self) -> Any:  # pragma: no cover - every backend defines it
        raise NotImplementedError

    @property
    def _client(self) -> Any:
        """The SDK client, built on first use."""
        if self._sdk_client is None:
            with _BUILD_LOCK:
                if self._sdk_client is None:
                    self._sdk_client = self._build_client()
        return self._sdk_client

    def connect(self) -> None:
        """Build the SDK client now: one that cannot be built (no key, no Azure endpoint or API version,
        no Vertex AI project) fails here, before generation."""
        self._client  # noqa: B018 - the property builds it

    @property
    def sdk(self) -> Any:
        """The SDK client (built now if it was not), for the batch provider of the same service."""
        return self._client
