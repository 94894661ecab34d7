"""TextWorld games from a seed: generated locally (no download), cached, listed in a manifest.

A :class:`GameSpec` names the game type and its difficulty settings. ``generate_games(spec, seeds)`` makes
each seed's game once under ``$LFO_HOME/textworld/<spec key>/`` (``seed-N.z8`` for the interpreter,
``seed-N.json`` TextWorld's description of the game) and writes ``manifest.json`` with the sha256 of each
game's description: the same spec and seeds give the same manifest on any machine and any day (the story
file embeds its compile date, so its own hash is recorded but not compared). TextWorld's generator iterates
over sets, whose order follows Python's per-process string hashing, and that order reaches the description:
games are therefore made in a child interpreter started with ``PYTHONHASHSEED=0`` (``python -m
lfo_cli.textworld_env.games``), never in the calling process.

Held-out games are unseen seeds, and for cooking also the ``valid``/``test`` splits, whose foods and
preparations the ``train`` split never uses.
"""

from __future__ import annotations

import hashlib
import json
import os
import shutil
import subprocess
import sys
import tempfile
from collections.abc import Callable, Iterable
from dataclasses import asdict, dataclass, field
from pathlib import Path
from typing import Any

from lfo_cli.errors import LfoError
from lfo_cli.io import atomic_write_json, lfo_home
from lfo_cli.textworld_env.rng import preserved_global_rng

# lfo's names -> TextWorld's challenge names
KINDS = {"cooking": "tw-cooking", "coin_collector": "tw-coin_collector", "treasure_hunter": "tw-treasure_hunter"}
SPLITS = ("train", "valid", "test")
INSTALL = "pip install -e '.[textworld]'"
MAX_SEED = 2**32 - 1  # TextWorld's generator seeds numpy with it


@dataclass(frozen=True)
class GameSpec:
    """What kind of game, how hard. Cooking reads ``recipe``/``take``/``go``/``open``/``cook``/``cut``/``split``;
    coin collector and treasure hunter read ``level``."""

    kind: str = field(default="cooking", metadata={"help": "cooking, coin_collector or treasure_hunter."})
    recipe: int = field(default=1, metadata={"help": "Cooking: ingredients in the recipe (1-5)."})
    take: int = field(default=1, metadata={"help": "Cooking: ingredients to find and take (<= recipe)."})
    go: int = field(default=1, metadata={"help": "Cooking: rooms (1, 6, 9 or 12)."})
    open: bool = field(default=False, metadata={"help": "Cooking: containers and doors to open."})
    cook: bool = field(default=False, metadata={"help": "Cooking: ingredients to cook (roast, fry, grill)."})
    cut: bool = field(default=False, metadata={"help": "Cooking: ingredients to cut (slice, dice, chop)."})
    split: str = field(default="train", metadata={"help": "Cooking: train, valid or test (other foods)."})
    level: int = field(default=1, metadata={"help": "Coin collector / treasure hunter: difficulty level."})
    only_last_action: bool = field(
        default=True, metadata={"help": "Say only the goal at the start, not the route (the agent must explore)."})

    def check(self) -> GameSpec:
        if self.kind not in KINDS:
            raise LfoError(f"textworld: unknown game type {self.kind!r}; use one of {', '.join(KINDS)}")
        if self.split not in SPLITS:
            raise LfoError(f"textworld: split must be one of {', '.join(SPLITS)}, got {self.split!r}")
        if self.kind == "cooking":
            if not 1 <= self.recipe <= 5 or not 0 <= self.take <= self.recipe:
                raise LfoError(f"textworld cooking: need 1 <= recipe <= 5 and 0 <= take <= recipe, got recipe "
                               f"{self.recipe}, take {self.take}")
            if self.go not in (1, 6, 9, 12):
                raise LfoError(f"textworld cooking: go must be 1, 6, 9 or 12 rooms, got {self.go}")
        elif self.level < 1:
            raise LfoError(f"textworld {self.kind}: level must be >= 1, got {self.level}")
        return self

    def settings(self, seed: int) -> dict[str, Any]:
        if self.kind == "cooking":
            return {"recipe": self.recipe, "take": self.take, "go": self.go, "open": self.open, "cook": self.cook,
                    "cut": self.cut, "drop": False, "split": self.split, "recipe_seed": seed}
        return {"level": self.level}

    def key(self) -> str:
        digest = hashlib.sha256(json.dumps(asdict(self), sort_keys=True).encode()).hexdigest()[:12]
        return f"{self.kind}-{digest}"


