"""`lfo report`: run dirs -> tidy table, figures (PNG + CSV) and reports/index.md (see docs/report.md)."""
