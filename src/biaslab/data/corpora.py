"""Rebuild the pretraining corpora from their pinned GitHub sources, byte for byte as the mirror has them.

Each language's ``corpora/<lang>/<lang>_corpus.txt`` + ``MANIFEST.tsv`` (see the mirror's ``corpora/SOURCE.md``)
was built from one public repository at one commit: the files listed in ``specs/corpora/<lang>.tsv``
(``source_path``, ``source_bytes``, ``git_blob_id`` — the first three columns of the mirror's manifest), each
cleaned by the rules its ``SOURCE.md`` states (:func:`clean_document`) and joined with one blank line between
documents. A rebuild downloads every listed file at the pinned commit, checks its size and git blob id (the
repository's own content address), cleans and joins them, writes the manifest with the line offsets, and
checks the sha256 of both results against the mirror's (:data:`RECIPES`): a rebuilt corpus is the mirror's
corpus or an error. ``tests/unit/test_remote_sources.py`` rebuilds a corpus from a local fake remote, and
``docs/data.md`` records the check that the real sources reproduce all three mirror corpora.
"""

from __future__ import annotations

import csv
import hashlib
import html
import io
import re
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from importlib import resources

MANIFEST_HEADER = ("source_path", "source_bytes", "git_blob_id", "start_line", "n_lines", "n_chars")
_C0 = re.compile(r"[\x00-\x08\x0b-\x1f]")  # C0 controls except tab and line feed (tab becomes a space first)


@dataclass(frozen=True)
class SourceFile:
    """One input file of a corpus: its path in the repository, size and git blob id at the pinned commit."""

    path: str
    size: int
    git_blob_id: str

    def verify(self, payload: bytes) -> str | None:
        """``None`` if ``payload`` is this file, else what differs."""
        if len(payload) != self.size:
            return f"{len(payload)} bytes, expected {self.size}"
        blob = hashlib.sha1(b"blob %d\0" % len(payload) + payload).hexdigest()  # noqa: S324 (git's object id)
        return None if blob == self.git_blob_id else f"git blob id {blob}, expected {self.git_blob_id}"


@dataclass(frozen=True)
class CorpusRecipe:
    """How one language's corpus was made: repository, commit, cleaning rules, and the sha256 of the results."""

    language: str
    repo: str
    commit: str
    corpus_sha256: str
    manifest_sha256: str
    html_entities: bool = False  # decode HTML character references (&#234;) before anything else
    to_space: str = "\t\u00a0"  # characters replaced by a space
    removed: str = ""  # characters deleted (besides C0 controls)
    ending: str = "\n"  # after the last document
    files: tuple[SourceFile, ...] | None = None  # None: the committed specs/corpora/<lang>.tsv

    @property
    def corpus_file(self) -> str:
        return f"corpora/{self.language}/{self.language}_corpus.txt"

    @property
    def manifest_file(self) -> str:
        return f"corpora/{self.language}/MANIFEST.tsv"

    def sources(self) -> list[SourceFile]:
        """The input files in corpus order (``files``, else the committed ``specs/corpora/<lang>.tsv``)."""
        if self.files is not None:
            return list(self.files)
        text = resources.files("biaslab.data").joinpath("specs", "corpora", f"{self.language}.tsv").read_text("utf-8")
        rows = csv.DictReader(io.StringIO(text), delimiter="\t", quoting=csv.QUOTE_NONE)
        return [SourceFile(r["source_path"], int(r["source_bytes"]), r["git_blob_id"]) for r in rows]


