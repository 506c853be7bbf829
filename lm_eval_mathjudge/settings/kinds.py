"""What a setting's value may be: the row of the settings table, and the kinds of value it names.

A ``Setting`` is one row of ``schema.SETTINGS``: its name, its kind, its default, one line on what it
does, an example and the layers that take it. A kind knows the three things every use of a value
needs, so none of them is written twice:

- ``read``: a value as a layer gives it (text from the environment, YAML, JSON from ``--metadata``)
  to the value the dataclass holds, or ``ValueError``/``TypeError`` (the caller names the setting);
- ``problem``: the message for a value of the right type outside what is allowed, else None;
- ``allowed``: the same rule in words, for the settings reference.
"""

from __future__ import annotations

import json
import math
import os
from dataclasses import dataclass
from typing import Any, Mapping
from urllib.parse import urlsplit

from ..core import jsontext
from ..core.errors import ConfigError
from ..core.jsontext import shown

# The layers a setting can come from (layers.py), lowest precedence first; a panel member's own
# settings sit above all of them and take judge settings only.
JUDGE_LAYERS = ("yaml", "env", "metadata", "member")
RUN_LAYERS = ("yaml", "env", "metadata")  # how a task's judge is run: the whole run's, never one member's


@dataclass(frozen=True)
class Setting:
    """One row of the settings table. ``default_text``: the reference's words for a default that is not
    one value (it depends on the judge or the backend); ``allowed_text``: for a rule the kind cannot say
    alone (it depends on another setting)."""
    name: str
    kind: Kind
    default: Any
    doc: str  # what it does, one line of Markdown (the reference prints it)
    example: Any  # a value someone would set, as --metadata JSON takes it
    layers: tuple[str, ...] = JUDGE_LAYERS
    default_text: str | None = None
    allowed_text: str | None = None

    @property
    def judge_setting(self) -> bool:
        """A judge's own setting (``JudgeSettings``; a panel member may set it), not a run option."""
        return "member" in self.layers

    @property
    def optional(self) -> bool:
        return self.default is None

    @property
    def label(self) -> str:
        """How messages name it (judge settings as ``judge timeout``, run options as their metadata key)."""
        return f"judge {self.name}" if self.judge_setting else f"judge_{self.name}"

    def read(self, value: Any) -> Any:
        try:
            return self.kind.read(value)
        except ConfigError:  # the kind's own message
            raise
        except (TypeError, ValueError, OverflowError, RecursionError) as exc:
            raise ConfigError(f"judge setting {self.name}={shown(value)} is not a valid {self.kind.noun}; "
                              f"give {self._instead()}") from exc

    def _instead(self) -> str:
        if isinstance(self.kind, Choice):
            return "one of " + ", ".join(self.kind.values)
        return f"one such as {json.dumps(self.example)}"

    def check_type(self, value: Any) -> None:
        """A value given to the dataclass directly (from Python) must already be of the field's type."""
        if value is None and self.optional:
            return
        py = self.kind.py
        ok = isinstance(value, py) and not (py is not bool and isinstance(value, bool))
        if py is float and isinstance(value, int) and not isinstance(value, bool):
            ok = True
        if not ok:
            raise ConfigError(f"judge setting {self.name}={shown(value)} is not a {py.__name__}")

    def problem(self, value: Any) -> str | None:
        return None if value is None and self.optional else self.kind.problem(self.label, value)


def _say(template: str, label: str, value: Any, **more: Any) -> str:
    """A message from a kind's template: ``{label}``, ``{value}`` and the kind's own fields."""
    return template.format(label=label, value=value, **more)


def _n(x: float) -> str:
    return f"{int(x):,}" if float(x).is_integer() else str(x)


# ---------------------------------------------------------------------- kinds
@dataclass(frozen=True)
class Flag:
    py = bool
    noun = "bool (true/false)"

    def read(self, value: Any) -> bool:
        return to_bool(value)

    def problem(self, label: str, value: bool) -> str | None:
        return None

    def allowed(self) -> str:
        return "`true` or `false` (also `1`/`0`, `yes`/`no`, `on`/`off`)"


