"""Bolukbasi-style embedding debiasing of an LM's input embeddings (variants ``soft`` and ``hard``).

Pipeline of the edit, one module per step::

    words.py     surface forms of a word and their token ids (with / without a leading space)
    subspace.py  gender subspace: per-pair centred differences -> PCA -> orthonormal basis B [k, d]
    targets.py   which words are edited: professions (soft) + candidate/pronoun words (hard)
    spans.py     where target words occur in a batch of input ids (span matching)
    edit.py      e <- e - B^T (B e) on target rows: stored as the edited rows alone (the default) or written
                 into a checkpoint copy (a tied output head untied first)
    hook.py      the same projection applied at run time, only at target-word positions (reversible)
    coverage.py  how much of the evaluation text an edit touches (the shared sub-word caveat)
    fit.py       orchestration for the ``edit_embeddings`` stage: writes ``models/<variant>/``

``biaslab.models.load.load_variant_model`` puts the rows into the base when a variant directory holds
``embedding_rows.safetensors`` (:data:`ROWS_FILE`) and calls :func:`attach_hook_from_dir` when it holds
``embedding_hook.safetensors``. See docs/embedding_debias.md.
"""

from biaslab.models.embedding_hook import HOOK_FILE, attach_hook, attach_hook_from_dir
from biaslab.models.embedding_rows import ROWS_FILE

__all__ = ["HOOK_FILE", "ROWS_FILE", "attach_hook", "attach_hook_from_dir"]
