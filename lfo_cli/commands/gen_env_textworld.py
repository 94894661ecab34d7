"""`lfo gen-env --world textworld`: a TextWorld world (its splits' games generated, cached, listed in
``textworld_world.json``), or `--check` of games with the gold and random policies through lfo's episode runner."""

from __future__ import annotations

import sys

from lfo_cli.commands._common import print_json
from lfo_cli.errors import LfoError
from lfo_cli.progress import ProgressLog
from lfo_cli.textworld_env.episodes import gold_policy, play_all, random_policy
from lfo_cli.textworld_env.games import KINDS, GameSpec, generate_games
from lfo_cli.textworld_env.world import SPLITS, write_world

COOKING_DEFAULTS = {"go": 6, "recipe": 1, "take": 1, "split": "train", "heldout_split": "valid"}
LEVEL_DEFAULT = 1


def textworld_spec(game_type: str, **given) -> dict:
    """The game spec's keywords (and ``heldout_split``) from the options given (None: not given), defaults
    filled in. An option of another game type is refused rather than ignored: ``--go`` with coin collector,
    ``--level`` with cooking."""
    given = {k: v for k, v in given.items() if v is not None}
    cooking = game_type == "cooking"
    wrong = sorted(k for k in given if (k == "level") == cooking)
    if wrong and game_type in KINDS:  # an unknown type is refused by GameSpec.check, naming the known ones
        flags = ", ".join("--" + k.replace("_", "-") for k in wrong)
        takes = ("--go, --recipe, --take, --split and --heldout-split" if cooking else "--level (held-out games are "
                 "unseen seeds)")
        what = "is not an option" if len(wrong) == 1 else "are not options"
        raise LfoError(f"textworld {game_type}: {flags} {what} of this game type; it takes {takes}")
    spec = {**COOKING_DEFAULTS, "level": LEVEL_DEFAULT, **given}
    return {"kind": game_type, **spec}


def textworld_games(spec_kw: dict, games: int, seed: int, check: bool, as_json: bool) -> bool:
    """Returns whether the check passed (True without --check)."""
    if games < 1:
        raise LfoError(f"--games must be >= 1, got {games}")
    spec = GameSpec(**spec_kw).check()
    with ProgressLog("textworld games", games, unit="game", stream=sys.stderr if as_json else None) as log:
        files = generate_games(spec, range(seed, seed + games), on_game=log.update)
    out: dict = {"spec": spec_kw, "seeds": [seed, seed + games - 1], "dir": str(files[0].path.parent),
                 "manifest": str(files[0].path.parent / "manifest.json")}
    ok = True
    if check:
        gold, rand = play_all(files, gold_policy()), play_all(files, random_policy(seed))
        out["gold_success"] = sum(e.won for e in gold) / len(gold)
        out["random_success"] = sum(e.won for e in rand) / len(rand)
        out["random_reward"] = sum(e.reward for e in rand) / len(rand)
        out["gold_steps_mean"] = sum(e.steps for e in gold) / len(gold)
        out["checks"] = {"gold_100": out["gold_success"] == 1.0, "random_below_10pct": out["random_success"] < 0.1}
        ok = all(out["checks"].values())
    if as_json:
        print_json(out)
    else:
        print(f"{games} {spec.kind} games (seeds {seed}-{seed + games - 1}) in {out['dir']}")
        if check:
            print(f"gold {out['gold_success']:.0%} success in {out['gold_steps_mean']:.1f} steps; random "
                  f"{out['random_success']:.1%} success, {out['random_reward']:.1%} of the score")
            for name, passed in out["checks"].items():
                print(f"{'PASS' if passed else 'FAIL'}  {name}")
    return ok


def textworld_world(spec_kw: dict, output_dir, *, seed: int, counts: tuple[int, int, int], heldout_split: str,
                    force: bool, as_json: bool) -> None:
    """Make the world's games (train, val, held-out seeds in consecutive blocks from ``seed``) and write its file."""
    if counts[0] < 1 or min(counts) < 0:
        raise LfoError(f"--games must be >= 1 and --val-games, --heldout-games >= 0, got {counts}")
    spec = GameSpec(**spec_kw).check()
    starts = [seed, seed + counts[0], seed + counts[0] + counts[1]]
    seeds = {split: range(start, start + n) for split, start, n in zip(SPLITS, starts, counts, strict=True)}
    with ProgressLog("textworld games", sum(counts), unit="game", stream=sys.stderr if as_json else None) as log:
        path = write_world(output_dir, spec, seeds, heldout_split=heldout_split, seed=seed, force=force,
                           on_game=log.update)
    out = {"world": str(path), "spec": spec_kw, "heldout_split": heldout_split,
           "seeds": {split: [r.start, r.stop - 1] if len(r) else [] for split, r in seeds.items()}}
    if as_json:
        print_json(out)
    else:
        print(f"TextWorld world written to {path}: " + ", ".join(
            f"{split} {len(r)} games" for split, r in seeds.items()) + f" ({spec.kind}; env.kind: textworld)")
