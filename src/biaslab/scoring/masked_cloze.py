"""Where a sentence's last word sits in a masked LM's tokens (ClozeLast for masked LMs).

``P([MASK] = pronoun | sentence with its last word's pronoun masked)``: leading/trailing punctuation
of the last word stays in the sentence, the special tokens and any prompt prefix are kept; a pronoun
of several tokens gets all of them masked at once (:meth:`MaskedScorer.masked_token_logprobs`).
"""

from __future__ import annotations

PUNCTUATION = ".,;:!?\"'"


def split_pronoun(word: str) -> tuple[str, str, str]:
    """``'"him.'`` -> ``('"', 'him', '.')``: leading punctuation, the pronoun, trailing punctuation."""
    core = word.strip(PUNCTUATION)
    if not core:
        raise ValueError(f"last word {word!r} has no letters to mask")
    lead = word[: len(word) - len(word.lstrip(PUNCTUATION))]
    return lead, core, word[len(word.rstrip(PUNCTUATION)):]


def masked_cloze_job(scorer, context: str, word: str) -> tuple[list[int], list[int], list[int]]:
    """Token ids of ``context + " " + word``, the positions of the pronoun's tokens, and those tokens.

    The pronoun (``word`` without surrounding punctuation) is located from the end of the sentence:
    ``A = encode(context [+ " " + lead])``, ``B = encode(... + pronoun)``, ``C = encode(sentence)``;
    its tokens are ``B[len(A):]`` and must be a prefix-consistent slice of ``C``, i.e. tokenisation must
    not merge the pronoun with its neighbours (an error otherwise). Located from the end, so a
    prompt prefix in front of the sentence does not matter.
    """
    from biaslab.scoring.tokenization import encode

    lead, core, trail = split_pronoun(word)
    before = f"{context} {lead}" if lead else context
    between = f"{context} {lead}{core}"
    sentence = between + trail
    tok = scorer.tokenizer
    a, b, c = encode(tok, before), encode(tok, between), encode(tok, sentence)
    ids = scorer.encode([sentence])[0]
    text_positions = scorer.scorable_positions(ids)
    tail = len(c) - len(a)  # pronoun + trailing punctuation tokens
    n_trail = len(c) - len(b)
    if (len(b) <= len(a) or b[: len(a)] != a or c[: len(b)] != b or tail > len(text_positions)
            or [ids[p] for p in text_positions[len(text_positions) - tail:]] != c[len(a):]):
        raise ValueError(f"cannot locate the tokens of the pronoun {core!r} in {sentence!r}: the masked LM's "
                         "tokenizer merges it with the neighbouring text")
    positions = text_positions[len(text_positions) - tail: len(text_positions) - n_trail]
    return ids, positions, b[len(a):]
