"""The causal engine's log-probabilities at chosen positions: which (row, column) of a forward pass score
which token (:class:`ScoredPositions`), the log-softmax at just those rows (:func:`token_logprobs`), and the
split of a model into decoder and LM head so the head runs only there (:func:`split_lm_head`)."""

from __future__ import annotations

import torch

from biaslab.scoring.device import input_device


class ScoredPositions:
    """The scored tokens of one forward pass: distinct positions, and per token its position index."""

    def __init__(self) -> None:
        self.positions: list[tuple[int, int]] = []  # distinct (row, column), in first-seen order
        self._index: dict[tuple[int, int], int] = {}
        self.position_of: list[int] = []  # per scored token
        self.targets: list[int] = []
        self.owners: list[int] = []  # the member (request) each token belongs to

    def add(self, position: tuple[int, int], target: int, owner: int) -> None:
        index = self._index.setdefault(position, len(self.positions))
        if index == len(self.positions):
            self.positions.append(position)
        self.position_of.append(index)
        self.targets.append(target)
        self.owners.append(owner)


def token_logprobs(
    logits: torch.Tensor, position_of: torch.Tensor, targets: torch.Tensor
) -> tuple[torch.Tensor, torch.Tensor]:
    """Per scored token: ``log softmax(logits[p])[target]`` (float64) and "target is the argmax".

    ``logits [U, V]`` holds one row per distinct position; token ``i`` reads row ``position_of[i]``.
    No ``[U, V]`` log-softmax is written: ``logsumexp`` and ``amax`` (a plain max, several times
    faster than ``argmax`` on CPU) are reductions, and ``argmax`` runs only on rows whose target ties
    the maximum, to keep its first-index rule exactly.
    """
    logits = logits.float()
    picked = logits[position_of, targets]  # [N]
    logprob = picked.double() - torch.logsumexp(logits, dim=-1).double()[position_of]
    greedy = picked >= logits.amax(dim=-1)[position_of]
    if greedy.any():
        tokens = greedy.nonzero().squeeze(1)
        greedy[tokens] = logits[position_of[tokens]].argmax(-1) == targets[tokens]
    return logprob, greedy


@torch.inference_mode()
def split_lm_head(model) -> tuple[torch.nn.Module | None, torch.nn.Module | None]:
    """The model's decoder stack and LM head, when ``logits == head(decoder(x).last_hidden_state)``.

    With the two apart, the engine runs the LM head - the largest matmul of a small model and the
    only vocabulary-sized tensor - on exactly the positions that score a continuation token, instead
    of on every kept column and then copying the wanted rows out. The split is verified on a few tokens
    against the model's own forward (models that scale or soft-cap logits fail it); when it does not
    hold, the engine uses the model's logits (``logits_to_keep``) instead. PEFT wrappers are fine:
    their adapters live inside the decoder's and head's modules.
    """
    base = getattr(model, "get_base_model", lambda: model)()
    try:
        decoder, head = base.get_decoder(), base.get_output_embeddings()
    except (AttributeError, NotImplementedError):
        return None, None
    if decoder is None or head is None or decoder is base:
        return None, None
    vocab = int(getattr(model.config, "vocab_size", 2) or 2)
    ids = (torch.arange(4) % vocab)[None, :].to(input_device(model))
    try:
        want = model(input_ids=ids).logits.float()
        got = head(decoder(input_ids=ids).last_hidden_state).float()
    except Exception:  # noqa: BLE001 - any architecture that does not split this way uses the fallback
        return None, None
    if got.shape != want.shape or not torch.allclose(got, want, atol=1e-5, rtol=1e-5, equal_nan=True):
        return None, None
    return decoder, head
