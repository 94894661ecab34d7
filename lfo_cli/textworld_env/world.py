"""TextWorld as an lfo world (:class:`lfo_cli.worlds.World`): ``env.kind: textworld``.

``lfo gen-env --world textworld --output-dir DIR`` writes ``DIR/textworld_world.json``: the game spec, the
seeds of each split and the sha256 of each game's description. The games themselves live in the cache
(``$LFO_HOME/textworld``, :mod:`.games`); loading the world makes any that are missing and refuses a game
whose description differs from the one recorded.

Splits: ``train`` (RL and the warm start), ``val`` (unseen seeds of the same spec: validation) and
``heldout`` (unseen seeds and, for cooking, the ``valid`` split's other foods: the transfer test). A task is
one game; every task has difficulty 1 (a game set has one spec).

The world model predicts the game's answer to a command from the text the agent had just read::

    <|obs|>You are in a kitchen. ...<|/obs|><|act|>open fridge<|/act|><|reply|>You open the fridge.<|/reply|>
"""

from __future__ import annotations

import hashlib
import json
import random
import re
from collections.abc import Iterator, Mapping, Sequence
from dataclasses import asdict, dataclass, replace
from pathlib import Path
from typing import Any

from lfo_cli.errors import LfoError
from lfo_cli.io import atomic_write_json, read_json
from lfo_cli.textworld_env import generation
from lfo_cli.textworld_env.environment import ACT, MAX_STEPS, TextWorldEnv, TextWorldFactory
from lfo_cli.textworld_env.episodes import gold_policy, random_policy
from lfo_cli.textworld_env.games import GameFile, GameSpec, check_seeds, generate_games
from lfo_cli.textworld_env.generation import DEFAULT_DIR, TextWorldGeneration
from lfo_cli.worlds.base import Example, SemanticProbe, TaskPools, World
from lfo_cli.worlds.tasks import sub_seed

WORLD_FILE = "textworld_world.json"
SPLITS = ("train", "val", "heldout")
SYSTEM_PROMPT = "You play a text adventure. Use the act tool, one command per turn, until you win."
OBS_OPEN, OBS_CLOSE = "<|obs|>", "<|/obs|>"
ACT_OPEN, ACT_CLOSE = "<|act|>", "<|/act|>"
REPLY_OPEN, REPLY_CLOSE = "<|reply|>", "<|/reply|>"
# The games the `micro` tokenizer's corpus is made of (seeds far from any world's): both cooking food sets.
CORPUS_SPECS = (GameSpec(kind="cooking", recipe=1, take=1, go=6), GameSpec(kind="cooking", recipe=1, take=1, go=6,
                                                                          split="valid"))
CORPUS_SEED = 100_000


@dataclass(frozen=True)
class GameTask:
    task_id: str  # "<split>-<seed>"
    split: str
    seed: int
    difficulty: int = 1


def world_file(spec: GameSpec, seeds: Mapping[str, Sequence[int]], heldout_split: str, seed: int) -> dict:
    """The world file's content before its games are made (``games`` is filled by :func:`write_world`)."""
    return {"kind": "textworld", "seed": seed, "spec": asdict(spec), "heldout_split": heldout_split,
            "seeds": {split: list(seeds[split]) for split in SPLITS}}


def split_spec(spec: GameSpec, split: str, heldout_split: str) -> GameSpec:
    """The spec a split's games are made with: held-out cooking games use other foods (``heldout_split``)."""
    return replace(spec, split=heldout_split) if split == "heldout" and spec.kind == "cooking" else spec


