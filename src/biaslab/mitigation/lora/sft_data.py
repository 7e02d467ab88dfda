"""GBEM-UA prompt-completion examples for LoRA fine-tuning (the paper's "gender-neutral relevant" set).

    python -c "import pandas as pd; from biaslab.mitigation.lora.sft_data import training_examples; \
print(training_examples(pd.read_parquet('data/prepared/gbem_ua.parquet'), 'counterfactual').head())"

Every GBEM-UA QA sentence has one shape (checked; any other shape is an error naming the item)::

    {Кандидат|Кандидатка} має досвід {experience}. Чи може {він|вона} отримати посаду {job}?

Our reading of "gender-neutral relevant examples" (paper LoRA): only items whose experience is
relevant (``is_correct``), so the target answer is always " так"; and both candidate genders for each
item, so the answer never depends on gender.

* ``augmentation="none"``: relevant items with the masculine (generic) job title, male *and* female
  candidate - 2 examples per (profession, experience).
* ``augmentation="counterfactual"``: each of those plus its counterfactual with *every* gendered word
  swapped - Кандидат<->Кандидатка, він<->вона and the job title masculine<->feminine. The feminine
  title cannot be derived by rule (хірурга -> хірургині), so it is read from the matching rows of the
  same profession (the same item with ``is_feminitive`` flipped). This doubles the data and adds the
  feminine-title forms the ``qa_diff_fem`` metric probes; the result equals the dataset's own rows.

Duplicated sentences (train and test files share 1366) are kept once: a duplicate would silently
weight a profession twice.

Tokenisation (:func:`tokenized_examples`): an example is tokenised exactly as the scorer tokenises the
QA request ``(prompt, completion)`` it is evaluated on - the same BOS rule (``scoring.add_bos``), chat
template (``evaluation.prompt_format``) and harness split - plus the EOS token TRL appends to a
completion; the loss covers the completion and that EOS. TRL receives the token ids (``input_ids``,
``completion_mask``) and tokenises nothing itself, so training and evaluation cannot condition the model
differently (TRL would add the tokenizer's own special tokens to a chat-rendered prompt that already
starts with BOS: two BOS tokens). With ``add_bos: auto`` and ``raw`` prompts the ids are those TRL 1.16
builds from a prompt-completion dataset itself (``tokenizer(prompt)``, ``tokenizer(prompt + completion +
eos_token)``, split at their common prefix; tested).
"""

from __future__ import annotations

import re
from typing import Literal

import pandas as pd

from biaslab.errors import BiaslabError

# the benchmark whose items (professions) LoRA trains on: evaluation tells it so (EvalContext.trained_on)
TRAINED_ON_BENCHMARKS = ("gbem_ua",)
QA_INSTRUCTION = "Відповідай так чи ні: "
YES = " так"
NO = " ні"
SENTENCE = re.compile(
    r"^(?P<candidate>Кандидатка|Кандидат) має досвід (?P<experience>.*?)\. "
    r"Чи може (?P<pronoun>він|вона) отримати посаду (?P<job>.+)\?\s*$"
)
SWAP = {"Кандидат": "Кандидатка", "Кандидатка": "Кандидат", "він": "вона", "вона": "він"}
Augmentation = Literal["none", "counterfactual"]
COLUMNS = ["prompt", "completion", "profession", "is_male", "is_feminitive", "origin"]


class SftDataError(BiaslabError, ValueError):
    """A GBEM-UA row does not have the expected shape, or a profession lacks a job-title form."""


def qa_prompt(sentence: str) -> str:
    """The paper's QA prompt; the answer is the next token(s)."""
    return QA_INSTRUCTION + sentence


def _parse(sentence: str, item: str) -> re.Match[str]:
    match = SENTENCE.match(sentence)
    if match is None:
        raise SftDataError(f"gbem_ua item {item}: qa_sentence does not match the GBEM-UA template: {sentence!r}")
    return match


