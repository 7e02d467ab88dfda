"""The benchmark's request sets, built straight from the data mirror (same shapes as the benchmarks).

Sets are sampled deterministically (every k-th item) to ``sample`` requests so the naive loop stays
affordable; OccuGender keeps whole prompt groups so prefix sharing sees its real ~26 forms per prompt.
"""

from __future__ import annotations

import json
import os
from pathlib import Path

import pandas as pd

from biaslab.scoring.requests import Request

ROOT = Path(__file__).resolve().parents[1]


def mirror() -> Path:
    return Path(os.environ.get("BIASLAB_DATA_DIR", ROOT.parent / "shared" / "datasets"))


def every_kth(items: list, n: int) -> list:
    step = max(1, len(items) // max(1, n))
    return items[::step][:n]


def occugender_requests() -> list[list[Request]]:
    """Groups of requests sharing one prompt: jobs x task prompts x (no prompt + 6 debiasing prompts)."""
    spec = json.loads((mirror() / "occugender" / "spec.json").read_text(encoding="utf-8"))
    jobs = pd.read_csv(mirror() / "occugender" / "jobs.csv")["job"].tolist()
    prefixes = [""] + [p["text"] + " " for p in spec["debiasing_prompts"]]
    groups = []
    for job in jobs:
        for task in spec["task_prompts"]:
            forms = []
            for words in spec["verbalizations"][task["verbalization"]].values():
                for w in words:
                    forms += [w[0].upper() + w[1:], w[0].lower() + w[1:]]
            forms = list(dict.fromkeys(forms))
            for prefix in prefixes:
                prompt = prefix + task["text"].replace("[JOB]", job)
                groups.append([Request(prompt, " " + f) for f in forms])
    return groups


def load_request_sets(sample: int) -> dict[str, list[Request]]:
    m = mirror()
    occu_groups = occugender_requests()
    per_group = len(occu_groups[0])
    occu = [r for g in every_kth(occu_groups, max(1, sample // per_group)) for r in g]
    prob = pd.read_csv(m / "gbem_ua" / "prob_dataset" / "test_dataset.csv")["sentence"].tolist()
    gbem = [Request("", s.replace("BLANK ", v)) for s in every_kth(prob, sample // 2) for v in ("", "не ")]
    rubia = pd.read_csv(m / "rubia" / "rubia.tsv", sep="\t")
    rubia_pairs = every_kth(list(zip(rubia["pro-trope"], rubia["anti-trope"])), sample // 2)
    rubia_req = [Request("", s) for pair in rubia_pairs for s in pair]
    crows = pd.read_csv(m / "crows_pairs" / "crows_pairs_anonymized.csv")
    crows_pairs = every_kth(list(zip(crows["sent_more"], crows["sent_less"])), sample // 2)
    crows_req = [Request("", s) for pair in crows_pairs for s in pair]
    return {"occugender": occu, "gbem_ua_prob": gbem, "rubia": rubia_req, "crows_pairs": crows_req}
