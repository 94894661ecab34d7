"""A study's declared plan: ``plan.yaml`` beside its runs, committed before the grid, read by `lfo report`
(the format is in :mod:`lfo_cli.report.declared`)."""

from __future__ import annotations

from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import yaml

from lfo_cli.errors import LfoError
from lfo_cli.report.load import Run

PLAN_FILE = "plan.yaml"
_KEYS = {"title", "primary", "statistic", "secondary", "smallest_effect", "alpha", "mechanism", "reference",
         "positive_control", "positive_control_effect", "arms", "by", "equivalence_margin"}
# key -> its allowed values, the first the default
CHOICES = {"statistic": ("final", "auc"),  # the primary outcome per run: its last evaluation, or its curve's AUC
           "positive_control_effect": ("higher", "lower")}


@dataclass
class Plan:
    title: str
    primary: str
    arms: dict[str, dict[str, Any]]
    reference: str
    secondary: str | None = None
    smallest_effect: float | None = None
    alpha: float = 0.05
    mechanism: list[str] = field(default_factory=list)
    positive_control: str | None = None
    by: str | None = None  # an episode field of the validation files: the primary outcome per its (first) value
    statistic: str = "final"  # final: the last evaluation; auc: mean over the run (area under the curve vs tasks seen)
    positive_control_effect: str = "higher"  # the direction the positive control was chosen to move the outcome
    # An equivalence study: two arms are equivalent when the paired (1 - 2 alpha) t-interval of the primary
    # statistic's difference lies inside +-equivalence_margin (TOST).
    equivalence_margin: float | None = None
    path: Path | None = None

    def arm_of(self, run: Run) -> str | None:
        """The arm whose every config value the run has; an error when two arms match (the plan is ambiguous)."""
        hits = [a for a, match in self.arms.items() if all(_same(run.config.get(k), v) for k, v in match.items())]
        if len(hits) > 1:
            raise LfoError(f"{self.path}: run {run.path} matches arms {', '.join(hits)}: give each arm a value that "
                           "tells it apart")
        return hits[0] if hits else None


def _same(have: Any, want: Any) -> bool:
    if isinstance(want, bool) or isinstance(have, bool):
        return have is want or str(have).lower() == str(want).lower()
    if isinstance(want, (int, float)):
        try:
            return float(have) == float(want)
        except (TypeError, ValueError):
            return False
    return have == want


def load_plan(paths: list[Path]) -> Plan | None:
    """The plan in the first of ``paths`` that holds ``plan.yaml``; None when none does."""
    for p in paths:
        f = Path(p) / PLAN_FILE
        if f.is_file():
            return _parse(f)
    return None


def _parse(f: Path) -> Plan:
    try:
        raw = yaml.safe_load(f.read_text(encoding="utf-8"))
    except (yaml.YAMLError, UnicodeDecodeError) as exc:
        raise LfoError(f"{f}: not valid YAML ({str(exc).splitlines()[0]})") from None
    if not isinstance(raw, dict):
        raise LfoError(f"{f}: a study plan is a mapping (title, primary, reference, arms, ...)")
    unknown = sorted(set(raw) - _KEYS)
    if unknown:
        raise LfoError(f"{f}: unknown key(s) {', '.join(unknown)}; a plan has {', '.join(sorted(_KEYS))}")
    for key in ("title", "primary", "reference", "arms"):
        if key not in raw:
            raise LfoError(f"{f}: '{key}' is required")
    arms = raw["arms"]
    if not isinstance(arms, dict) or not arms or not all(isinstance(v, dict) and v for v in arms.values()):
        raise LfoError(f"{f}: 'arms' maps each arm's name to the config values of its runs, e.g. "
                       "{baseline: {wm.coef: 0}}")
    for key in ("reference", "positive_control"):
        if raw.get(key) is not None and raw[key] not in arms:
            raise LfoError(f"{f}: {key} '{raw[key]}' is not one of the arms ({', '.join(arms)})")
    alpha = raw.get("alpha", 0.05)
    if not isinstance(alpha, (int, float)) or not 0 < alpha < 1:
        raise LfoError(f"{f}: alpha must be in (0, 1), got {alpha!r}")
    sde = raw.get("smallest_effect")
    if sde is not None and (not isinstance(sde, (int, float)) or sde <= 0):
        raise LfoError(f"{f}: smallest_effect must be > 0, got {sde!r}")
    margin = raw.get("equivalence_margin")
    if margin is not None and (isinstance(margin, bool) or not isinstance(margin, (int, float)) or margin <= 0):
        raise LfoError(f"{f}: equivalence_margin must be > 0 (in the primary outcome's units), got {margin!r}")
    choices = {key: raw.get(key, allowed[0]) for key, allowed in CHOICES.items()}
    for key, value in choices.items():
        if value not in CHOICES[key]:
            raise LfoError(f"{f}: {key} must be one of {', '.join(CHOICES[key])}, got {value!r}")
    mech = raw.get("mechanism") or []
    if not isinstance(mech, list) or not all(isinstance(m, str) for m in mech):
        raise LfoError(f"{f}: mechanism is a list of metric names")
    return Plan(title=str(raw["title"]), primary=str(raw["primary"]), arms={str(k): dict(v) for k, v in arms.items()},
                reference=str(raw["reference"]), secondary=raw.get("secondary"),
                smallest_effect=None if sde is None else float(sde), alpha=float(alpha), mechanism=list(mech),
                positive_control=raw.get("positive_control"),
                by=None if raw.get("by") is None else str(raw["by"]),
                equivalence_margin=None if margin is None else float(margin), path=f, **choices)
