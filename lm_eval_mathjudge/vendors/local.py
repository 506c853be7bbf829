"""The offline judge built on math-verify: no service, no key, no price, the exact-match contract only."""

from __future__ import annotations

from .record import DEFAULT_MAX_TOKENS, JudgeDefault, Price, Vendor

MODEL = "math-verify"
PRICE = Price(0.0, 0.0, 0.0, 0.0, 0.0, source="local judge (no API)")

LOCAL = Vendor(name="local", title="the offline math-verify judge", transport="local",
               judges={"exact_match": JudgeDefault(MODEL, DEFAULT_MAX_TOKENS)})
