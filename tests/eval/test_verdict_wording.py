"""Every arm of the committed studies carries one verdict, worded once: the phrase its report computes (the
`verdict` column, lfo_cli/report/verdict.py) is the phrase docs/study.md's table row and the README's study row
quote, so a report that changes its verdict fails here until the docs say the same."""

import csv
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[2]
STUDY_DOC = (ROOT / "docs" / "study.md").read_text(encoding="utf-8")
README = (ROOT / "README.md").read_text(encoding="utf-8")

# study -> (its report's comparisons file, its part of docs/study.md (from this heading to the next "# "), and how
# docs/study.md and the README name each compared condition)
STUDIES = {
    "observation_cpu": ("study_comparisons.csv", "# The observation study", {
        "dual (wm.coef=0.5, wm.coupling=separate)": "`separate` 0.5",
        "dual (wm.coef=0.5, wm.coupling=stacked)": "`stacked` 0.5",
        "dual (wm.coef=0.05, wm.coupling=shared)": "`shared` 0.05",
        "dual (wm.coef=0.5, wm.coupling=shared)": "`shared` 0.5"}),
    "reading_cpu": ("declared_comparisons.csv", "# The reading study", None),
    "textworld_cpu": ("declared_comparisons.csv", "# The TextWorld study", None),
}


def _verdicts(study: str) -> dict[str, str]:
    name, _, labels = STUDIES[study]
    with (ROOT / "reports" / "studies" / study / name).open(newline="") as fh:
        rows = list(csv.DictReader(fh))
    out = {(r.get("arm") or r["condition"]): r["verdict"] for r in rows}
    return {labels[k] if labels else k: v for k, v in out.items()}


def _section(heading: str) -> str:
    start = STUDY_DOC.index(heading + ":")
    end = STUDY_DOC.find("\n# ", start + 1)
    return STUDY_DOC[start:end if end > 0 else None]


@pytest.mark.parametrize("study", sorted(STUDIES))
def test_docs_study_tables_quote_the_reports_verdicts(study):
    section = _section(STUDIES[study][1])
    verdicts = _verdicts(study)
    assert verdicts and all(verdicts.values())
    for arm, phrase in verdicts.items():
        rows = [line for line in section.splitlines() if line.startswith(f"| {arm} ")]
        assert rows, f"{study}: no table row for {arm} in docs/study.md"
        assert any(f"| {phrase} |" in line for line in rows), f"{study}: {arm}'s row does not say '{phrase}'"


@pytest.mark.parametrize("study", sorted(STUDIES))
def test_the_readme_row_quotes_the_reports_verdicts(study):
    [row] = [line for line in README.splitlines() if f"reports/studies/{study}/index.md" in line]
    for arm, phrase in _verdicts(study).items():
        quoted = f"`{arm}` {phrase}" if STUDIES[study][2] is None else phrase
        assert quoted in row, f"{study}: the README row does not say '{quoted}'"