@dataclass(frozen=True)
class GameFile:
    seed: int
    path: Path  # the story file the interpreter plays
    sha256: str  # of TextWorld's description of the game (seed-N.json)


def require_textworld():
    try:
        with preserved_global_rng():  # importing textworld draws from numpy's global generator
            import textworld
            import textworld.challenges
    except ImportError:
        raise LfoError(f"the TextWorld world needs the textworld extra: {INSTALL}") from None
    return textworld


def check_story_file(path: Path) -> None:
    """A Z-machine story file whose header is whole and whose checksum matches, or one ``LfoError``: the
    interpreter exits the process on a file it cannot read, so a bad file must never reach it."""
    try:
        data = Path(path).read_bytes()
    except OSError as exc:
        raise LfoError(f"textworld: cannot read game {path}: {exc.strerror or exc}") from None
    version = data[0] if data else 0
    if len(data) < 64 or not 1 <= version <= 8:
        raise LfoError(f"textworld: {path} is not a Z-machine story file")
    length = int.from_bytes(data[0x1A:0x1C], "big") * (2 if version <= 3 else 4 if version <= 5 else 8)
    if not 64 < length <= len(data) or sum(data[0x40:length]) % 0x10000 != int.from_bytes(data[0x1C:0x1E], "big"):
        raise LfoError(f"textworld: {path} is truncated or corrupt (its Z-machine length or checksum does not match)")


def _sha256(path: Path) -> str:
    return hashlib.sha256(path.read_bytes()).hexdigest()


def _make(spec: GameSpec, seed: int, out: Path) -> None:
    """One game into ``out`` (seed-N.z8 and seed-N.json), written under a temporary name and renamed."""
    textworld = require_textworld()
    options = textworld.GameOptions()
    options.seeds = seed
    options.grammar.only_last_action = spec.only_last_action
    options.force_recompile = True
    tmp = Path(tempfile.mkdtemp(prefix=f".seed-{seed}.", dir=out))
    try:
        options.path = str(tmp / f"seed-{seed}.z8")
        make = textworld.challenges.CHALLENGES[KINDS[spec.kind]][1]
        with preserved_global_rng():  # generation draws from numpy and Python RNGs of its own, and may reseed
            try:
                game = make(spec.settings(seed), options)
                game_file = Path(textworld.generator.compile_game(game, options))
            except Exception as exc:  # TextWorld's own errors (a setting it cannot satisfy, the Inform compiler)
                raise LfoError(f"textworld: cannot make {spec.kind} game {seed}: {type(exc).__name__}: {exc}") from None
        for suffix in (".json", ".z8"):
            os.replace(game_file.with_suffix(suffix), out / f"seed-{seed}{suffix}")
    finally:
        shutil.rmtree(tmp, ignore_errors=True)


def check_seeds(seeds: Iterable[Any]) -> None:
    """One ``LfoError`` for the first seed TextWorld cannot take, before any game is made."""
    for seed in seeds:
        if not isinstance(seed, int) or isinstance(seed, bool) or not 0 <= seed <= MAX_SEED:
            raise LfoError(f"textworld: a game seed must be an integer in [0, {MAX_SEED}], got {seed!r}")


def _whole_sha256(z8: Path, desc: Path) -> str | None:
    """The description's sha256 when both files are there and whole (read once); None for a game to make
    (missing, or a truncated description or story file: made again, never recorded)."""
    try:
        data = desc.read_bytes()
        json.loads(data)
        check_story_file(z8)
    except (OSError, ValueError, LfoError):
        return None
    return hashlib.sha256(data).hexdigest()


MADE = "lfo-made"  # the child's line after each game it made


