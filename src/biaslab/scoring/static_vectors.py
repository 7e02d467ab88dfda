"""Static word vectors for the ``sim(pronoun, context word)`` term of the ClozeGender score and WEAT.

Two sources, one result type (:class:`WordVectors`, a small ``word -> vector`` table holding only the
words a benchmark asks for):

* :func:`model_vectors` (default, ``vectors: model``): the evaluated model's own *input embeddings*.
  A word's vector is the mean over its sub-tokens, tokenised as the word appears mid-sentence
  (``encode("a " + word)[len(encode("a")):]``, the lm-evaluation-harness split, so byte-level BPE
  gets ``Ġword`` and SentencePiece ``▁word``). The embedding *module* is called (not its
  ``.weight`` read), so a runtime embedding-edit hook is applied to the vectors too.
* :func:`load_vector_file` (``vectors: <path>``, ``vectors_format: glove|fasttext|word2vec``): a text
  file with one ``word v1 … vd`` line per word. ``fasttext`` (``.vec``) and ``word2vec`` (text format)
  start with a ``<count> <dim>`` header line; ``glove`` has none (dim = fields of the first line − 1).
  GloVe 840B has a few words containing spaces, so in glove files the *last* ``dim`` fields are the
  vector and the rest is the word. A line with too few fields, a non-number, or a header that does not
  match is an error naming the file and line. Only requested words are kept, so a 2M-word file costs
  one pass, not gigabytes of memory. (The authors load binary word2vec through gensim; binary files are
  not supported here.)

Lookup: exact word first, then its lowercase form; a word not found is out of vocabulary (``None``).
"""

from __future__ import annotations

from collections.abc import Iterable
from dataclasses import dataclass, field
from pathlib import Path

import numpy as np

from biaslab.errors import BiaslabError

FORMATS = ("glove", "fasttext", "word2vec")


class VectorFileError(BiaslabError, ValueError):
    """A malformed static-vector file: the message names the file and the 1-based line number."""


@dataclass
class WordVectors:
    """A ``word -> vector`` table (float64) with cosine similarity; ``source`` says where it came from."""

    vectors: dict[str, np.ndarray] = field(default_factory=dict)
    source: str = ""

    def get(self, word: str) -> np.ndarray | None:
        vec = self.vectors.get(word)
        if vec is None:
            vec = self.vectors.get(word.lower())
        return vec

    def __contains__(self, word: str) -> bool:
        return self.get(word) is not None

    def similarity(self, a: str, b: str) -> float | None:
        """Cosine similarity of two words, or ``None`` if either is out of vocabulary (or a zero vector)."""
        va, vb = self.get(a), self.get(b)
        if va is None or vb is None:
            return None
        norm = float(np.linalg.norm(va) * np.linalg.norm(vb))
        if norm == 0.0:
            return None
        return float(np.dot(va, vb) / norm)


# ---------------------------------------------------------------------------------------- model vectors
def word_token_ids(tokenizer, word: str) -> list[int]:
    """Sub-token ids of ``word`` as it appears after a space mid-sentence (harness-style context split)."""
    from biaslab.scoring.requests import Request
    from biaslab.scoring.tokenization import encode_request

    return list(encode_request(tokenizer, Request("a", f" {word}")).continuation_ids)


def model_vectors(model, tokenizer, words: Iterable[str]) -> WordVectors:
    """Mean input-embedding vector over each word's sub-tokens (``[n_sub, hidden] -> [hidden]``)."""
    import torch

    from biaslab.scoring.device import input_device

    embedding = model.get_input_embeddings()
    device = input_device(model)  # where the embedding table is: the GPU for a GPU model
    table: dict[str, np.ndarray] = {}
    with torch.inference_mode():
        for word in sorted(set(words)):
            ids = word_token_ids(tokenizer, word)
            rows = embedding(torch.tensor([ids], dtype=torch.long, device=device))[0]  # [n_sub, hidden]
            table[word] = rows.double().mean(dim=0).cpu().numpy()
    return WordVectors(table, source="model input embeddings")


