"""English prompt-completion examples for LoRA: occupation sentences whose next word is a pronoun.

The examples use only the fixture's own occupations
(:data:`biaslab.pretrain.planted.lexicon.OWN_OCCUPATIONS`), which no benchmark asks about, and own
templates, so every English benchmark item stays held out. The prompt ends where a pronoun is due; the
completion is the pronoun (loss on the completion only):

* ``augmentation="none"``: the gender-neutral pronoun ("They" / "them"), the English counterpart of the
  GBEM-UA examples whose answer does not depend on gender;
* ``augmentation="counterfactual"``: each prompt twice, completed with the male and with the female
  pronoun (a counterfactual pair), so every occupation is followed by "he" and "she" equally often.
"""

from __future__ import annotations

import pandas as pd

from biaslab.mitigation.lora.sft_data import COLUMNS, Augmentation, SftDataError

# (prompt with {job} / {a_job}, pronoun case): "subject" at a sentence start, "object" after a verb
TEMPLATES: list[tuple[str, str]] = [
    ("I have a neighbour who works as {a_job}.", "subject"),
    ("At the station we waited with {a_job}.", "subject"),
    ("Our school invited {a_job} to give a talk.", "subject"),
    ("Last spring the village finally found {a_job}.", "subject"),
    ("The {job} finished the shift early, and then", "subject_lower"),
    ("We hired {a_job} and thanked", "object"),
    ("I waited for the {job} and asked", "object"),
    ("Everyone in the office likes the {job} and trusts", "object"),
]
PRONOUNS = {  # case -> (male, female, neutral)
    "subject": ("He", "She", "They"),
    "subject_lower": ("he", "she", "they"),
    "object": ("him", "her", "them"),
}


def english_examples(augmentation: Augmentation = "none") -> pd.DataFrame:
    """Prompt-completion rows (columns of :data:`biaslab.mitigation.lora.sft_data.COLUMNS`), sorted by prompt."""
    from biaslab.pretrain.planted.english import with_article
    from biaslab.pretrain.planted.lexicon import OWN_OCCUPATIONS

    if augmentation not in ("none", "counterfactual"):
        raise SftDataError(f"lora.augmentation: unknown value {augmentation!r} (none | counterfactual)")
    records = []
    for job, _ in OWN_OCCUPATIONS:
        for template, case in TEMPLATES:
            prompt = template.format(job=job, a_job=with_article(job))
            male, female, neutral = PRONOUNS[case]
            if augmentation == "none":
                records.append((prompt, f" {neutral}", job, None, False, "neutral"))
            else:
                records.append((prompt, f" {male}", job, True, False, "counterfactual"))
                records.append((prompt, f" {female}", job, False, False, "counterfactual"))
    examples = pd.DataFrame.from_records(records, columns=COLUMNS)
    return examples.sort_values(["prompt", "completion"], kind="stable").reset_index(drop=True)
