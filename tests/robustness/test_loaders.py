"""Bad input on a synthetic mirror: every defect gives a DataError naming file, row and problem,
and ``prepare`` leaves no ``data/prepared`` behind.

The mirror is built in ``tmp_path`` with the layout of the real one: GBEM-UA QA/probability files
are generated (6 professions × 8 variants), the datasets a test does not corrupt are symlinked to
the real mirror (read in place, never copied).
"""

from __future__ import annotations

import csv
import io
from collections.abc import Callable
from pathlib import Path

import pytest

from biaslab.config import DataConfig, Params
from biaslab.data import DataError, gbem_ua, rubia, winobias
from biaslab.data.prepare import prepare
from biaslab.data.report import PrepareReport

PROFESSIONS = ["автоматник", "лікар", "юрист", "пекар", "водій", "кухар"]
HEADER = ["sentence", "profession", "experience", "is_male", "is_correct", "is_feminitive"]
VARIANTS = [(m, c, f) for c in (True, False) for f in (False, True) for m in (True, False)]
GBEM_FILES = [rel for pair in gbem_ua.FILES.values() for rel in pair]
Rows = list[list[str]]


def gbem_rows(profession: str, cloze: bool, variants=VARIANTS) -> Rows:
    rows = []
    for male, correct, fem in variants:
        who, pron = ("Кандидат", "він") if male else ("Кандидатка", "вона")
        experience = "роботи за фахом" if correct else "відпочинку"
        title = profession + ("иня" if fem else "а")
        if cloze:
            sentence = f"{who} має досвід {experience}. Посаду {title} {pron} BLANK отримав."
        else:
            sentence = f"{who} має досвід {experience}. Чи може {pron} отримати посаду {title}?"
        rows.append([sentence, profession, " " + experience, str(male), str(correct), str(fem)])
    return rows


def to_csv(header: list[str], rows: Rows, newline: str = "\r\n") -> str:
    buf = io.StringIO()
    csv.writer(buf, lineterminator=newline).writerows([header, *rows])
    return buf.getvalue()


def build_mirror(root: Path, real: Path, mutate: Callable[[str, list[str], Rows], tuple] | None = None,
                 encode: Callable[[str, str], bytes] | None = None, synthetic: dict[str, str] | None = None) -> Path:
    """Synthetic GBEM-UA + symlinks to the real mirror; ``mutate(rel, header, rows)`` may alter a file."""
    mirror = root / "mirror"
    for name in ("occugender", "rubia", "crows_pairs", "winobias", "winogender", "genderlex"):
        if not (synthetic and any(k.startswith(name + "/") for k in synthetic)):
            (mirror / name).parent.mkdir(parents=True, exist_ok=True)
            (mirror / name).symlink_to(real / name)
    (mirror / "gbem_ua").mkdir(parents=True)
    (mirror / "gbem_ua" / "gender_words").symlink_to(real / "gbem_ua" / "gender_words")
    for rel in GBEM_FILES:
        rows = [r for p in PROFESSIONS for r in gbem_rows(p, cloze="prob_" in rel)]
        header = list(HEADER)
        if mutate:
            header, rows = mutate(rel, header, rows)
        text = to_csv(header, rows)
        (mirror / rel).parent.mkdir(parents=True, exist_ok=True)
        (mirror / rel).write_bytes(encode(rel, text) if encode else text.encode("utf-8"))
    for rel, text in (synthetic or {}).items():
        (mirror / rel).parent.mkdir(parents=True, exist_ok=True)
        (mirror / rel).write_text(text, encoding="utf-8", newline="")
    return mirror


@pytest.fixture
def env(tmp_path, mirror, monkeypatch):
    """Returns ``run(**build_kwargs)``: build the mirror, run prepare, expect a DataError, check no output."""
    prepared = tmp_path / "out" / "data" / "prepared"

    def run(**kwargs) -> str:
        synthetic_mirror = build_mirror(tmp_path, mirror, **kwargs)
        monkeypatch.setenv("BIASLAB_DATA_DIR", str(synthetic_mirror))
        params = Params(data=DataConfig(prepared_dir=str(prepared), allow_download=False))
        with pytest.raises(DataError) as err:
            prepare(params)
        assert not prepared.exists()
        assert not prepared.parent.exists() or not list(prepared.parent.iterdir())  # no temp dir left
        return str(err.value)

    return run


def only(rel_part: str, fn):
    return lambda rel, header, rows: fn(header, rows) if rel_part in rel else (header, rows)


def test_gbem_missing_column(env):
    def drop_flag(header, rows):
        return header[:-1], [r[:-1] for r in rows]

    msg = env(mutate=only("train_dataset_acc", drop_flag))
    assert "train_dataset_acc.csv" in msg and "missing required column(s) ['is_feminitive']" in msg


def test_gbem_unparseable_boolean(env):
    def bad_bool(header, rows):
        rows[2][4] = "Yes"
        return header, rows

    msg = env(mutate=only("prob_dataset/test", bad_bool))
    assert "prob_dataset/test_dataset.csv, row 3 (line 4), column 'is_correct'" in msg and "'Yes'" in msg


def test_gbem_group_missing_female_feminine_variant(env):
    def drop_variant(header, rows):  # пекар (4th profession) loses its female + feminine-title rows
        keep = [r for r in rows if not (r[1] == "пекар" and r[3] == "False" and r[5] == "True")]
        return header, keep

    msg = env(mutate=only("train", drop_variant))
    assert "train_dataset_acc.csv" in msg and "'пекар'" in msg and "asymmetric" in msg
    assert "row 25" in msg and "lacks: female candidate, relevant experience, feminine job title" in msg