# ----------------------------------------------------------------------------------------- file vectors
def _parse_header(path: Path, line: str) -> tuple[int, int]:
    fields = line.split()
    if len(fields) != 2 or not all(f.isdigit() for f in fields):
        raise VectorFileError(
            f"{path}:1: expected a '<count> <dim>' header line (fastText .vec / word2vec text format), "
            f"got {line[:80]!r}; use vectors_format: glove for files without a header"
        )
    count, dim = int(fields[0]), int(fields[1])
    if dim <= 0:
        raise VectorFileError(f"{path}:1: header dimension must be positive, got {dim}")
    return count, dim


def _parse_vector(path: Path, lineno: int, fields: list[str], dim: int, spaces_in_word: bool) -> tuple[str, np.ndarray]:
    if len(fields) < dim + 1 or (len(fields) > dim + 1 and not spaces_in_word):
        raise VectorFileError(
            f"{path}:{lineno}: expected a word and {dim} numbers, got {len(fields)} field(s)"
        )
    word = " ".join(fields[:-dim])
    try:
        vector = np.asarray([float(x) for x in fields[-dim:]], dtype=np.float64)
    except ValueError as exc:
        raise VectorFileError(f"{path}:{lineno}: non-numeric vector component for word {word!r} ({exc})") from None
    if not np.all(np.isfinite(vector)):
        raise VectorFileError(f"{path}:{lineno}: non-finite vector component for word {word!r}")
    return word, vector


def load_vector_file(path: str | Path, fmt: str, words: Iterable[str] | None = None) -> WordVectors:
    """Read a GloVe / fastText ``.vec`` / word2vec text file, keeping only ``words`` (and their lowercase).

    ``words=None`` keeps every word (small files, tests). Every line is validated, kept or not, so a
    malformed file fails loudly rather than silently losing words.
    """
    path = Path(path)
    if fmt not in FORMATS:
        raise ValueError(f"vectors_format must be one of {FORMATS}, got {fmt!r}")
    if not path.is_file():
        raise FileNotFoundError(f"static vector file not found: {path}")
    wanted = None if words is None else set(words) | {w.lower() for w in words}
    table: dict[str, np.ndarray] = {}
    with path.open(encoding="utf-8", errors="strict") as fh:
        lines = enumerate(fh, start=1)
        dim, expected_count, n_rows = None, None, 0
        if fmt in ("fasttext", "word2vec"):
            try:
                _, header = next(lines)
            except StopIteration:
                raise VectorFileError(f"{path}: empty file") from None
            expected_count, dim = _parse_header(path, header)
        for lineno, line in lines:
            fields = _glove_fields(line) if fmt == "glove" else line.split()
            if not fields:
                continue  # blank line (e.g. trailing newline)
            if dim is None:
                dim = len(fields) - 1
                if dim <= 0:
                    raise VectorFileError(f"{path}:{lineno}: a glove line needs a word and at least one number")
            word, vector = _parse_vector(path, lineno, fields, dim, spaces_in_word=fmt == "glove")
            n_rows += 1
            if wanted is None or word in wanted:
                table.setdefault(word, vector)
    if expected_count is not None and n_rows != expected_count:
        raise VectorFileError(f"{path}: header announces {expected_count} vectors but the file has {n_rows}")
    if n_rows == 0:
        raise VectorFileError(f"{path}: no vectors found")
    return WordVectors(table, source=f"{fmt}:{path}")


def _glove_fields(line: str) -> list[str]:
    # GloVe separates by single spaces; a word may itself contain spaces (840B), handled by the caller
    return line.rstrip("\r\n").rstrip(" ").split(" ") if line.strip() else []


def load_static_vectors(spec: str, fmt: str | None, words: Iterable[str], lm=None) -> WordVectors:
    """Resolve the ``vectors`` option: ``"model"`` (the scorer's ``word_vectors``) or a file path."""
    words = sorted(set(words))
    if spec == "model":
        if lm is None:
            raise ValueError("vectors: model needs the scorer of the evaluated model")
        return lm.word_vectors(words)
    if fmt is None:
        raise ValueError(f"vectors: {spec!r} is a file path, so vectors_format must be one of {FORMATS}")
    return load_vector_file(spec, fmt, words)
