"""Read raw text/CSV/TSV files strictly: UTF-8 (BOM allowed), CRLF or LF, required columns.

All loaders go through here, so every file gets the same checks and the same error wording:
an empty file, bytes that are not UTF-8 (with the line they are on), a missing column, a row with
the wrong number of fields, or a boolean other than ``True``/``False`` is a :class:`DataError`
naming the file, the row (1-based data row, header not counted; plus the line it starts on) and
the column. Quoted fields may contain line breaks (RuBia), so CSV/TSV go through :mod:`csv`.
"""

from __future__ import annotations

import csv
import io
from collections.abc import Iterator, Sequence
from dataclasses import dataclass
from pathlib import Path

from biaslab.data.errors import DataError


def read_text(path: Path, label: str | None = None) -> str:
    """The file decoded as UTF-8 with a leading BOM removed; errors name ``label`` (default: path)."""
    label = label or str(path)
    data = path.read_bytes()
    if not data.strip():
        raise DataError(label, "file is empty")
    try:
        return data.decode("utf-8-sig")
    except UnicodeDecodeError as exc:
        line = data[: exc.start].count(b"\n") + 1
        raise DataError(
            label,
            f"not valid UTF-8 (byte 0x{data[exc.start]:02x} at offset {exc.start}); re-save the file as UTF-8",
            line=line,
        ) from None


def read_lines(path: Path, label: str | None = None) -> list[str]:
    """The lines without line endings (index + 1 = line number); a missing final newline is fine."""
    lines = read_text(path, label).replace("\r\n", "\n").replace("\r", "\n").split("\n")
    if lines[-1] == "":
        lines.pop()
    return lines


@dataclass(frozen=True)
class Row:
    """One data row: ``number`` is 1-based (header not counted), ``line`` the line it starts on."""

    number: int
    line: int
    values: dict[str, str]

    def __getitem__(self, column: str) -> str:
        return self.values[column]


@dataclass(frozen=True)
class Table:
    label: str
    header: list[str]
    rows: list[Row]

    def __iter__(self) -> Iterator[Row]:
        return iter(self.rows)

    def __len__(self) -> int:
        return len(self.rows)

    def error(self, row: Row, problem: str, column: str | None = None) -> DataError:
        return DataError(self.label, problem, row=row.number, line=row.line, column=column)

    def parse_bool(self, row: Row, column: str) -> bool:
        """Parse ``True``/``False`` exactly; anything else is an error naming the value."""
        value = row[column]
        if value == "True":
            return True
        if value == "False":
            return False
        raise self.error(row, f"expected True or False, got {value!r}", column)

    def parse_float(self, row: Row, column: str) -> float:
        try:
            return float(row[column])
        except ValueError:
            raise self.error(row, f"expected a number, got {row[column]!r}", column) from None

    def parse_int(self, row: Row, column: str) -> int:
        try:
            return int(row[column])
        except ValueError:
            raise self.error(row, f"expected an integer, got {row[column]!r}", column) from None

    def nonempty(self, row: Row, column: str) -> str:
        value = row[column]
        if not value.strip():
            raise self.error(row, "empty value", column)
        return value


def read_table(
    path: Path,
    required: Sequence[str],
    *,
    delimiter: str = ",",
    label: str | None = None,
    header: Sequence[str] | None = None,
) -> Table:
    """Parse a delimited file with a header row (or the given ``header`` if the file has none).

    The first header cell may be empty (a pandas index column). Blank lines are skipped.
    """
    label = label or str(path)
    reader = csv.reader(io.StringIO(read_text(path, label), newline=""), delimiter=delimiter)
    if header is None:
        try:
            header = next(reader)
        except StopIteration:
            raise DataError(label, "file is empty") from None
        except csv.Error as exc:
            raise DataError(label, f"unreadable header: {exc}", line=1) from None
    header = [h.strip() for h in header]
    missing = [c for c in required if c not in header]
    if missing:
        raise DataError(label, f"missing required column(s) {missing}; found columns {header}", line=1)
    rows: list[Row] = []
    line = reader.line_num + 1
    while True:
        try:
            fields = next(reader)
        except StopIteration:
            break
        except csv.Error as exc:
            raise DataError(label, f"unparseable record: {exc}", row=len(rows) + 1, line=line) from None
        if fields:  # csv yields [] for a blank line
            if len(fields) != len(header):
                raise DataError(
                    label, f"expected {len(header)} fields, found {len(fields)}", row=len(rows) + 1, line=line
                )
            rows.append(Row(len(rows) + 1, line, dict(zip(header, fields, strict=True))))
        line = reader.line_num + 1
    if not rows:
        raise DataError(label, "no data rows after the header")
    return Table(label, list(header), rows)
