"""`lfo ablate`: grids of `lfo train` runs (grid.py: the design; runner.py: running it)."""