@dataclass(frozen=True)
class Whole:
    """A whole number in ``lo..hi`` (None: no limit that side), or one of ``special`` ((value, meaning), ...)."""
    lo: int | None = None
    hi: int | None = None
    special: tuple[tuple[int, str], ...] = ()
    says: str = "{label}={value} must be between {lo} and {hi}"
    py = int
    noun = "int"

    def read(self, value: Any) -> int:
        return to_int(value)

    def problem(self, label: str, value: int) -> str | None:
        inside = (self.lo is None or value >= self.lo) and (self.hi is None or value <= self.hi)
        return None if inside or value in dict(self.special) else _say(self.says, label, value, lo=self.lo, hi=self.hi)

    def allowed(self) -> str:
        specials = "".join(f"`{v}` ({what}), " for v, what in self.special)
        if self.hi is None:
            return f"{specials}{_n(self.lo)} or more"
        return f"{specials}{'or ' if specials else ''}{_n(self.lo)} to {_n(self.hi)}"


@dataclass(frozen=True)
class Real:
    """A finite number from ``lo`` (excluded when ``above``) to ``hi`` (None: no upper limit)."""
    lo: float
    hi: float | None = None
    above: bool = False
    says: str = ""  # default: between, or more than
    py = float
    noun = "float"

    def read(self, value: Any) -> float:
        return to_float(value)

    def problem(self, label: str, value: float) -> str | None:
        if not math.isfinite(value):
            return f"{label}={value} is not a finite number"
        low_ok = value > self.lo if self.above else value >= self.lo
        if low_ok and (self.hi is None or value <= self.hi):
            return None
        default = ("{label}={value} must be more than {lo} and at most {hi:.0f}" if self.above
                   else "{label}={value} must be between {lo} and {hi}")
        return _say(self.says or default, label, value, lo=self.lo, hi=self.hi)

    def allowed(self) -> str:
        if self.hi is None:
            return f"{_n(self.lo)} or more"
        return f"more than {_n(self.lo)}, at most {_n(self.hi)}" if self.above else f"{_n(self.lo)} to {_n(self.hi)}"


@dataclass(frozen=True)
class Choice:
    """One of ``values``; ``fold_case``: ``Majority`` is read as ``majority``."""
    values: tuple[str, ...]
    fold_case: bool = False
    says: str = "{label}={value} must be one of {choices}"
    py = str
    noun = "str"

    def read(self, value: Any) -> str:
        text = to_text(value)
        return text.lower() if self.fold_case else text

    def problem(self, label: str, value: str) -> str | None:
        if value in self.values:
            return None
        return _say(self.says, label, shown(value), choices=", ".join(self.values))

    def allowed(self) -> str:
        return ", ".join(f"`{v}`" for v in self.values[:-1]) + f" or `{self.values[-1]}`"


@dataclass(frozen=True)
class Text:
    """Non-blank text; ``hint``: what to do instead of leaving it blank. ``objects``: a JSON object
    given in --metadata or YAML is kept as its JSON text (the price table)."""
    hint: str
    what: str = "non-blank text"
    objects: bool = False
    py = str
    noun = "str"

    def read(self, value: Any) -> str:
        if self.objects and isinstance(value, Mapping):
            return json.dumps(value, sort_keys=True)
        return to_text(value)

    def problem(self, label: str, value: str) -> str | None:
        return None if value.strip() else f"{label} is empty; {self.hint}"

    def allowed(self) -> str:
        return self.what


@dataclass(frozen=True)
class Url:
    py = str
    noun = "str"

    def read(self, value: Any) -> str:
        return to_text(value)

    def problem(self, label: str, value: str) -> str | None:
        if urlsplit(value).scheme in ("http", "https"):
            return None
        return f"{label}={shown(value)} must be an http:// or https:// URL"

    def allowed(self) -> str:
        return "an `http://` or `https://` URL, without credentials (keys go in the environment)"


@dataclass(frozen=True)
class Members:
    """A judge panel: a list of objects, one per member (JSON text from the environment or
    --model_args). Which names a member may set is the layers' business (``layers._panel_members``)."""
    most: int
    py = tuple
    noun = "list"

    def read(self, value: Any) -> tuple[dict[str, Any], ...]:
        if isinstance(value, str):
            try:
                value = jsontext.loads(value)
            except ValueError:
                raise ConfigError(f"judge setting panel={shown(value)} is not JSON; give a list of objects, e.g. "
                                  '[{"backend": "local"}, {"backend": "openai", "model": "gpt-4o-2024-08-06"}]') from None
        if not isinstance(value, (list, tuple)) or not all(isinstance(m, Mapping) for m in value):
            raise ConfigError("judge setting panel must be a list of objects, one per member, each holding that "
                              'member\'s judge settings, e.g. [{"backend": "local"}, {"backend": "openai"}]')
        return tuple(dict(m) for m in value)

    def problem(self, label: str, value: tuple) -> str | None:
        if not value or 2 <= len(value) <= self.most:
            return None
        return f"{label} has {len(value)} member(s); a panel needs 2 to {self.most}"

    def allowed(self) -> str:
        return f"a list of 2 to {self.most} objects, each one member's judge settings"


