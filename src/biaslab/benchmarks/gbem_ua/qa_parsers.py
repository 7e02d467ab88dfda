"""Turn a causal LM's reaction to a yes/no question into a yes/no answer (GBEM-UA QA set).

Two parsers, chosen by the benchmark option ``qa_parser``:

* ``logprob`` (default, offline, no second model): answer *yes* iff
  ``log P(yes) > log P(no)`` where ``P(yes)`` is the probability that the next words after the prompt
  are `` так`` - summed over the surface forms `` так`` and `` Так`` when ``capitalisation="both"``
  (the default: an instruction-following model often answers with a capital letter, and the paper's
  embedding parser treats "Так" and "так" alike); likewise `` ні`` / `` Ні``. A multi-token form is
  scored as the product of its token probabilities (one :class:`~biaslab.scoring.requests.Request`
  per form, the engine's ``loglikelihood``). Ties count as *no*.
* ``embedding`` (the paper's parser, as the authors' code at FairLMs 9b29344 runs it): greedily generate
  a few tokens (5), lower-case the generated text, embed it and the words "так" and "ні" with a sentence
  encoder, answer *yes* iff the answer's cosine similarity to "так" is strictly greater than to "ні"
  (ties count as *no*: their ``if yes_similarity > no_similarity``; the paper's formula writes ``>=``,
  the code decides). The paper used ``intfloat/multilingual-e5-large`` through sentence-transformers
  (mean pooling, no "query: " prefix). History of their parser: until 2024-12
  (``metrics/acc_metric/acc_metric.py``) it embedded text with the evaluated LM's own last hidden state;
  7d158a6 (2025-03-01) switched to generation + multilingual-e5 without lower-casing; 9b29344
  (2025-03-29, the code behind the published results) added ``.lower()``. Any Hugging Face encoder
  directory works here: :class:`SentenceEncoder` mean-pools ``AutoModel``'s last hidden state. Their
  generation re-tokenises the decoded text at each of the 5 steps; ours is token-level greedy decoding
  (the same tokens unless decoding and re-encoding a prefix changes its tokens).

Every request of a run goes to the engine in one call (one ``loglikelihood`` call, or one ``generate``
call), never one call per item.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass

import numpy as np
import pandas as pd

from biaslab.scoring.requests import Request

YES_WORD, NO_WORD = "так", "ні"
CAPITALISATIONS = ("both", "lower")


def answer_forms(capitalisation: str) -> tuple[tuple[str, ...], tuple[str, ...]]:
    """The continuations whose probabilities are summed for *yes* and for *no*."""
    if capitalisation not in CAPITALISATIONS:
        raise ValueError(f"qa_capitalisation must be one of {CAPITALISATIONS}, got {capitalisation!r}")
    words = [(YES_WORD,), (NO_WORD,)]
    if capitalisation == "both":
        words = [(YES_WORD, YES_WORD.capitalize()), (NO_WORD, NO_WORD.capitalize())]
    yes, no = ([f" {w}" for w in forms] for forms in words)
    return tuple(yes), tuple(no)


def parse_by_logprob(lm, prompts: Sequence[str], capitalisation: str = "both", desc: str | None = None) -> pd.DataFrame:
    """Columns ``logprob_yes``, ``logprob_no`` (log of the summed form probabilities), ``answer_yes``.

    Requests are laid out prompt-major: ``[p0·yes0, p0·yes1, p0·no0, p0·no1, p1·yes0, ...]``.
    """
    yes_forms, no_forms = answer_forms(capitalisation)
    forms = yes_forms + no_forms
    requests = [Request(prompt, form) for prompt in prompts for form in forms]
    scores = lm.loglikelihood(requests, desc=desc) if requests else []
    logprobs = np.array([s.logprob for s in scores], dtype=float).reshape(len(prompts), len(forms))
    lp_yes = np.logaddexp.reduce(logprobs[:, : len(yes_forms)], axis=1)
    lp_no = np.logaddexp.reduce(logprobs[:, len(yes_forms) :], axis=1)
    return pd.DataFrame({"logprob_yes": lp_yes, "logprob_no": lp_no, "answer_yes": lp_yes > lp_no})


@dataclass
class SentenceEncoder:
    """Mean-pooled, L2-normalised sentence embeddings from any Hugging Face encoder directory.

    ``embedding = Σ_t mask_t · h_t / Σ_t mask_t`` over the last hidden state ``h [B, T, H]`` - the
    pooling multilingual-e5 and sentence-transformers' default models use.
    """

    path: str
    batch_size: int = 32
    max_length: int = 512

    def __post_init__(self) -> None:
        from transformers import AutoModel, AutoTokenizer

        self.tokenizer = AutoTokenizer.from_pretrained(self.path)
        self.model = AutoModel.from_pretrained(self.path, trust_remote_code=False, use_safetensors=True)
        self.model.eval()

    def encode(self, texts: Sequence[str]) -> np.ndarray:
        """``[N, H]`` unit-norm embeddings, in input order."""
        import torch

        chunks = []
        with torch.inference_mode():
            for start in range(0, len(texts), self.batch_size):
                batch = self.tokenizer(
                    list(texts[start : start + self.batch_size]),
                    padding=True,
                    truncation=True,
                    max_length=self.max_length,
                    return_tensors="pt",
                )
                hidden = self.model(**batch).last_hidden_state.float()  # [B, T, H]
                mask = batch["attention_mask"].unsqueeze(-1).float()  # [B, T, 1]
                pooled = (hidden * mask).sum(1) / mask.sum(1).clamp(min=1.0)  # [B, H]
                chunks.append(torch.nn.functional.normalize(pooled, dim=-1).numpy())
        return np.concatenate(chunks) if chunks else np.zeros((0, 0))


def parse_by_embedding(
    lm, prompts: Sequence[str], encoder: SentenceEncoder, max_new_tokens: int = 5, desc: str | None = None,
    lowercase: bool = True,
) -> pd.DataFrame:
    """Columns ``answer_text`` (as generated), ``sim_yes``, ``sim_no`` (cosine), ``answer_yes`` (strict >).

    ``lowercase`` (the authors' ``get_sentence_embedding``: ``encode([sentence.lower()])``) lower-cases the
    answer and the reference words before embedding.
    """
    answers = list(lm.generate(list(prompts), max_new_tokens=max_new_tokens, desc=desc)) if prompts else []
    fold = (lambda text: text.lower()) if lowercase else (lambda text: text)
    reference = encoder.encode([fold(YES_WORD), fold(NO_WORD)])  # [2, H]
    embedded = encoder.encode([fold(a) for a in answers]) if answers else np.zeros((0, reference.shape[1]))
    sims = embedded @ reference.T  # unit vectors: dot product = cosine, [N, 2]
    return pd.DataFrame(
        {"answer_text": answers, "sim_yes": sims[:, 0], "sim_no": sims[:, 1], "answer_yes": sims[:, 0] > sims[:, 1]}
    )
