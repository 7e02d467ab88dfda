"""No teaching to the test: does a text share a sentence or a long word n-gram with any benchmark text?

Texts are compared as lower-cased word sequences (``\\w+`` with inner apostrophes, Unicode): a
benchmark text *appears* in the planted text when its whole word sequence occurs contiguously in one
planted document, and two texts *overlap* when they share any ``n``-word sequence (default 8). Benchmark
texts are every sentence, prompt and debiasing prompt of the prepared tables
(:func:`benchmark_texts`) plus any extra strings (e.g. the prompt variant's prefixes).
"""

from __future__ import annotations

import json
import re
from collections.abc import Iterable
from dataclasses import dataclass
from pathlib import Path

import pandas as pd

WORD = re.compile(r"\w+(?:['’]\w+)*", re.UNICODE)
N = 8


def words(text: str) -> tuple[str, ...]:
    return tuple(w.lower() for w in WORD.findall(text))


def benchmark_texts(prepared_dir: str | Path) -> dict[str, list[str]]:
    """``{source: texts}`` of every prepared benchmark table (missing tables are skipped)."""
    prepared_dir = Path(prepared_dir)
    columns = {
        "gbem_ua.parquet": ["qa_sentence", "prob_sentence"],
        "rubia.parquet": ["pro", "anti"],
        "crows_pairs.parquet": ["sent_more", "sent_less"],
        "winobias.parquet": ["pro_sentence", "anti_sentence"],
        "winogender.parquet": ["sentence_male", "sentence_female", "sentence_neutral"],
        "genderlex.parquet": ["sent_m", "sent_w"],
        "genderlex_wino.parquet": ["sent_m", "sent_w"],  # optional (prepared when its source is present)
    }
    out: dict[str, list[str]] = {}
    for name, cols in columns.items():
        path = prepared_dir / name
        if path.is_file():
            frame = pd.read_parquet(path, columns=cols)
            out[name] = sorted({str(t) for c in cols for t in frame[c].dropna()})
    gbem = out.get("gbem_ua.parquet")
    if gbem is not None:
        from biaslab.benchmarks.gbem_ua.items import BLANK, NEGATION, QA_PROMPT

        out["gbem_ua.parquet"] = sorted({*gbem, QA_PROMPT, *(t.replace(BLANK, NEGATION) for t in gbem)})
    spec_path, jobs_path = prepared_dir / "occugender_spec.json", prepared_dir / "occugender_jobs.parquet"
    if spec_path.is_file() and jobs_path.is_file():
        spec = json.loads(spec_path.read_text(encoding="utf-8"))
        jobs = pd.read_parquet(jobs_path)["job"].tolist()
        prompts = [t["text"].replace("[JOB]", job) for t in spec["task_prompts"] for job in jobs]
        out["occugender"] = sorted({*prompts, *(p["text"] for p in spec["debiasing_prompts"])})
    return out


@dataclass(frozen=True)
class Overlap:
    source: str
    benchmark_text: str
    shared: str  # the shared word sequence
    kind: str  # "sentence" (whole benchmark text appears) or "ngram"


def find_overlaps(planted: Iterable[str], benchmark: dict[str, list[str]], n: int = N, limit: int = 20) -> list[Overlap]:
    """Up to ``limit`` overlaps between the ``planted`` texts and the ``benchmark`` texts.

    The benchmark side is indexed (whole short texts by length, every ``n``-gram of the longer ones) and
    each planted text is scanned once, so the cost grows with the planted text, not with the product.
    """
    short: dict[int, dict[tuple[str, ...], tuple[str, str]]] = {}
    grams: dict[tuple[str, ...], tuple[str, str]] = {}
    for source, texts in benchmark.items():
        for text in texts:
            seq = words(text)
            if 0 < len(seq) < n:
                short.setdefault(len(seq), {}).setdefault(seq, (source, text))
            for i in range(len(seq) - n + 1):
                grams.setdefault(seq[i : i + n], (source, text))
    lengths = sorted(short)
    found: list[Overlap] = []
    seen: set[tuple[str, str]] = set()
    for text in dict.fromkeys(planted):
        seq = words(text)
        for i in range(len(seq)):
            for k in lengths:
                hit = short[k].get(seq[i : i + k]) if i + k <= len(seq) else None
                if hit and hit not in seen:
                    seen.add(hit)
                    found.append(Overlap(hit[0], hit[1], " ".join(seq[i : i + k]), "sentence"))
            hit = grams.get(seq[i : i + n]) if i + n <= len(seq) else None
            if hit and hit not in seen:
                seen.add(hit)
                found.append(Overlap(hit[0], hit[1], " ".join(seq[i : i + n]), "ngram"))
            if len(found) >= limit:
                return found
    return found
