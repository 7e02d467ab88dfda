"""Held-out text for the ``lm_quality`` benchmark ("do no harm": language-modelling quality per language).

Default (``data.lm_heldout.texts_dir: null``): text of the pretraining corpora that the default model never
trained on, **one held-out document per corpus document** that has such text, without changing what the
model trains on (``model.pretrain`` is read, never changed):

* ``origin = "validation"`` - a whole document ``model.pretrain`` holds out of training
  (``validation_documents``, same corpus folder, seed and split function);
* ``origin = "untrained_tail"`` - a training document whose training text is only a prefix (the
  ``chars_per_language`` budget shared among documents, :func:`biaslab.data.corpus.take_balanced`): the
  rest of it, which no training batch contains.

Per language the model trains on ``take_balanced(train documents, chars_per_language)`` exactly as
:mod:`biaslab.pretrain` computes it; every held-out text is checked to be disjoint from that prefix
(:func:`held_out_documents`). At most ``max_chars`` characters per language are scored, shared equally
among the held-out documents (each contributes the start of its held-out part). With the default params:
en 23 documents (2 validation + 21 untrained tails: the English corpus has 23 novels in all), uk 64 (all
validation: the Ukrainian corpus is smaller than the budget, so every training document is trained on
whole), ru 143 (8 + 135). A hub model's held-out text is this pinned text set. ``texts_dir`` names your own
text set instead: a folder in the corpora layout (``<lang>/<lang>_corpus.txt`` + ``MANIFEST.tsv``), every
document used (``origin = "texts_dir"``), at most ``max_chars`` characters per language.

Texts are cut into chunks of at most ``chunk_chars`` characters at line breaks (a longer line at its
last space), one row per chunk: ``language``, ``document`` (index of the held-out document within the
language), ``chunk`` (index within the document), ``source`` (the corpus file), ``origin``, ``text``.
:mod:`biaslab.data.splits` assigns **whole documents** to the selection or the test set, and
``lm_quality`` bootstraps over documents.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from biaslab.config import Params
from biaslab.data.errors import DataError
from biaslab.data.report import PrepareReport

if TYPE_CHECKING:
    import datasets


def chunks(text: str, chunk_chars: int) -> list[str]:
    """Lines joined up to ``chunk_chars`` characters; a longer line is cut at spaces (or hard, if none)."""
    out, current = [], ""
    for line in (ln.strip() for ln in text.split("\n")):
        while len(line) > chunk_chars:
            cut = line.rfind(" ", 0, chunk_chars)
            cut = cut if cut > 0 else chunk_chars
            if current:
                out.append(current)
                current = ""
            out.append(line[:cut].strip())
            line = line[cut:].strip()
        if not line:
            continue
        if current and len(current) + 1 + len(line) > chunk_chars:
            out.append(current)
            current = ""
        current = f"{current}\n{line}" if current else line
    if current:
        out.append(current)
    return [c for c in out if c]


DUPLICATE_LINE_CHARS = 40  # a chunk with a line this long that the training text also contains is dropped


def held_out_documents(corpus_dir, language: str, chars_per_language: int, n_validation: int,
                       seed: int) -> tuple[list[tuple[str, str, str]], str]:
    """``[(source, origin, held-out text)]`` of one language: the validation documents whole, and of every
    training document the text after its training prefix (see the module docstring); and the training text
    itself (joined). Raises if a held-out tail overlaps its prefix (it cannot, by construction: the check
    guards a change of the corpus code).
    """
    from biaslab.data.corpus import CorpusError, read_documents, split_documents, take_balanced

    train, validation = split_documents(read_documents(corpus_dir, language), n_validation, seed)
    trained = take_balanced(train, chars_per_language)  # exactly what biaslab.pretrain trains on
    out = [(d.source_path, "validation", d.text) for d in validation]
    j = 0
    for doc in train:
        prefix = ""
        if j < len(trained) and doc.text.startswith(trained[j]):
            prefix, j = trained[j], j + 1
        tail = doc.text[len(prefix):].strip("\n")
        if tail:
            if prefix and (tail in prefix or prefix.endswith(tail)):
                raise CorpusError(f"{doc.source_path}: held-out tail overlaps its training prefix")
            out.append((doc.source_path, "untrained_tail", tail))
    if j != len(trained):
        raise CorpusError(f"language {language!r}: {len(trained) - j} training prefix(es) not matched to a document")
    return out, "\n".join(trained)


def repeats_training(chunk: str, training_text: str) -> bool:
    """A line of at least :data:`DUPLICATE_LINE_CHARS` characters of ``chunk`` occurs verbatim in the training
    text: a passage another document repeats (a novel's table of contents, a text two essays of the Ukrainian
    corpus both quote). Such a chunk is dropped: the model may have learnt it."""
    return any(len(line) >= DUPLICATE_LINE_CHARS and line in training_text for line in chunk.split("\n"))


def load(params: Params, report: PrepareReport | None = None) -> datasets.Dataset:
    """The held-out chunks of every language in ``data.lm_heldout.languages``."""
    import datasets

    from biaslab.data import sources
    from biaslab.data.corpus import CorpusError, Document, read_documents, take_balanced

    cfg, pretrain = params.data.lm_heldout, params.model.pretrain
    report = report if report is not None else PrepareReport()
    rows = []
    corpus_dir = None
    if cfg.texts_dir is None:  # the mirror's corpora, else rebuilt from their pinned sources
        corpus_dir = pretrain.corpus_dir or sources.corpus_dir(params.data, cfg.languages)
    origin = str(cfg.texts_dir or corpus_dir)
    texts: dict[str, list[tuple[str, str, str]]] = {}
    training: dict[str, str] = {}
    try:
        for lang in cfg.languages:
            if corpus_dir is not None:
                n_val = pretrain.validation_documents.get(lang, 0) if isinstance(pretrain.validation_documents, dict) \
                    else pretrain.validation_documents
                docs, training[lang] = held_out_documents(corpus_dir, lang, pretrain.chars_per_language, n_val,
                                                          pretrain.seed)
            else:
                docs = [(d.source_path, "texts_dir", d.text) for d in read_documents(cfg.texts_dir, lang)]
            parts = take_balanced([Document(lang, src, text) for src, _, text in docs], cfg.max_chars)
            kept = _aligned(docs, parts)  # take_balanced keeps document order, dropping only empty parts
            texts[lang] = [(src, kind, part) for (src, kind, _), part in zip(kept, parts)]
    except CorpusError as exc:
        raise DataError(origin, str(exc)) from None
    for lang, docs in texts.items():
        n, dropped = 0, []
        for document, (source, kind, text) in enumerate(docs):
            for i, chunk in enumerate(chunks(text, cfg.chunk_chars)):
                if lang in training and repeats_training(chunk, training[lang]):
                    dropped.append(n + len(dropped) + 1)  # 1-based chunk number before dropping
                    continue
                rows.append({"language": lang, "document": document, "chunk": i, "source": source, "origin": kind,
                             "text": chunk})
                n += 1
        if n == 0:
            raise DataError(origin, f"no held-out text for language {lang!r}")
        entry = report.file(f"lm_heldout/{lang}")
        entry.rows_read = n + len(dropped)
        entry.drop(f"chunk with a line of >= {DUPLICATE_LINE_CHARS} characters also in the training text", dropped)
    return datasets.Dataset.from_list(rows)


def _aligned(docs: list[tuple[str, str, str]], parts: list[str]) -> list[tuple[str, str, str]]:
    """The document each of ``take_balanced``'s ``parts`` is the start of, in order."""
    out, i = [], 0
    for part in parts:
        while i < len(docs) and not docs[i][2].startswith(part):
            i += 1
        if i == len(docs):
            raise DataError("lm_heldout", "a held-out text part matches no document (take_balanced changed?)")
        out.append(docs[i])
        i += 1
    return out