def test_gbem_unknown_incomplete_extra_block_fails(env):
    def extra(rel, header, rows):  # like the known амбасадор block, but for another profession
        if "test" not in rel:
            return header, rows
        return header, rows + [r for r in gbem_rows("лікар", "prob_" in rel) if r[5] == "True"]

    msg = env(mutate=extra)
    assert "test_dataset_acc.csv" in msg and "'лікар'" in msg and "row 49" in msg
    assert "lacks: male candidate, relevant experience, masculine job title" in msg


def test_gbem_acc_prob_misaligned(env):
    def swap(header, rows):
        rows[0], rows[1] = rows[1], rows[0]
        return header, rows

    msg = env(mutate=only("prob_dataset/train", swap))
    assert "prob_dataset/train_dataset.csv, row 1" in msg and "aligned row" in msg


def test_gbem_empty_file(env):
    msg = env(encode=lambda rel, text: b"" if "acc_dataset/test" in rel else text.encode())
    assert "test_dataset_acc.csv: file is empty" in msg


def test_gbem_wrong_encoding(env):
    def latin1(rel, text):
        if "acc_dataset/train" not in rel:
            return text.encode()
        lines = text.split("\r\n")
        return "\r\n".join(lines[:5]).encode() + b"\r\ncaf\xe9," + "\r\n".join(lines[5:]).encode()

    msg = env(encode=latin1)
    assert "train_dataset_acc.csv, line 6: not valid UTF-8 (byte 0xe9" in msg


def test_rubia_malformed_row(env):
    text = "\tpro-trope\tanti-trope\tdomain\ttask_type\r\n0\tОн врач\tОна врач\tgender\tfreeform_job\r\n" \
           "1\tОн водитель\tgender\tfreeform_job\r\n"
    msg = env(synthetic={"rubia/rubia.tsv": text})
    assert "rubia.tsv, row 2 (line 3): expected 5 fields, found 4" in msg


def test_winobias_pair_files_of_different_length(env):
    files = {}
    for t in (1, 2):
        for split in ("dev", "test"):
            for side, pron in (("pro", "he"), ("anti", "she")):
                n = 2 if (t, split, side) == (2, "test", "anti") else 3
                lines = [f"{i} [The chief] met the clerk because [{pron}] was late." for i in range(1, n + 1)]
                files[winobias.PAIR_FILE.format(side=side, type=t, split=split)] = "\n".join(lines) + "\n"
    msg = env(synthetic=files)
    assert "anti_stereotyped_type2.txt.test: has 2 lines but" in msg and "has 3" in msg


# ---------------------------------------------------------------- inputs that must load
def load_gbem(tmp_path, mirror, monkeypatch, **kwargs):
    monkeypatch.setenv("BIASLAB_DATA_DIR", str(build_mirror(tmp_path, mirror, **kwargs)))
    report = PrepareReport()
    return gbem_ua.load(DataConfig(allow_download=False), report).to_pandas(), report


@pytest.mark.parametrize("style", ["bom_crlf", "lf"])
def test_gbem_bom_and_line_endings_load(tmp_path, mirror, monkeypatch, style):
    def encode(rel, text):
        return ("\ufeff" + text).encode() if style == "bom_crlf" else text.replace("\r\n", "\n").encode()

    frame, report = load_gbem(tmp_path, mirror, monkeypatch, encode=encode)
    assert len(frame) == 2 * len(PROFESSIONS) * 8
    assert list(frame.columns)[:2] == ["item_id", "source_file"]
    assert report.file(GBEM_FILES[0]).to_dict()["rows_fixed"] == len(PROFESSIONS) * 8  # leading spaces


def test_gbem_known_ambassador_extra_block_is_dropped_and_reported(tmp_path, mirror, monkeypatch):
    def extra(rel, header, rows):
        if "train" not in rel:
            return header, rows
        rows = rows + gbem_rows("амбасадор", "prob_" in rel)
        return header, rows + [r for r in gbem_rows("амбасадор", "prob_" in rel) if r[5] == "True"]

    frame, report = load_gbem(tmp_path, mirror, monkeypatch, mutate=extra)
    assert (frame.profession == "амбасадор").sum() == 8  # train only; the 4 extra rows dropped
    dropped = report.file(GBEM_FILES[0]).to_dict()
    assert dropped["rows_dropped"] == 4 and dropped["events"][-1]["rows"] == [57, 58, 59, 60]


def test_rubia_reads_quoted_line_breaks(tmp_path, mirror, monkeypatch):
    text = ('\tpro-trope\tanti-trope\tdomain\ttask_type\r\n0\t"Он врач.\r\nОн умный"\t"Она врач. Она умная"\t'
            "gender\tfreeform_job\r\n1\tОн\tОн\tlgbtq\tfreeform_repres\r\n")
    mirror_dir = build_mirror(tmp_path, mirror, synthetic={"rubia/rubia.tsv": text})
    monkeypatch.setenv("BIASLAB_DATA_DIR", str(mirror_dir))
    report = PrepareReport()
    frame = rubia.load(DataConfig(allow_download=False), report).to_pandas()
    assert frame["pro"].tolist() == ["Он врач. Он умный", "Он"]
    assert frame["is_defective"].tolist() == [False, True]  # the identical pair is kept, flagged (authors score it)
    reasons = {e["reason"]: e["rows"] for e in report.file(rubia.FILE).events}
    assert reasons["pro-trope and anti-trope sentences are identical; kept with is_defective=True (rubia option "
                   "drop_defective leaves it out)"] == [2]