RECIPES: dict[str, CorpusRecipe] = {
    "en": CorpusRecipe(
        "en", "computationalstylistics/100_english_novels", "143e601875d70e195f2cc5ebd8b034609271194d",
        corpus_sha256="a90de838358e5f48f0e2c62e918cc9655344d58f876b710d2e8396c29c370ee4",
        manifest_sha256="1d3e04745419cd35a4a8612443ea83730d47b147ab4b66ce9ddc46acb6a387bf",
    ),
    "ru": CorpusRecipe(
        "ru", "d0rj/RusLit", "4509680428729da225a73a22008133660f92bb7e",
        corpus_sha256="60aceeee461c0ad667a70eef81a6409756d8a0f6f6907a89f9516fae72cdccdf",
        manifest_sha256="fee03aea5810158f6c3d04813dc52fb590beafbaf233da1df091e2c850a116fa",
        html_entities=True, to_space="\x7f\t\u00a0",  # DEL is used as a space in the source
    ),
    "uk": CorpusRecipe(
        "uk", "grammarly/ua-gec", "4757f72f192c4a41e4c8fb1d9690a948f87cf6d6",
        corpus_sha256="eb37f68d211a9f49b319a8d6664a81094e9b3e8a5600f8061fd0611b39c692a3",
        manifest_sha256="e60fbbcaf0979ac2656ff0c33a910b86745fcfa8a6215dff3f64c82b349cb452",
        to_space="\t\u00a0\u200a\u2800", removed="\u200b",  # hair space and braille blank; zero-width space
        # the mirror file ends with the blank line that separated the train split from the test documents
        # removed after the first build (UA-GEC's README reserves its test split for GEC scores)
        ending="\n\n",
    ),
}


def clean_document(raw: bytes, recipe: CorpusRecipe) -> str:
    """One source file as it appears in the corpus (the processing of the language's ``SOURCE.md``).

    UTF-8 without BOM; CRLF → LF; HTML references decoded (ru); listed characters → space or removed; C0
    controls removed; every line stripped; runs of blank lines collapsed to one; no blank line at either end.
    """
    text = raw.decode("utf-8").removeprefix("\ufeff").replace("\r\n", "\n").replace("\r", "\n")
    if recipe.html_entities:
        text = html.unescape(text)
    text = text.translate({ord(c): " " for c in recipe.to_space} | {ord(c): None for c in recipe.removed})
    lines: list[str] = []
    for line in _C0.sub("", text).split("\n"):
        line = line.strip()
        if line or (lines and lines[-1]):
            lines.append(line)
    while lines and not lines[-1]:
        lines.pop()
    return "\n".join(lines)


def assemble(recipe: CorpusRecipe, payloads: Mapping[str, bytes]) -> dict[str, bytes]:
    """``{corpus_file: bytes, manifest_file: bytes}`` from the raw bytes of every source (keyed by path).

    Raises ``ValueError`` naming the first source that is missing, empty after cleaning, or not the pinned file.
    """
    documents, rows, start = [], ["\t".join(MANIFEST_HEADER)], 1
    for source in recipe.sources():
        if source.path not in payloads:
            raise ValueError(f"{recipe.repo}@{recipe.commit}:{source.path}: not downloaded")
        problem = source.verify(payloads[source.path])
        if problem:
            raise ValueError(f"{recipe.repo}@{recipe.commit}:{source.path}: {problem}")
        document = clean_document(payloads[source.path], recipe)
        if not document:
            raise ValueError(f"{recipe.repo}@{recipe.commit}:{source.path}: no text left after cleaning")
        n_lines = document.count("\n") + 1
        rows.append(f"{source.path}\t{source.size}\t{source.git_blob_id}\t{start}\t{n_lines}\t{len(document)}")
        documents.append(document)
        start += n_lines + 1  # one blank line between documents
    return {
        recipe.corpus_file: ("\n\n".join(documents) + recipe.ending).encode("utf-8"),
        recipe.manifest_file: ("\n".join(rows) + "\n").encode("utf-8"),
    }


def check_outputs(recipe: CorpusRecipe, outputs: Mapping[str, bytes]) -> None:
    """Raise ``ValueError`` unless both rebuilt files have the mirror's sha256."""
    for rel, expected in ((recipe.corpus_file, recipe.corpus_sha256), (recipe.manifest_file, recipe.manifest_sha256)):
        digest = hashlib.sha256(outputs[rel]).hexdigest()
        if digest != expected:
            raise ValueError(f"{rel}: rebuilt file has sha256 {digest}, expected {expected} (the mirror's)")


def languages(names: Sequence[str] | None = None) -> list[CorpusRecipe]:
    """The recipes of ``names`` (all when ``None``), with an error naming an unknown language."""
    names = list(RECIPES) if names is None else list(names)
    unknown = [n for n in names if n not in RECIPES]
    if unknown:
        raise ValueError(f"no pinned corpus source for language(s) {unknown}; known: {sorted(RECIPES)}")
    return [RECIPES[n] for n in names]
