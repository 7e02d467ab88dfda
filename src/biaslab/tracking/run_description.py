"""A run's *Description*: the markdown at the top of its Overview page in the MLflow UI.

MLflow keeps it in the run tag ``mlflow.note.content`` (what the UI's description editor writes), whose
value has a length limit (``MAX_TAG_VAL_LENGTH``, 8000 characters in MLflow 3): :func:`fit_note` cuts a
longer text before the last section heading that fits and names the artifact holding all of it. The
``evaluate`` runs describe themselves with the variant's headline metrics, the ``calibrate`` run with its
report. A module of its own so that only the stages that describe their runs depend on it.
"""

from __future__ import annotations

NOTE_TAG = "mlflow.note.content"


def describe(markdown: str, whole: str | None = None) -> None:
    """Set the active run's description to ``markdown``, cut by :func:`fit_note` if it is too long."""
    import mlflow

    mlflow.set_tag(NOTE_TAG, fit_note(markdown, whole))


def fit_note(markdown: str, whole: str | None = None, limit: int | None = None) -> str:
    """``markdown`` within ``limit`` characters (default: MLflow's tag value limit): whole if it fits, else
    cut before the last section heading (``## ``) that fits, or else after the last whole line, with a line
    naming the artifact ``whole`` that holds all of it."""
    if limit is None:
        from mlflow.utils.validation import MAX_TAG_VAL_LENGTH as limit
    if len(markdown) <= limit:
        return markdown
    tail = f"\n\n*… cut to fit the description; all of it: artifact `{whole}`.*\n" if whole else "\n\n*… (cut)*\n"
    room = limit - len(tail)
    if room <= 0:
        raise ValueError(f"a description limit of {limit} characters leaves no room for the text")
    head = markdown[:room]
    cut = head.rfind("\n## ")
    if cut <= 0:
        cut = head.rfind("\n")
    return (head[:cut] if cut > 0 else head).rstrip() + tail