@dataclass(frozen=True)
class Folders:
    """Existing folders, from a list, a JSON list or one ``os.pathsep``-separated string; each resolved."""
    py = tuple
    noun = "list"

    def read(self, value: Any) -> tuple[str, ...]:
        if isinstance(value, str):
            text = value.strip()
            try:
                value = jsontext.loads(text) if text.startswith("[") else text.split(os.pathsep)
            except ValueError:
                value = None  # refused just below
        if not isinstance(value, (list, tuple)) or not all(isinstance(v, str) for v in value):
            raise ConfigError("judge setting media_dirs must be a list of folders (or one string of folders separated "
                              f"by {os.pathsep!r}), e.g. [\"/data/renders\"]")
        return tuple(dict.fromkeys(_folder(entry) for entry in (v.strip() for v in value) if entry))

    def problem(self, label: str, value: tuple) -> str | None:
        return None

    def allowed(self) -> str:
        return "a list of existing folders (or one string of folders separated by `:`; `;` on Windows)"


def _folder(entry: str) -> str:
    if "\x00" in entry:
        raise ConfigError(f"judge setting media_dirs names {shown(entry)}, which holds a NUL character; give "
                          "the folders your generated images and videos are in")
    path = os.path.realpath(os.path.expanduser(entry))
    if not os.path.isdir(path):
        raise ConfigError(f"judge setting media_dirs names {shown(entry)}, which is not a folder; give the folders "
                          "your generated images and videos are in")
    return path


@dataclass(frozen=True)
class Counts:
    """Whole numbers ``lo..hi``, sorted, each once: ``[1, 4, 16]``, ``4``, ``"1,4,16"`` or ``"[1, 4, 16]"``."""
    lo: int
    hi: int
    py = tuple
    noun = "list"

    def read(self, value: Any) -> tuple[int, ...]:
        try:
            if isinstance(value, str) and value.strip().startswith("["):
                value = jsontext.loads(value)
            items = (value.replace(",", " ").split() if isinstance(value, str)
                     else value if isinstance(value, (list, tuple)) else [value])
            return tuple(sorted({to_int(item) for item in items}))
        except (TypeError, ValueError):
            raise ConfigError(f"judge setting pass_at={shown(value)} must be whole numbers such as [1, 4, 16] "
                              "(the k' of pass@k')") from None

    def problem(self, label: str, value: tuple) -> str | None:
        if all(self.lo <= k <= self.hi for k in value):
            return None
        return f"{label}={list(value)} must list whole numbers between {self.lo} and {self.hi}"

    def allowed(self) -> str:
        return f"a list of whole numbers, each {self.lo} to `repeats` (at most {_n(self.hi)}), or one string `1,4,16`"


Kind = Flag | Whole | Real | Choice | Text | Url | Members | Folders | Counts


# ---------------------------------------------------------------------- text to values
def to_text(value: Any) -> str:
    if isinstance(value, (dict, list, tuple, set)):
        raise TypeError(value)
    return str(value).strip()


def to_bool(value: Any) -> bool:
    if isinstance(value, bool):
        return value
    if isinstance(value, int) and value in (0, 1):
        return bool(value)
    text = str(value).strip().lower()
    if text in ("1", "true", "yes", "on"):
        return True
    if text in ("0", "false", "no", "off"):
        return False
    raise ValueError(value)


def to_int(value: Any) -> int:
    if isinstance(value, bool):  # True is an int in Python, never a count
        raise TypeError(value)
    if isinstance(value, float):
        if not value.is_integer():
            raise ValueError(value)  # concurrency 2.7 is a mistake, not 2
        return int(value)
    if isinstance(value, int):
        return value
    return int(str(value).strip())


def to_float(value: Any) -> float:
    if isinstance(value, bool):
        raise TypeError(value)
    try:
        number = float(value if isinstance(value, (int, float)) else str(value).strip())
    except OverflowError:  # an int beyond any float: no setting means that
        raise ValueError(value) from None
    if not math.isfinite(number):
        raise ValueError(value)  # nan/inf: every call would fail after generation
    return number