class _Maker:
    """A child interpreter started with ``PYTHONHASHSEED=0`` that makes ``seeds``' games in order and says so,
    a line each (``python -m lfo_cli.textworld_env.games``): the same seed gives the same description anywhere.
    The parent's environment is left as it is (no variable set and restored around a fork)."""

    def __init__(self, spec: GameSpec, seeds: list[int], out: Path):
        package_root = str(Path(__file__).resolve().parents[2])  # the lfo_cli this process runs
        env = {**os.environ, "PYTHONHASHSEED": "0",
               "PYTHONPATH": os.pathsep.join(p for p in (package_root, os.environ.get("PYTHONPATH")) if p)}
        self.err = tempfile.TemporaryFile(mode="w+", encoding="utf-8")
        self.proc = subprocess.Popen(
            [sys.executable, "-m", "lfo_cli.textworld_env.games", json.dumps(asdict(spec)), str(out), *map(str, seeds)],
            stdout=subprocess.PIPE, stderr=self.err, stdin=subprocess.DEVNULL, text=True, env=env)

    def wait_for(self, seed: int) -> None:
        """Block until the child has made ``seed``'s game; one ``LfoError`` if it stops before."""
        for line in self.proc.stdout:
            if line.strip() == f"{MADE} {seed}":
                return
        self.proc.wait()
        why = self._why()
        self.close()
        raise LfoError(why)

    def _why(self) -> str:
        self.err.seek(0)
        lines = [ln for ln in self.err.read().splitlines() if ln.strip()]
        said = next((ln[len("error: "):] for ln in reversed(lines) if ln.startswith("error: ")), None)
        return said or (f"textworld: the process making games stopped (exit code {self.proc.returncode})"
                        + (f": {lines[-1]}" if lines else ""))

    def close(self) -> None:
        self.proc.stdout.close()
        self.proc.wait()
        self.err.close()


def generate_games(spec: GameSpec, seeds: list[int] | range, root: str | Path | None = None,
                   on_game: Callable[[int], None] | None = None) -> list[GameFile]:
    """Each seed's game, made once and cached (``on_game(done)`` after each); ``manifest.json`` lists every
    game made for the spec."""
    spec.check()
    seeds = list(seeds)
    check_seeds(seeds)
    out = (Path(root) if root else lfo_home() / "textworld") / spec.key()
    out.mkdir(parents=True, exist_ok=True)
    files = {seed: (out / f"seed-{seed}.z8", out / f"seed-{seed}.json") for seed in seeds}
    cached = {seed: _whole_sha256(*files[seed]) for seed in dict.fromkeys(seeds)}
    missing = [seed for seed, sha in cached.items() if sha is None]
    if missing:
        require_textworld()  # the extra's one error line here, not from the child
    maker = _Maker(spec, missing, out) if missing else None
    try:
        games = []
        for seed in seeds:
            if seed in missing:
                maker.wait_for(seed)
                missing.remove(seed)
            games.append(GameFile(seed, files[seed][0], cached[seed] or _sha256(files[seed][1])))
            if on_game is not None:
                on_game(len(games))
    finally:
        if maker is not None:
            maker.close()
    manifest = out / "manifest.json"
    listed = json.loads(manifest.read_text()).get("games", {}) if manifest.is_file() else {}
    listed.update({str(g.seed): {"json_sha256": g.sha256, "z8": g.path.name} for g in games})
    atomic_write_json(manifest, {"spec": asdict(spec), "games": dict(sorted(listed.items(), key=lambda kv: int(kv[0])))})
    return games


def _child(argv: list[str]) -> int:
    """``python -m lfo_cli.textworld_env.games SPEC_JSON OUT SEED...``: make each game, a line after each."""
    if sys.flags.hash_randomization:
        print("error: textworld: games must be made with PYTHONHASHSEED=0 (this interpreter hashes at random)",
              file=sys.stderr)
        return 2
    spec, out = GameSpec(**json.loads(argv[0])), Path(argv[1])
    try:
        for seed in map(int, argv[2:]):
            _make(spec, seed, out)
            print(f"{MADE} {seed}", flush=True)
    except LfoError as exc:
        print(f"error: {exc}", file=sys.stderr)
        return 2
    return 0


if __name__ == "__main__":
    raise SystemExit(_child(sys.argv[1:]))
