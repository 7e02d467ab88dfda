"""Held-out text for the ``lm_quality`` benchmark ("do no harm": language-modelling quality per language).

Default (``data.lm_heldout.texts_dir: null``): the default model's own validation documents — the
whole documents ``model.pretrain`` holds out of the pretraining corpora (same corpus folder, same
``validation_documents``, ``validation_chars`` and seed, same split function), so the default model has
never trained on them. For a hub model this is a pinned default text set (the corpora mirror is pinned by
commit, see ``corpora/SOURCE.md``). ``texts_dir`` names your own text set instead: a folder in the corpora
layout (``<lang>/<lang>_corpus.txt`` + ``MANIFEST.tsv``), every document used, at most ``max_chars``
characters per language.

Texts are cut into chunks of at most ``chunk_chars`` characters at line breaks (a longer line at its
last space), one row per chunk: ``language``, ``document`` (index of the document's text within the
language), ``chunk`` (index within the document), ``text``.
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


def load(params: Params, report: PrepareReport | None = None) -> datasets.Dataset:
    """The held-out chunks of every language in ``data.lm_heldout.languages``."""
    import datasets

    from biaslab.data import sources
    from biaslab.data.corpus import CorpusError, load_corpus, read_documents, take_balanced

    cfg, pretrain = params.data.lm_heldout, params.model.pretrain
    report = report if report is not None else PrepareReport()
    rows = []
    corpus_dir = None
    if cfg.texts_dir is None:  # the mirror's corpora, else rebuilt from their pinned sources
        corpus_dir = pretrain.corpus_dir or sources.corpus_dir(params.data, cfg.languages)
    origin = str(cfg.texts_dir or corpus_dir)
    try:
        if corpus_dir is not None:
            splits = load_corpus(corpus_dir, cfg.languages, 1, pretrain.validation_documents,
                                 min(cfg.max_chars, pretrain.validation_chars), pretrain.seed)
            texts = {lang: s.validation_texts for lang, s in splits.items()}
        else:
            texts = {}
            for lang in cfg.languages:
                docs = read_documents(cfg.texts_dir, lang)
                texts[lang] = take_balanced(docs, cfg.max_chars)
    except CorpusError as exc:
        raise DataError(origin, str(exc)) from None
    for lang, docs in texts.items():
        n = 0
        for document, text in enumerate(docs):
            for i, chunk in enumerate(chunks(text, cfg.chunk_chars)):
                rows.append({"language": lang, "document": document, "chunk": i, "text": chunk})
                n += 1
        if n == 0:
            raise DataError(origin, f"no held-out text for language {lang!r}")
        report.file(f"lm_heldout/{lang}").rows_read = n
    return datasets.Dataset.from_list(rows)
