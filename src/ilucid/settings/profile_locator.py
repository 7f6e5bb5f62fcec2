"""Where a key of a TOML file is, for errors that name the file, the line and the field."""

from __future__ import annotations

import re
from pathlib import Path

__all__ = ["Locator"]


class Locator:
    """Finds the line of a key for error messages (tomllib reports lines only for syntax)."""

    _HEADER = re.compile(r"^\s*\[\s*([^\[\]]+?)\s*\]\s*(#.*)?$")

    def __init__(self, path: Path, text: str, error: type[ValueError] = ValueError) -> None:
        self.path = path
        self.error_type = error
        self.lines = text.splitlines()

    @staticmethod
    def _dotted(header: str) -> str:
        return ".".join(part.strip().strip("\"'") for part in header.split("."))

    def line_of(self, section: str, key: str | None) -> int:
        """The line of ``key`` in ``[section]`` (``""``: the top), else of the header, else 1."""
        current = ""
        header_line: int | None = None
        pattern = re.compile(rf"^\s*[\"']?{re.escape(key or '')}[\"']?\s*=")
        for number, line in enumerate(self.lines, start=1):
            match = self._HEADER.match(line)
            if match:
                current = self._dotted(match.group(1))
                if key is None and current == section:
                    return number
                if current == section:
                    header_line = number
                if not section and key is not None and current.split(".")[0] == key:
                    return number  # an unknown or misplaced section: its header
                continue
            if key is not None and current == section and pattern.match(line):
                return number
        return header_line or 1

    def error(self, section: str, key: str | None, message: str) -> ValueError:
        field = ".".join(part for part in (section, key) if part)
        line = self.line_of(section, key)
        return self.error_type(f"{self.path}:{line}: {field}: {message}")

    def plugin_line(self, index: int, key: str | None) -> int:
        """The line of ``key`` in the ``index``-th ``[[plugin]]`` table (or its
        ``[plugin.args]``), else of that table's header."""
        seen = -1
        header = 1
        pattern = re.compile(rf"^\s*[\"']?{re.escape(key or '')}[\"']?\s*=")
        for number, line in enumerate(self.lines, start=1):
            stripped = line.strip()
            if re.match(r"^\[\[\s*plugin\s*\]\]", stripped):
                seen += 1
                if seen == index:
                    header = number
                continue
            if seen == index and key is not None and pattern.match(line):
                return number
            if seen > index:
                break
        return header

    def plugin_error(self, index: int, key: str | None, message: str) -> ValueError:
        field = f"plugin[{index + 1}]" + (f".{key}" if key else "")
        # an argument sits on the ``args = {...}`` line (or in its [plugin.args] table)
        line = self.plugin_line(index, "args" if key and key.startswith("args.") else key)
        return self.error_type(f"{self.path}:{line}: {field}: {message}")
