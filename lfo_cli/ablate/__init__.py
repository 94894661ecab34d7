"""`lfo ablate`: grids of `lfo train` runs (grid.py: the design; cells.py: its runs; runner.py: running them)."""
