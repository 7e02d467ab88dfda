"""Strict text/CSV reading: encodings, line endings, columns, booleans (synthetic files)."""

from __future__ import annotations

import pytest

from biaslab.data.errors import DataError
from biaslab.data.tabular import read_lines, read_table


def write(tmp_path, name, data: bytes):
    path = tmp_path / name
    path.write_bytes(data)
    return path


def test_bom_and_crlf_are_accepted(tmp_path):
    path = write(tmp_path, "a.csv", "\ufeffa,b\r\nx,True\r\ny,False".encode())
    table = read_table(path, ("a", "b"))
    assert table.header == ["a", "b"]
    assert [table.parse_bool(r, "b") for r in table] == [True, False]
    assert [r.number for r in table] == [1, 2] and [r.line for r in table] == [2, 3]


def test_quoted_field_with_line_break_keeps_row_and_line_numbers(tmp_path):
    path = write(tmp_path, "a.tsv", b'id\ttext\r\n1\t"two\r\nlines"\r\n2\tok\r\n')
    table = read_table(path, ("id", "text"), delimiter="\t")
    assert len(table) == 2
    assert table.rows[0]["text"] == "two\r\nlines"
    assert (table.rows[1].number, table.rows[1].line) == (2, 4)


@pytest.mark.parametrize("value", ["true", "TRUE", "1", "", "yes"])
def test_boolean_other_than_true_false_names_file_row_column_value(tmp_path, value):
    path = write(tmp_path, "b.csv", f"a,flag\nx,True\ny,{value}\n".encode())
    table = read_table(path, ("a", "flag"))
    table.parse_bool(table.rows[0], "flag")
    with pytest.raises(DataError) as err:
        table.parse_bool(table.rows[1], "flag")
    msg = str(err.value)
    assert "b.csv" in msg and "row 2 (line 3)" in msg and "'flag'" in msg and repr(value) in msg


def test_missing_column_is_named(tmp_path):
    path = write(tmp_path, "c.csv", b"a,b\n1,2\n")
    with pytest.raises(DataError, match=r"c\.csv.*missing required column\(s\) \['z'\]"):
        read_table(path, ("a", "z"))


def test_wrong_field_count_names_row(tmp_path):
    path = write(tmp_path, "d.csv", b"a,b\n1,2\n3\n")
    with pytest.raises(DataError, match=r"d\.csv, row 2 \(line 3\): expected 2 fields, found 1"):
        read_table(path, ("a", "b"))


@pytest.mark.parametrize("data", [b"", b"\r\n\n  ", b"a,b\r\n"])
def test_empty_file_or_header_only(tmp_path, data):
    path = write(tmp_path, "e.csv", data)
    with pytest.raises(DataError, match=r"e\.csv.*(file is empty|no data rows)"):
        read_table(path, ("a", "b"))


def test_latin1_bytes_are_reported_with_line(tmp_path):
    path = write(tmp_path, "f.csv", "a,b\nok,1\ncaf\u00e9,2\n".encode("latin-1"))
    with pytest.raises(DataError, match=r"f\.csv, line 3: not valid UTF-8 \(byte 0xe9"):
        read_table(path, ("a", "b"))


def test_read_lines_without_trailing_newline(tmp_path):
    path = write(tmp_path, "g.txt", b"tailor\r\ndriver")
    assert read_lines(path) == ["tailor", "driver"]
    assert read_lines(write(tmp_path, "h.txt", b"a\nb\n")) == ["a", "b"]
