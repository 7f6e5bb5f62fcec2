"""A plugin's arguments, read and checked by the plugin itself (as kube's ``FitArgs``).

Each plugin's arguments are a dataclass with ``decode(ArgReader)``: a profile file's
values are checked once, by the plugin that uses them, and an error names the
plugin and the key. Written out per plugin, not read off annotations: a compiled
core keeps none, and each plugin knows its own bounds.
"""

from __future__ import annotations

import difflib
import math
from collections.abc import Mapping, Sequence
from dataclasses import dataclass

from ilucid.core.picklable import picklable

__all__ = ["ArgReader", "NoArgs", "PluginArgError"]


class PluginArgError(ValueError):
    """A plugin argument that cannot be used; ``key`` names it (None: the plugin)."""

    def __init__(self, plugin: str, key: str | None, message: str) -> None:
        super().__init__(f"{plugin}: {key}: {message}" if key else f"{plugin}: {message}")
        self.plugin = plugin
        self.key = key
        self.detail = message


class ArgReader:
    """Typed, checked access to one plugin's raw arguments; unknown keys are errors.

    Written out per plugin (``Args.decode``), not read off annotations: a compiled
    core keeps none, and each plugin knows its own bounds."""

    def __init__(self, plugin: str, raw: Mapping[str, object]) -> None:
        self.plugin = plugin
        self._raw = dict(raw)
        self._read: list[str] = []

    def _get(self, key: str) -> object:
        self._read.append(key)
        return self._raw.get(key)

    def _fail(self, key: str, message: str) -> PluginArgError:
        return PluginArgError(self.plugin, key, message)

    def number(
        self, key: str, default: float, low: float | None = None, high: float | None = None
    ) -> float:
        """A finite number in ``[low, high]``."""
        value = self._get(key)
        if value is None:
            return default
        if isinstance(value, bool) or not isinstance(value, int | float):
            raise self._fail(key, f"must be a number, got {value!r}")
        number = float(value)
        if not math.isfinite(number):
            raise self._fail(key, f"must be finite, got {value!r}")
        if low is not None and number < low:
            raise self._fail(key, f"must be >= {low:g}, got {number:g}")
        if high is not None and number > high:
            raise self._fail(key, f"must be <= {high:g}, got {number:g}")
        return number

    def optional_number(
        self, key: str, default: float | None, low: float | None = None
    ) -> float | None:
        """A number, or ``false`` (None: off)."""
        value = self._raw.get(key, default)
        if value is False or value is None:
            self._read.append(key)
            return None
        return self.number(key, default if default is not None else 0.0, low)

    def integer(self, key: str, default: int, low: int | None = None) -> int:
        value = self._raw.get(key)
        if isinstance(value, float) and value.is_integer():
            self._raw[key] = int(value)
            value = int(value)
        if value is not None and (isinstance(value, bool) or not isinstance(value, int)):
            self._read.append(key)
            raise self._fail(key, f"must be a whole number, got {value!r}")
        return int(self.number(key, float(default), None if low is None else float(low)))

    def optional_integer(self, key: str, default: int | None, low: int | None = None) -> int | None:
        value = self._raw.get(key, default)
        if value is False or value is None:
            self._read.append(key)
            return None
        return self.integer(key, default if default is not None else 0, low)

    def flag(self, key: str, default: bool) -> bool:
        value = self._get(key)
        if value is None:
            return default
        if not isinstance(value, bool):
            raise self._fail(key, f"must be true or false, got {value!r}")
        return value

    def text(self, key: str, default: str, choices: Sequence[str] = ()) -> str:
        value = self._get(key)
        if value is None:
            return default
        if not isinstance(value, str) or not value.strip():
            raise self._fail(key, f"must be a non-empty string, got {value!r}")
        if choices and value not in choices:
            raise self._fail(key, f"must be one of {', '.join(choices)}, got {value!r}")
        return value

    def numbers(self, key: str, default: tuple[float, ...]) -> tuple[float, ...]:
        """Numbers as a list, or one string ``"a,b,c"``."""
        value = self._get(key)
        if value is None:
            return default
        items: list[object]
        if isinstance(value, str):
            items = [v.strip() for v in value.split(",") if v.strip()]
        elif isinstance(value, list | tuple):
            items = list(value)
        else:
            raise self._fail(key, f"must be a list of numbers, got {value!r}")
        out: list[float] = []
        for item in items:
            try:
                number = float(item) if not isinstance(item, bool) else math.nan  # type: ignore[arg-type]
            except (TypeError, ValueError):
                number = math.nan
            if not math.isfinite(number):
                raise self._fail(key, f"must be a list of finite numbers, got {value!r}")
            out.append(number)
        return tuple(out)

    def table(self, key: str) -> Mapping[str, object]:
        """A mapping (a TOML table), empty when absent."""
        value = self._get(key)
        if value is None:
            return {}
        if not isinstance(value, Mapping):
            raise self._fail(key, f"must be a table, got {value!r}")
        return value

    def finish(self) -> None:
        """Refuse any key the plugin did not read, naming the closest it knows."""
        for key in self._raw:
            if key not in self._read:
                close = difflib.get_close_matches(key, self._read, n=1)
                known = ", ".join(sorted(set(self._read))) or "none"
                hint = f"did you mean {close[0]!r}? " if close else ""
                raise self._fail(key, f"unknown argument; {hint}known: {known}")


@dataclass(frozen=True, slots=True)
class NoArgs:
    """The arguments of a plugin that takes none."""

    @classmethod
    def decode(cls, reader: ArgReader) -> NoArgs:
        return cls()


picklable(NoArgs)