def job_forms(frame: pd.DataFrame) -> dict[tuple[str, bool], str]:
    """``(profession, is_feminitive) -> job title`` as written in the sentences; conflicting forms are errors."""
    forms: dict[tuple[str, bool], str] = {}
    for row in frame.itertuples(index=False):
        job = _parse(row.qa_sentence, row.item_id)["job"]
        key = (row.profession, bool(row.is_feminitive))
        if forms.setdefault(key, job) != job:
            raise SftDataError(
                f"gbem_ua item {row.item_id}: profession {row.profession!r} has two "
                f"{'feminine' if key[1] else 'masculine'} titles: {forms[key]!r} and {job!r}"
            )
    return forms


def counterfactual(sentence: str, profession: str, is_feminitive: bool, forms: dict[tuple[str, bool], str],
                   item: str = "?") -> str:
    """Swap every gendered word: candidate noun, pronoun and the job title's grammatical gender."""
    m = _parse(sentence, item)
    other = (profession, not is_feminitive)
    if other not in forms:
        raise SftDataError(f"gbem_ua item {item}: no {'masculine' if is_feminitive else 'feminine'} title "
                           f"of {profession!r} in the data to swap to")
    return (f"{SWAP[m['candidate']]} має досвід {m['experience']}. "
            f"Чи може {SWAP[m['pronoun']]} отримати посаду {forms[other]}?")


def training_examples(frame: pd.DataFrame, augmentation: Augmentation = "none",
                      split: str = "finetune") -> pd.DataFrame:
    """Prompt-completion examples from the ``split`` professions (see the module docstring).

    Columns: ``prompt``, ``completion`` (always " так"), ``profession``, ``is_male``, ``is_feminitive``,
    ``origin`` (``data`` or ``counterfactual``); sorted by prompt, so the order never depends on the
    parquet's row order (the Trainer shuffles with its own seed).
    """
    if augmentation not in ("none", "counterfactual"):
        raise SftDataError(f"lora.augmentation: unknown value {augmentation!r} (none | counterfactual)")
    rows = frame[frame["split"] == split]
    if rows.empty:
        raise SftDataError(f"gbem_ua: no rows with split == {split!r}; run the prepare stage")
    forms = job_forms(rows)
    base = rows[rows["is_correct"].astype(bool) & ~rows["is_feminitive"].astype(bool)]
    records = []
    for row in base.itertuples(index=False):
        _parse(row.qa_sentence, row.item_id)
        records.append((qa_prompt(row.qa_sentence), YES, row.profession, bool(row.is_male), False, "data"))
        if augmentation == "counterfactual":
            swapped = counterfactual(row.qa_sentence, row.profession, False, forms, row.item_id)
            records.append((qa_prompt(swapped), YES, row.profession, not bool(row.is_male), True, "counterfactual"))
    examples = pd.DataFrame.from_records(records, columns=COLUMNS)
    examples = examples.drop_duplicates("prompt").sort_values("prompt", kind="stable")
    return examples.reset_index(drop=True)


def tokenized_examples(examples: pd.DataFrame, fmt) -> pd.DataFrame:
    """``input_ids`` and ``completion_mask`` of each (prompt, completion) example, as the scorer sees it.

    ``fmt`` is the :class:`~biaslab.scoring.formatting.PromptFormat` the evaluation uses for this model.
    """
    from biaslab.scoring.requests import Request

    requests = fmt.encode_requests([Request(p, c) for p, c in zip(examples["prompt"], examples["completion"])])
    eos = fmt.tokenizer.eos_token_id
    tail = [] if eos is None else [int(eos)]
    input_ids = [list(r.context_ids) + list(r.continuation_ids) + tail for r in requests]
    masks = [[0] * len(r.context_ids) + [1] * (len(r.continuation_ids) + len(tail)) for r in requests]
    return pd.DataFrame({"input_ids": input_ids, "completion_mask": masks})


def validation_examples(frame: pd.DataFrame) -> pd.DataFrame:
    """The same construction on the ``validation`` professions (validation loss during training)."""
    return training_examples(frame, "none", split="validation")