def write_world(out_dir: str | Path, spec: GameSpec, seeds: Mapping[str, Sequence[int]], *, heldout_split: str = "valid",
                seed: int = 0, force: bool = False, on_game=None) -> Path:
    """Make every split's games (cached) and write ``out_dir/textworld_world.json``; an existing different
    file is kept unless ``force``."""
    for split in SPLITS:  # every split's spec and seed checked before the first game is made
        split_spec(spec, split, heldout_split).check()
    content = world_file(spec, seeds, heldout_split, seed)
    check_seeds([s for split in SPLITS for s in content["seeds"][split]])
    games: dict[str, dict[str, str]] = {}
    done = 0
    for split in SPLITS:
        step = (lambda n, base=done: on_game(base + n)) if on_game else None
        made = generate_games(split_spec(spec, split, heldout_split).check(), content["seeds"][split], on_game=step)
        games[split] = {str(g.seed): g.sha256 for g in made}
        done += len(made)
    content["games"] = games
    path = Path(out_dir) / WORLD_FILE
    if path.is_file() and not force and _read(path) != content:
        raise LfoError(f"{path} exists and holds another world; pass --force to replace it")
    Path(out_dir).mkdir(parents=True, exist_ok=True)
    atomic_write_json(path, content)
    return path


def _read(path: Path) -> dict:
    """A world file's content, or one LfoError line (a truncated or hand-edited file)."""
    content = read_json(path)
    if not isinstance(content, dict):
        raise LfoError(f"{path} is not a TextWorld world file (not a JSON object)")
    return content


def _norm(text: str) -> str:
    return re.sub(r"\s+", " ", text.replace(REPLY_OPEN, "").replace(REPLY_CLOSE, "")).strip().lower()


def same_reply(predicted: str, actual: str) -> bool:
    """The game's replies are templated: a prediction is right when it is the reply, up to case and spacing."""
    return _norm(predicted) == _norm(actual)


class TextWorldEpisode:
    """Evaluation's episode runner: one game at a time, ``act`` the only tool."""

    def __init__(self, games: dict[str, GameFile], max_turns: int) -> None:
        self.env = TextWorldEnv([], max_steps=max_turns, tasks=games)
        self.max_turns = max_turns
        self.turns = self.invalid = 0

    def reset(self, task: GameTask | str, rollout_seed: int = 0) -> str:
        self.turns = self.invalid = 0
        return self.env.reset(task_id=task if isinstance(task, str) else task.task_id)

    def step(self, tool_name: Any, args: Any = None) -> str:
        self.turns += 1
        if tool_name != ACT or not isinstance(args, dict) or not isinstance(args.get("command"), str):
            self.invalid += 1
            return "The only tool is act(command)."
        return self.env.act(args["command"])

    @property
    def transitions(self) -> list:
        return self.env.transitions

    @property
    def success(self) -> bool:
        return self.env.won

    @property
    def done(self) -> bool:
        return self.env.done or self.turns >= self.max_turns

    def info(self) -> dict:
        return {"success": self.env.won, "turns": self.turns, "score_share": self.env.get_reward(),
                "lost": self.env.lost, "steps": self.env.steps, "invalid_tool_calls": self.invalid}


