"""Prompt templates: our own text files with ``{{name}}`` placeholders.

Placeholders are filled in one regex pass over the template only, so values
full of LaTeX braces (``\\frac{a}{b}``, ``{{x}}``) are inserted verbatim and
never re-scanned; ``str.format`` would choke on them. A template's version is
a hash of its text, recorded with every result and part of every cache key.
"""

from __future__ import annotations

import hashlib
import re
from dataclasses import dataclass, field
from functools import lru_cache
from importlib import resources

from ..errors import ConfigError

_PLACEHOLDER = re.compile(r"\{\{([a-z_]+)\}\}")


@dataclass(frozen=True)
class Template:
    name: str
    text: str
    placeholders: frozenset[str] = field(init=False)

    def __post_init__(self):
        object.__setattr__(self, "placeholders", frozenset(_PLACEHOLDER.findall(self.text)))

    @property
    def version(self) -> str:
        return f"{self.name}@{hashlib.sha256(self.text.encode()).hexdigest()[:12]}"

    def render(self, **values: str) -> str:
        missing = self.placeholders - values.keys()
        extra = values.keys() - self.placeholders
        if missing or extra:
            raise ConfigError(f"template {self.name}: missing {sorted(missing)}, unexpected {sorted(extra)}")
        return _PLACEHOLDER.sub(lambda m: str(values[m.group(1)]), self.text)


@lru_cache(maxsize=None)
def load(name: str) -> Template:
    """Load ``prompts/<name>.txt`` from the installed package."""
    text = resources.files(__package__).joinpath(f"{name}.txt").read_text(encoding="utf-8")
    return Template(name=name, text=text)
