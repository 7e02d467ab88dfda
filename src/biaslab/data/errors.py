"""The one exception for bad input data, with a message that says where and what.

Every loader raises :class:`DataError` naming the file, the row (1-based *data* row, header not
counted) or line, the column and the problem, so a user can open the file and fix it.
"""

from __future__ import annotations

import os

from biaslab.errors import BiaslabError


class DataError(BiaslabError, ValueError):
    """A raw data file is missing, unreadable, or violates its documented format."""

    def __init__(
        self,
        file: str | os.PathLike[str],
        problem: str,
        *,
        row: int | None = None,
        line: int | None = None,
        column: str | None = None,
    ) -> None:
        self.file, self.problem, self.row, self.line, self.column = str(file), problem, row, line, column
        where = [self.file]
        if row is not None:
            where.append(f"row {row}" + (f" (line {line})" if line is not None else ""))
        elif line is not None:
            where.append(f"line {line}")
        if column is not None:
            where.append(f"column {column!r}")
        super().__init__(": ".join([", ".join(where), problem]))