class TextWorldWorld(World):
    """Microsoft's TextWorld games (the `textworld` extra): explore, read, type commands."""

    kind = "textworld"
    tools = TextWorldEnv
    predict_tools = {"act": (ACT,), "all": (ACT,)}
    reply_stop = REPLY_CLOSE
    system_prompt = SYSTEM_PROMPT
    splits = SPLITS
    heldout_split = "heldout"
    heldout_label = "held-out games"
    heldout_what = "games of unseen seeds; cooking games with foods and preparations training never saw"
    difficulty_levels = False  # one level: the report's per-difficulty tables would repeat the overall success
    study_grid = "textworld_cpu"
    easier_regime = "fewer rooms or recipe steps (`lfo gen-env --world textworld --go/--recipe`), a longer warm start"
    episode_fields = ("score_share", "lost", "steps", "invalid_tool_calls")
    teacher_policies = ("gold", "random")
    tokenizer_tokens = (OBS_OPEN, OBS_CLOSE, ACT_OPEN, ACT_CLOSE, REPLY_OPEN, REPLY_CLOSE)
    corpus_version = {"corpus": 1, "specs": [asdict(s) for s in CORPUS_SPECS], "seed": CORPUS_SEED}
    # No settings of its own: its reward is the game's score over its maximum, its teacher's one noise epsilon
    # (a random admissible command instead). Its recipes once listed the customer-service world's keys, at the
    # values that switch them off:
    retired_keys = {
        "grpo": {"data.companies": None, "data.fresh_companies": 0, "data.fresh_company_share": 0.0,
                 "env.progress_shaping": 0.0, "env.field_credit": 0.0, "env.probe_bonus": 0.0},
        "warmstart": {"data.noise.field_dropout": 0.0, "data.noise.field_extra": 0.0, "data.noise.slip": 0.0,
                      "data.probe_rate": 0.0, "data.fresh_companies": 0, "data.probe_noise_scale": 1.0},
    }
    warmstart_key_fixed = {"field_dropout": 0.0}  # the one of them its warm starts' cache keys held
    generation = TextWorldGeneration
    default_dir = DEFAULT_DIR

    @classmethod
    def generate(cls, output_dir: Path, options: Any, *, seed: int, force: bool, progress: Any = None) -> dict:
        """Make the world's games (train, val, held-out seeds in consecutive blocks from ``seed``) and write its file."""
        counts = (options.games, options.val_games, options.heldout_games)
        if counts[0] < 1 or min(counts) < 0:
            raise LfoError(f"--games must be >= 1 and --val-games, --heldout-games >= 0, got {counts}")
        spec_kw = options.spec()
        heldout_split = spec_kw.pop("heldout_split")
        spec = GameSpec(**spec_kw).check()
        starts = [seed, seed + counts[0], seed + counts[0] + counts[1]]
        seeds = {split: range(start, start + n) for split, start, n in zip(SPLITS, starts, counts, strict=True)}
        update = progress("textworld games", sum(counts), "game") if progress else None
        path = write_world(output_dir, spec, seeds, heldout_split=heldout_split, seed=seed, force=force, on_game=update)
        out: dict = {"world": str(path), "spec": spec_kw, "heldout_split": heldout_split,
                     "seeds": {split: [r.start, r.stop - 1] if len(r) else [] for split, r in seeds.items()}}
        out["summary"] = [f"TextWorld world written to {path}: " + ", ".join(
            f"{split} {len(r)} games" for split, r in seeds.items()) + f" ({spec.kind}; env.kind: textworld)"]
        return out

    @classmethod
    def check(cls, data_dir: Path, options: Any, *, seed: int, progress: Any = None) -> dict:
        return generation.check(data_dir, options, seed=seed, progress=progress)

    def __init__(self, content: dict, games: dict[str, GameFile]) -> None:
        self.content, self.games = content, games  # games: task id -> its game

    @classmethod
    def load(cls, data_dir: str | Path) -> TextWorldWorld:
        path = Path(data_dir) / WORLD_FILE
        if not path.is_file():
            raise LfoError(f"{data_dir}: no TextWorld world ({WORLD_FILE}); make one with "
                           f"`lfo gen-env --world textworld --output-dir {data_dir}`")
        content = _read(path)
        try:
            spec = GameSpec(**content["spec"]).check()
            seeds = {split: [int(s) for s in content["seeds"][split]] for split in SPLITS}
            recorded = {split: dict(content["games"][split]) for split in SPLITS}
        except LfoError:
            raise
        except Exception as exc:  # noqa: BLE001 - a truncated or hand-edited file
            raise LfoError(f"{path} is not a TextWorld world file ({type(exc).__name__}: {exc})") from None
        games: dict[str, GameFile] = {}
        for split in SPLITS:
            for game in generate_games(split_spec(spec, split, content.get("heldout_split", "valid")), seeds[split]):
                if recorded[split].get(str(game.seed)) != game.sha256:
                    raise LfoError(f"{path}: {split} game {game.seed} is not the game recorded (its description's "
                                   f"sha256 differs): the world file and $LFO_HOME/textworld disagree")
                games[f"{split}-{game.seed}"] = game
        return cls(content, games)

    @property
    def seed(self) -> int:
        return int(self.content.get("seed", 0))

    @classmethod
    def data_identity(cls, data_dir: str | Path) -> Any:
        path = Path(data_dir) / WORLD_FILE
        return _read(path) if path.is_file() else None

    @classmethod
    def fingerprint(cls, data_dir: str | Path) -> str | None:
        path = Path(data_dir) / WORLD_FILE
        if not path.is_file():
            return None
        return hashlib.sha256(json.dumps(_read(path), sort_keys=True).encode()).hexdigest()[:12]

    @classmethod
    def world_model_example(cls, transition: Any) -> Example:
        if isinstance(transition, Mapping):
            state, action, reply = transition["state"], transition["action"], transition["observation"]
        else:
            state, action, reply = transition.state, transition.action, transition.observation
        command = (action.get("args") or {}).get("command", "")
        prompt = f"{OBS_OPEN}{state}{OBS_CLOSE}{ACT_OPEN}{command}{ACT_CLOSE}"
        text = prompt + f"{REPLY_OPEN}{reply}{REPLY_CLOSE}"
        return text, (len(prompt), len(text))

    def tasks(self, split: str) -> list:
        if split not in SPLITS:
            raise LfoError(f"textworld: no split {split!r}; use one of {', '.join(SPLITS)}")
        return [GameTask(f"{split}-{s}", split, s) for s in self.content["seeds"][split]]

    def task_pools(self, data: Any, evaluation: Any, seed: int) -> TaskPools:
        for name, value in (("data.fresh_tasks", data.fresh_tasks), ("data.difficulty_weights", data.difficulty_weights),
                            ("eval.fresh_tasks", evaluation.fresh_tasks)):
            if value:
                raise LfoError(f"{name}: the textworld world trains and validates on its game splits "
                               f"(`lfo gen-env --world textworld --games/--val-games`)")
        train = self.tasks("train")[: data.max_tasks or None]
        return TaskPools(train=train, validation=self.tasks("val")[: evaluation.num_tasks],
                         heldout=self.tasks("heldout")[: evaluation.heldout_tasks])

    def env_factory(self, *, seed: int, max_turns: int, options: Mapping[str, Any]) -> TextWorldFactory:
        return TextWorldFactory([], max_steps=max_turns, tasks=self.games)

    def episode(self, max_turns: int = MAX_STEPS) -> TextWorldEpisode:
        return TextWorldEpisode(self.games, max_turns)

    def semantic_probe(self, tasks: Sequence[Any], seed: int, limit: int = 32) -> SemanticProbe | None:
        """The gold policy's commands on the validation games (at most ``limit``), with the game's replies."""
        calls: list = []
        runner, gold = self.episode(), gold_policy()
        for task in tasks:
            if len(calls) >= limit:
                break
            observation = runner.reset(task)
            while not runner.done and len(calls) < limit:
                observation = runner.step(ACT, {"command": gold(runner.env, observation)})
            calls += runner.transitions[: limit - len(calls)]
        if not calls:
            return None
        examples = [self.world_model_example(t) for t in calls]
        return SemanticProbe(inputs=[text[:a] for text, (a, _) in examples], replies=[t.observation for t in calls],
                             judge=same_reply, stop=REPLY_CLOSE)

    # ---- the warm start and the micro tokenizer ----
    def sft_tasks(self, data: Any, seed: int) -> tuple[TextWorldWorld, list]:
        if data.fresh_tasks:
            raise LfoError("data.fresh_tasks: not an option of the textworld world's teacher (it plays the "
                           "train games: `lfo gen-env --world textworld --games N`)")
        tasks = self.tasks("train")
        if data.max_tasks is not None:
            tasks = random.Random(seed).sample(tasks, min(data.max_tasks, len(tasks)))
        return self, tasks

    def teacher_rollouts(self, tasks: Sequence[Any], *, policy: str, noise: Any = None, seed: int = 0,
                         rollouts_per_task: int = 1, settings: Any = None) -> list[dict]:
        """``gold`` (TextWorld's walkthrough from the current state) taking a random admissible command instead
        with probability ``noise.epsilon`` (those turns listed in ``info["random_steps"]``), or ``random``."""
        epsilon = noise.epsilon if noise is not None else 0.0
        if policy not in self.teacher_policies:
            raise LfoError(f"textworld: no teacher {policy!r}; use one of {', '.join(self.teacher_policies)}")
        env, out = TextWorldEnv([], tasks=self.games), []
        try:
            for task in tasks:
                for r in range(rollouts_per_task):
                    rng = random.Random(sub_seed("warmstart", seed, task.task_id, r))
                    act = gold_policy() if policy == "gold" else random_policy(rng.randrange(2**31))
                    observation = prompt = env.reset(task_id=task.task_id)
                    random_steps = []
                    while not env.done:
                        if policy == "gold" and epsilon and rng.random() < epsilon:
                            random_steps.append(env.steps)
                            command = rng.choice(env.admissible_commands or ["look"])
                        else:
                            command = act(env, observation)
                        observation = env.act(command)
                    out.append({"task_id": task.task_id, "difficulty": task.difficulty, "policy": policy,
                                "reward": env.get_reward() if not env.won else 1.0,
                                "info": {"success": env.won, "lost": env.lost, "steps": env.steps,
                                         "random_steps": random_steps},
                                "prompt": prompt, "transitions": [t.to_dict() for t in env.transitions]})
        finally:
            env._close()
        return out

    @classmethod
    def corpus(cls, spec: Any) -> Iterator[dict | str]:
        """Games of both cooking food sets (``spec.corpus_tasks // 4`` of each per corpus seed) played by the
        gold policy, the gold policy with 30% random commands, and the random policy, with the world-model
        example of every command."""
        per_spec = max(1, spec.corpus_tasks // 4)
        for i, world_seed in enumerate(spec.corpus_world_seeds):
            for game_spec in CORPUS_SPECS:
                first = CORPUS_SEED + i * per_spec
                games = generate_games(game_spec, range(first, first + per_spec))
                world = cls({"seed": world_seed}, {f"corpus-{g.seed}": g for g in games})
                tasks = [GameTask(f"corpus-{g.seed}", "corpus", g.seed) for g in games]
                for policy, epsilon in (("gold", 0.0), ("gold", 0.3), ("random", 0.0)):
                    noise = type("Noise", (), {"epsilon": epsilon})()
                    for rollout in world.teacher_rollouts(tasks, policy=policy, noise=noise, seed=world_seed):
                        yield rollout
                        for t in rollout["transitions"]:
                            yield cls.world_model_example(t)[0]

    # ---- inspect-wm ----
    def inspection_calls(self, split: str, episodes: int, seed: int) -> list:
        """The calls of walkthroughs with 30% random commands on the split's first ``episodes`` games."""
        tasks = self.tasks(split)[:episodes]
        noise = type("Noise", (), {"epsilon": 0.3})()
        return [t for r in self.teacher_rollouts(tasks, policy="gold", noise=noise, seed=seed) for t in r["transitions"]]

    @classmethod
    def reply_text(cls, generated: str) -> str:
        return generated.replace(REPLY_OPEN, "").split(REPLY_CLOSE)[0].strip()

    @classmethod
    def same_reply(cls, predicted: str, actual: str) -> bool:
        return same_reply(predicted, actual)

    def episode_metrics(self, episodes: Sequence[Mapping[str, Any]]) -> dict[str, float]:
        """Share of the score reached, games lost, steps taken, invalid tool calls (means over episodes)."""
        out: dict[str, float] = {}
        for key, name in (("score_share", "score_share"), ("lost", "lost"), ("steps", "steps"),
                          ("invalid_tool_calls", "invalid_calls")):
            values = [float(e[key]) for e in episodes if key in e]
            if values:
                out[name] = sum(values) / len(values)
        return out
