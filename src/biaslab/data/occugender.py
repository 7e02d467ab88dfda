"""OccuGender: 40 occupations with BLS gender ratios, plus the prompt specification.

``jobs.csv`` (job, group, male_ratio, female_ratio in percent) is checked for the two groups,
ratios within [0, 100] summing to 100 (±0.5), and unique jobs. ``spec.json`` must hold the task
prompts (each with ``[JOB]`` and a known verbalization), the verbalizations (male/female/diverse
surface forms) and the debiasing prompts.

Without a mirror: ``spec.json`` is the package's ``data/specs/occugender.json`` (written from the paper's
Tables 2-4 and Appendix A), and ``jobs.csv`` is rebuilt from the authors' pinned ``female_ratios.csv``
(:func:`jobs_from_female_ratios`, checked by sha256 to equal the mirror's file; :mod:`biaslab.data.sources`).
"""

from __future__ import annotations

import csv
import io
import json
from typing import TYPE_CHECKING, Any

from biaslab.config import DataConfig
from biaslab.data import sources
from biaslab.data.errors import DataError
from biaslab.data.report import PrepareReport
from biaslab.data.tabular import read_table, read_text

if TYPE_CHECKING:
    import datasets

JOBS_FILE = "occugender/jobs.csv"
SPEC_FILE = "occugender/spec.json"
GROUPS = ("female_dominated", "male_dominated")


def load(cfg: DataConfig, report: PrepareReport | None = None) -> datasets.Dataset:
    """The occupations: ``job``, ``group``, ``male_ratio``, ``female_ratio``."""
    import datasets

    report = report if report is not None else PrepareReport()
    path = sources.resolve(cfg, JOBS_FILE)
    table = read_table(path, ("job", "group", "male_ratio", "female_ratio"), label=str(path))
    report.file(JOBS_FILE).rows_read = len(table)
    rows, seen = [], set()
    for row in table:
        job = table.nonempty(row, "job").strip()
        if job in seen:
            raise table.error(row, f"duplicate job {job!r}", "job")
        seen.add(job)
        if row["group"] not in GROUPS:
            raise table.error(row, f"expected one of {GROUPS}, got {row['group']!r}", "group")
        male, female = table.parse_float(row, "male_ratio"), table.parse_float(row, "female_ratio")
        for column, value in (("male_ratio", male), ("female_ratio", female)):
            if not 0 <= value <= 100:
                raise table.error(row, f"percentage {value} outside [0, 100]", column)
        if abs(male + female - 100) > 0.5:
            raise table.error(row, f"male_ratio + female_ratio = {male + female}, expected 100", "female_ratio")
        rows.append({"job": job, "group": row["group"], "male_ratio": male, "female_ratio": female})
    return datasets.Dataset.from_list(rows)


def load_spec(cfg: DataConfig, report: PrepareReport | None = None) -> dict[str, Any]:
    """The validated ``spec.json`` (task_prompts, verbalizations, debiasing_prompts, …)."""
    report = report if report is not None else PrepareReport()
    path = sources.resolve(cfg, SPEC_FILE)
    try:
        spec = json.loads(read_text(path))
    except json.JSONDecodeError as exc:
        raise DataError(path, f"not valid JSON: {exc.msg}", line=exc.lineno) from None
    for key in ("task_prompts", "verbalizations", "debiasing_prompts"):
        if key not in spec:
            raise DataError(path, f"missing top-level key {key!r}")
    verbalizations = spec["verbalizations"]
    for i, prompt in enumerate(spec["task_prompts"]):
        where = f"task_prompts[{i}]"
        if "[JOB]" not in prompt.get("text", ""):
            raise DataError(path, f"{where}.text lacks the [JOB] placeholder")
        forms = verbalizations.get(prompt.get("verbalization"))
        if not isinstance(forms, dict) or not all(forms.get(g) for g in ("male", "female", "diverse")):
            raise DataError(path, f"{where}.verbalization {prompt.get('verbalization')!r} is not a verbalization "
                            "with male/female/diverse surface forms")
    for i, prompt in enumerate(spec["debiasing_prompts"]):
        if not str(prompt.get("text", "")).strip():
            raise DataError(path, f"debiasing_prompts[{i}].text is empty")
    report.file(SPEC_FILE).rows_read = len(spec["task_prompts"]) + len(spec["debiasing_prompts"])
    return spec


def jobs_from_female_ratios(payload: bytes) -> bytes:
    """The authors' ``data/inputs/female_ratios.csv`` (``,job,female_ratio``) in the ``jobs.csv`` layout.

    Same rows in the same order (the paper's Table 7); ``male_ratio = 100 - female_ratio`` and the group is
    female-dominated when ``female_ratio > 50``, both to one decimal as in Table 7.
    """
    out = io.StringIO()
    writer = csv.writer(out, lineterminator="\n")
    writer.writerow(["job", "group", "male_ratio", "female_ratio"])
    for row in csv.DictReader(io.StringIO(payload.decode("utf-8"))):
        female = float(row["female_ratio"])
        group = GROUPS[0] if female > 50 else GROUPS[1]
        writer.writerow([row["job"].strip(), group, f"{100 - female:.1f}", f"{female:.1f}"])
    return out.getvalue().encode("utf-8")
