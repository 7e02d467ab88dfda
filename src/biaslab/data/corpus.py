"""Read the plain-text pretraining corpora and split them into train / validation *by document*.

Layout (``../shared/datasets/corpora``, see its ``SOURCE.md``)::

    <corpus_dir>/<lang>/<lang>_corpus.txt   documents separated by one blank line
    <corpus_dir>/<lang>/MANIFEST.tsv        one row per document: source_path, source_bytes, git_blob_id,
                                            start_line (1-based), n_lines, n_chars

A document is lines ``start_line .. start_line + n_lines - 1`` joined by ``\\n``; its length must equal
``n_chars`` (checked, so a corpus/manifest mismatch is an error naming the row, never a silent shift).

Why split by document: a held-out paragraph of a novel whose neighbours were trained on measures
memorisation, not language modelling. Whole documents are held out, chosen by a seeded shuffle.

Why *water-filling* when taking ``chars_per_language``: each training document contributes an equal share
of the budget (short documents give all they have, the rest is shared among the longer ones), so 3 M
characters of English come from every training novel instead of from the first three.
"""

from __future__ import annotations

import csv
import os
import random
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path

from biaslab.errors import BiaslabError

MANIFEST_COLUMNS = ("source_path", "source_bytes", "git_blob_id", "start_line", "n_lines", "n_chars")


class CorpusError(BiaslabError, ValueError):
    """A corpus file or its manifest is missing or inconsistent."""


@dataclass(frozen=True)
class Document:
    language: str
    source_path: str
    text: str


@dataclass
class LanguageSplit:
    """One language's training text (budgeted) and held-out validation text (budgeted)."""

    language: str
    train_texts: list[str]
    validation_texts: list[str]
    train_sources: list[str] = field(default_factory=list)
    validation_sources: list[str] = field(default_factory=list)

    @property
    def train_chars(self) -> int:
        return sum(map(len, self.train_texts))

    @property
    def validation_chars(self) -> int:
        return sum(map(len, self.validation_texts))


def corpus_files(corpus_dir: str | os.PathLike[str], language: str) -> tuple[Path, Path]:
    """``(<lang>_corpus.txt, MANIFEST.tsv)`` of one language, with an error naming what is missing."""
    folder = Path(corpus_dir) / language
    text, manifest = folder / f"{language}_corpus.txt", folder / "MANIFEST.tsv"
    for path in (text, manifest):
        if not path.is_file():
            raise CorpusError(f"{path}: corpus file not found (corpus dir {Path(corpus_dir)}, language {language!r})")
    return text, manifest


def read_documents(corpus_dir: str | os.PathLike[str], language: str) -> list[Document]:
    """Every document of one language, in manifest order, cut out by the manifest's line offsets."""
    text_path, manifest_path = corpus_files(corpus_dir, language)
    lines = text_path.read_text(encoding="utf-8").split("\n")
    with manifest_path.open(encoding="utf-8", newline="") as fh:
        reader = csv.DictReader(fh, delimiter="\t", quoting=csv.QUOTE_NONE)
        missing = [c for c in MANIFEST_COLUMNS if c not in (reader.fieldnames or [])]
        if missing:
            raise CorpusError(f"{manifest_path}: header lacks column(s) {', '.join(missing)}")
        documents: list[Document] = []
        previous_end = 1  # first line not yet claimed by a document (1-based)
        for row_no, row in enumerate(reader, start=2):  # row 1 is the header
            where = f"{manifest_path}, row {row_no}"
            try:
                start, n_lines, n_chars = (int(row[c]) for c in ("start_line", "n_lines", "n_chars"))
            except (TypeError, ValueError):
                raise CorpusError(f"{where}: start_line, n_lines and n_chars must be integers") from None
            if start < previous_end or n_lines < 1:
                raise CorpusError(f"{where}, column start_line: document overlaps the previous one or is empty")
            if start - 1 + n_lines > len(lines):
                raise CorpusError(f"{where}: lines {start}..{start + n_lines - 1} run past the end of {text_path}")
            text = "\n".join(lines[start - 1 : start - 1 + n_lines])
            if len(text) != n_chars:
                raise CorpusError(
                    f"{where}, column n_chars: manifest says {n_chars} characters, {text_path} lines "
                    f"{start}..{start + n_lines - 1} hold {len(text)} (corpus and manifest out of sync)"
                )
            documents.append(Document(language, row["source_path"], text))
            previous_end = start + n_lines
    if not documents:
        raise CorpusError(f"{manifest_path}: no documents listed")
    return documents


