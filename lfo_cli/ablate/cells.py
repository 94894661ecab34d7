"""A grid's runs: every (cell, seed) of a :class:`~lfo_cli.ablate.grid.Grid`, each recipe resolved first.

Apart from grid.py because resolving a recipe needs its kind registered, and the grpo kind's config
(:mod:`lfo_cli.train.recipe_config`) imports TRL: listing grids, running cells and estimating their time
stay light.
"""

from __future__ import annotations

from pathlib import Path

from lfo_cli import recipes
from lfo_cli.ablate.grid import Cell, Grid, format_override
from lfo_cli.errors import LfoError


def expand(grid: Grid, runs_dir: Path, validate: bool = True) -> list[Cell]:
    """Every (cell, seed) as a :class:`Cell`, each recipe resolved (validated) before anything runs."""
    cells = []
    # Seed-major: a grid stopped part way holds whole seeds (every condition of seed 0, then of seed 1, ...),
    # which is what its paired comparisons need.
    for seed in grid.seeds:
        for cid, values in grid.conditions:
            if seed not in grid.cell_seeds.get(cid, grid.seeds):
                continue
            overrides = grid.fixed + [format_override(k, v) for k, v in values.items()] + grid.cli_set
            cell_id = f"{cid}__s{seed}"
            resolved: dict = {}
            if validate:
                try:
                    rec = recipes.load_recipe(grid.base, overrides + [f"seed={seed}"])
                    rec.check()
                    resolved = rec.resolved
                except LfoError as exc:
                    raise LfoError(f"{grid.path}: cell {cid}: {exc}") from None
            cells.append(Cell(cell_id=cell_id, condition=cid, values=dict(values), seed=seed,
                              overrides=overrides, run_dir=Path(runs_dir) / cell_id, resolved=resolved))
    return cells
