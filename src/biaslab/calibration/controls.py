"""The gate's own known-answer check: it must pass the positive control and refuse the negative one.

A *positive control* (:mod:`biaslab.pretrain.gate_controls`: the planted bias removed with the planted recipe's
own counterbalanced text) is a variant that does what a mitigation should; a *negative control* (the base's
embeddings noised) does harm. A gate that refuses the first cannot approve anything that works; one that
approves the second - or refuses it only because it removes no bias, so that no harm rule was exercised -
has no working harm rule. :func:`check` reads each control's verdict (any object with ``passed`` and
``rows`` of ``rule``, ``metric``, ``passed``, ``reason``: :class:`biaslab.registry.gate.GateVerdict`) and
:func:`require` fails the run (:class:`GateControlError`, one line per wrong control, naming the rule that
decided). Pure: no files, no MLflow; the calibrate stage evaluates the gate and calls it.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Any

from biaslab.errors import EvaluationError

HARM_RULES = frozenset({"paired_non_inferior", "paired_no_spill_over", "answer_floor"})
"""The rules that catch harm. A negative control must be refused (or the run fails); whether one of these refused
it is recorded (``harm_caught``), and a refusal by none of them counts as a false approval of the harm rules."""


class GateControlError(EvaluationError):
    """The gate passed its negative control or refused its positive one: its verdicts cannot be trusted."""


@dataclass(frozen=True)
class ControlCheck:
    """One control's verdict against what it must be."""

    variant: str
    role: str  # "positive" | "negative"
    approved: bool
    ok: bool
    deciding: tuple[str, ...]  # "rule on metric: reason" of the rows that decided (failed rows; all rows if passed)
    message: str
    harm_caught: bool | None = None  # negative control: did a harm rule refuse it (None for a positive control)


def _row(row: Any) -> str:
    return f"{row.rule} on {row.metric}: {row.reason}"


def check_one(variant: str, role: str, verdict: Any) -> ControlCheck:
    """Is ``verdict`` what a ``role`` control must get? Positive: approved. Negative: refused (issue 43's
    requirement; the run fails otherwise) - and whether a harm rule refused it is recorded separately: a negative
    control refused only because it removes no bias means no harm rule saw the harm (reported, and counted as a
    harm-rule false approval in the error-rate table, not as a failed run)."""
    failed = [r for r in verdict.rows if not r.passed]
    approved = bool(verdict.passed)
    if role == "positive":
        if approved:
            return ControlCheck(variant, role, True, True, tuple(_row(r) for r in verdict.rows),
                                f"{variant} (positive control) approved by every rule, as it must be")
        deciding = tuple(_row(r) for r in failed)
        return ControlCheck(variant, role, False, False, deciding,
                            f"the gate refuses its positive control {variant}: " + "; ".join(deciding))
    if role != "negative":
        raise ValueError(f"{variant}: a control's role is positive or negative, not {role!r}")
    harm = [r for r in failed if r.rule in HARM_RULES]
    if approved:
        return ControlCheck(variant, role, True, False, (),
                            f"the gate approves its negative control {variant}: no harm rule refused it", False)
    if not harm:
        deciding = tuple(_row(r) for r in failed)
        return ControlCheck(variant, role, False, True, deciding,
                            f"{variant} (negative control) refused, but only by "
                            f"{', '.join(sorted({r.rule for r in failed}))}: no harm rule caught the harm", False)
    deciding = tuple(_row(r) for r in harm)
    return ControlCheck(variant, role, False, True, deciding,
                        f"{variant} (negative control) refused by {', '.join(sorted({r.rule for r in harm}))}, "
                        "as it must be", True)


def check(verdicts: Mapping[str, tuple[str, Any]]) -> list[ControlCheck]:
    """``{variant: (role, verdict)}`` -> one :class:`ControlCheck` each, in the mapping's order."""
    return [check_one(name, role, verdict) for name, (role, verdict) in verdicts.items()]


def require(checks: Sequence[ControlCheck]) -> None:
    """Raise :class:`GateControlError` naming every control whose verdict is wrong (and the rules that decided)."""
    wrong = [c.message for c in checks if not c.ok]
    if wrong:
        raise GateControlError("gate controls: " + " | ".join(wrong))


def render_markdown(checks: Sequence[ControlCheck]) -> str:
    """The report's section: each control, what it must get, what it got, the rules that decided."""
    if not checks:
        return ""
    lines = ["## The gate's controls", "",
             "A positive control (the planted bias removed with the planted recipe's own counterbalanced text) must "
             "be approved; a negative control (harm done on purpose) must be refused (docs/gate.md \"Controls\"). A "
             "wrong verdict fails this stage. Whether a harm rule (not only the bias rule) refused the negative control "
             "is its own column: \"no\" means the harm rules did not see this harm.", "",
             "| control | role | must be | gate | check | harm rule caught it | decided by |",
             "|---|---|---|---|---|---|---|"]
    for c in checks:
        must = "approved" if c.role == "positive" else "refused"
        got = "approved" if c.approved else "refused"
        caught = "–" if c.harm_caught is None else ("yes" if c.harm_caught else "**no**")
        decided = "<br>".join(d.replace("|", "\\|") for d in c.deciding) or "–"
        lines.append(f"| {c.variant} | {c.role} | {must} | {got} | {'ok' if c.ok else '**WRONG**'} | {caught} "
                     f"| {decided} |")
    return "\n".join(lines) + "\n"


def mlflow_metrics(checks: Sequence[ControlCheck]) -> dict[str, float]:
    """``calibration/gate_control/<variant>/approved`` and ``.../ok`` (1/0) per control, and a negative control's
    ``.../harm_caught`` (1/0: did a harm rule refuse it)."""
    out: dict[str, float] = {}
    for c in checks:
        out[f"calibration/gate_control/{c.variant}/approved"] = float(c.approved)
        out[f"calibration/gate_control/{c.variant}/ok"] = float(c.ok)
        if c.harm_caught is not None:
            out[f"calibration/gate_control/{c.variant}/harm_caught"] = float(c.harm_caught)
    return out
