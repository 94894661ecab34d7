"""`lfo gen-env --world textworld`: its options, a world's games (generated, cached, listed in
``textworld_world.json``), or `--check` of games with the gold and random policies through lfo's episode runner.

Imported by the command line to list its options: TextWorld's own library loads only when games are made.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import asdict, dataclass, field
from pathlib import Path
from typing import Any

from lfo_cli.errors import LfoError
from lfo_cli.textworld_env.episodes import gold_policy, play_all, random_policy
from lfo_cli.textworld_env.games import KINDS, GameSpec, generate_games

COOKING_DEFAULTS = {"go": 6, "recipe": 1, "take": 1, "split": "train", "heldout_split": "valid"}
LEVEL_DEFAULT = 1
DEFAULT_DIR = "data_tw"


@dataclass
class TextWorldGeneration:
    """TextWorld's `lfo gen-env` options. The game-type options default to None so that one given for another game
    type is refused, not ignored."""

    game_type: str = field(default="cooking", metadata={"help": "cooking, coin_collector or treasure_hunter."})
    games: int = field(default=20, metadata={"help": "Training games, seeds --seed onwards."})
    val_games: int = field(default=10, metadata={"help": "Validation games (the next seeds)."})
    heldout_games: int = field(
        default=10, metadata={"help": "Held-out games (the seeds after those; cooking: --heldout-split foods)."})
    heldout_split: str | None = field(
        default=None, metadata={"help": "Cooking: the held-out games' foods (default valid)."})
    go: int | None = field(default=None, metadata={"help": "Cooking: rooms (1, 6, 9, 12; default 6)."})
    recipe: int | None = field(default=None, metadata={"help": "Cooking: ingredients in the recipe (default 1)."})
    take: int | None = field(default=None, metadata={"help": "Cooking: ingredients to find (default 1)."})
    split: str | None = field(default=None, metadata={"help": "Cooking: train, valid or test foods (default train)."})
    level: int | None = field(default=None, metadata={"help": "Coin collector / treasure hunter level (default 1)."})

    def spec(self) -> dict:
        """The game spec's keywords (and ``heldout_split``) from the options given, defaults filled in. An option of
        another game type is refused rather than ignored: ``--go`` with coin collector, ``--level`` with cooking."""
        given = {k: v for k, v in asdict(self).items()
                 if v is not None and k in ("heldout_split", "go", "recipe", "take", "split", "level")}
        cooking = self.game_type == "cooking"
        wrong = sorted(k for k in given if (k == "level") == cooking)
        if wrong and self.game_type in KINDS:  # an unknown type is refused by GameSpec.check, naming the known ones
            flags = ", ".join("--" + k.replace("_", "-") for k in wrong)
            takes = ("--go, --recipe, --take, --split and --heldout-split" if cooking else "--level (held-out games "
                     "are unseen seeds)")
            what = "is not an option" if len(wrong) == 1 else "are not options"
            raise LfoError(f"textworld {self.game_type}: {flags} {what} of this game type; it takes {takes}")
        return {"kind": self.game_type, **COOKING_DEFAULTS, "level": LEVEL_DEFAULT, **given}


def _games(spec_kw: dict, seeds: range, progress: Callable[..., Any] | None) -> list:
    spec = GameSpec(**spec_kw).check()
    update = progress("textworld games", len(seeds), "game") if progress else None
    return generate_games(spec, seeds, on_game=update)


def check(data_dir: Path | None, options: TextWorldGeneration, *, seed: int,
          progress: Callable[..., Any] | None = None) -> dict:
    """``--games`` games from ``seed`` made (cached) and played by the gold and random policies."""
    if options.games < 1:
        raise LfoError(f"--games must be >= 1, got {options.games}")
    spec_kw = options.spec()
    spec_kw.pop("heldout_split")
    files = _games(spec_kw, range(seed, seed + options.games), progress)
    gold, rand = play_all(files, gold_policy()), play_all(files, random_policy(seed))
    out: dict = {"spec": spec_kw, "seeds": [seed, seed + options.games - 1], "dir": str(files[0].path.parent),
                 "manifest": str(files[0].path.parent / "manifest.json"),
                 "gold_success": sum(e.won for e in gold) / len(gold),
                 "random_success": sum(e.won for e in rand) / len(rand),
                 "random_reward": sum(e.reward for e in rand) / len(rand),
                 "gold_steps_mean": sum(e.steps for e in gold) / len(gold)}
    out["checks"] = {"gold_100": out["gold_success"] == 1.0, "random_below_10pct": out["random_success"] < 0.1}
    out["summary"] = [f"{options.games} {spec_kw['kind']} games (seeds {seed}-{seed + options.games - 1}) in {out['dir']}",
                      f"gold {out['gold_success']:.0%} success in {out['gold_steps_mean']:.1f} steps; random "
                      f"{out['random_success']:.1%} success, {out['random_reward']:.1%} of the score"]
    return out