def split_documents(
    documents: Sequence[Document], n_validation: int, seed: int
) -> tuple[list[Document], list[Document]]:
    """``(train, validation)``: ``n_validation`` whole documents held out by a seeded shuffle.

    Both lists keep manifest order. The shuffle is seeded per language so adding a language does not
    change another language's split.
    """
    if not documents:
        raise CorpusError("cannot split an empty corpus")
    language = documents[0].language
    if n_validation >= len(documents):
        raise CorpusError(
            f"language {language!r}: {n_validation} validation documents requested but the corpus has only "
            f"{len(documents)}; at least one must remain for training"
        )
    order = list(range(len(documents)))
    random.Random(f"{seed}:{language}").shuffle(order)
    held_out = set(order[:n_validation])
    train = [d for i, d in enumerate(documents) if i not in held_out]
    validation = [d for i, d in enumerate(documents) if i in held_out]
    return train, validation


def take_balanced(documents: Sequence[Document], budget: int) -> list[str]:
    """At most ``budget`` characters, shared equally among documents (water-filling), as document prefixes.

    Each prefix is cut back to the last line break inside it (when there is one), so no paragraph is cut
    mid-word. Returns one text per contributing document, in the given order.
    """
    shares = [0] * len(documents)
    remaining, open_docs = budget, sorted(range(len(documents)), key=lambda i: len(documents[i].text))
    while open_docs and remaining > 0:
        fair = max(remaining // len(open_docs), 1)
        i = open_docs.pop(0)  # the shortest document still open
        shares[i] = min(len(documents[i].text), fair)
        remaining -= shares[i]
    texts = []
    for doc, share in zip(documents, shares):
        if share <= 0:
            continue
        text = doc.text[:share]
        if share < len(doc.text) and "\n" in text:
            text = text[: text.rindex("\n")]
        if text:
            texts.append(text)
    return texts


def load_corpus(
    corpus_dir: str | os.PathLike[str],
    languages: Sequence[str],
    chars_per_language: int,
    validation_documents: int | Mapping[str, int],
    validation_chars: int,
    seed: int,
) -> dict[str, LanguageSplit]:
    """Read, split by document, and budget every language: ``{language: LanguageSplit}``."""
    splits: dict[str, LanguageSplit] = {}
    for language in languages:
        if isinstance(validation_documents, Mapping):
            if language not in validation_documents:
                raise CorpusError(f"validation_documents has no entry for language {language!r}")
            n_val = validation_documents[language]
        else:
            n_val = validation_documents
        train, validation = split_documents(read_documents(corpus_dir, language), n_val, seed)
        splits[language] = LanguageSplit(
            language=language,
            train_texts=take_balanced(train, chars_per_language),
            validation_texts=take_balanced(validation, validation_chars),
            train_sources=[d.source_path for d in train],
            validation_sources=[d.source_path for d in validation],
        )
    return splits


def write_corpus(corpus_dir: str | os.PathLike[str], language: str, documents: Sequence[str]) -> Path:
    """Write ``documents`` in the mirror's format (``<lang>_corpus.txt`` + ``MANIFEST.tsv``); returns the folder.

    The inverse of :func:`read_documents`: for building your own corpus (or a test fixture). Documents are
    separated by one blank line; ``source_bytes`` is the UTF-8 size and ``git_blob_id`` is left empty.
    """
    folder = Path(corpus_dir) / language
    folder.mkdir(parents=True, exist_ok=True)
    lines: list[str] = []
    rows = ["\t".join(MANIFEST_COLUMNS)]
    for i, text in enumerate(documents):
        if not text or "\n\n" in text or text != text.strip("\n"):
            raise CorpusError(f"document {i}: must be non-empty with no blank line inside or around it")
        if lines:
            lines.append("")
        start, doc_lines = len(lines) + 1, text.split("\n")
        lines.extend(doc_lines)
        rows.append(f"doc{i:05d}.txt\t{len(text.encode())}\t\t{start}\t{len(doc_lines)}\t{len(text)}")
    (folder / f"{language}_corpus.txt").write_text("\n".join(lines) + "\n", encoding="utf-8")
    (folder / "MANIFEST.tsv").write_text("\n".join(rows) + "\n", encoding="utf-8")
    return folder
