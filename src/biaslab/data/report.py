"""What ``prepare`` did to each raw file: rows read, dropped, fixed, and why.

Loaders call :meth:`FileReport.drop`, :meth:`FileReport.fix` and :meth:`FileReport.note` for every
defect they handle, so nothing is changed silently; ``prepare`` writes the result to
``prepare_report.json`` and logs it to MLflow.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any


@dataclass
class FileReport:
    """Handling of one raw file (path relative to the mirror root).

    Row numbers in the report are 1-based data rows (header not counted) or line numbers for
    line-based files, as in error messages.
    """

    file: str
    rows_read: int = 0
    events: list[dict[str, Any]] = field(default_factory=list)

    def _add(self, action: str, reason: str, rows: list[int] | None, count: int | None) -> None:
        rows = sorted(rows or [])
        self.events.append(
            {"action": action, "reason": reason, "count": count if count is not None else len(rows), "rows": rows}
        )

    def drop(self, reason: str, rows: list[int]) -> None:
        """Rows removed from the output."""
        if rows:
            self._add("dropped", reason, rows, None)

    def fix(self, reason: str, rows: list[int]) -> None:
        """Rows kept with a value corrected (e.g. whitespace stripped)."""
        if rows:
            self._add("fixed", reason, rows, None)

    def note(self, reason: str, rows: list[int] | None = None, count: int | None = None) -> None:
        """A defect kept as is (flagged in a column, or harmless), recorded for the reader."""
        if rows or count:
            self._add("noted", reason, rows, count)

    def _total(self, action: str) -> int:
        return sum(e["count"] for e in self.events if e["action"] == action)

    def to_dict(self) -> dict[str, Any]:
        return {
            "rows_read": self.rows_read,
            "rows_dropped": self._total("dropped"),
            "rows_fixed": self._total("fixed"),
            "events": self.events,
        }


@dataclass
class PrepareReport:
    """Per-file reports plus the row count of every prepared table."""

    files: dict[str, FileReport] = field(default_factory=dict)
    tables: dict[str, int] = field(default_factory=dict)

    def file(self, rel_path: str) -> FileReport:
        """The report of ``rel_path`` (created on first use)."""
        return self.files.setdefault(rel_path, FileReport(rel_path))

    def to_dict(self) -> dict[str, Any]:
        return {
            "files": {name: rep.to_dict() for name, rep in sorted(self.files.items())},
            "tables": dict(sorted(self.tables.items())),
        }
