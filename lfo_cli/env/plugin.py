"""The customer-service world as an lfo world (:class:`lfo_cli.worlds.World`): ``env.kind: customer_service``."""

from __future__ import annotations

import json
import random
from collections.abc import Iterator, Mapping, Sequence
from pathlib import Path
from typing import Any

from lfo_cli import run_record as rr
from lfo_cli.env import catalogue as cat
from lfo_cli.env import generation
from lfo_cli.env.episode import FIRST_CALL_OUTCOMES, Episode
from lfo_cli.env.formatting import (
    CSR_CLOSE,
    format_world_model_input,
    strip_target_markers,
    world_model_example,
)
from lfo_cli.env.generate import generate_world
from lfo_cli.env.generation import CustomerServiceGeneration
from lfo_cli.env.noise import NoiseConfig
from lfo_cli.env.replies import parse_reply
from lfo_cli.env.rollout import run_episode
from lfo_cli.env.settings import CustomerServiceRewards, CustomerServiceTeacherData, CustomerServiceTrainData
from lfo_cli.env.specificity import form_specificity
from lfo_cli.env.task_pools import heldout_pool, training_tasks, validation_pool
from lfo_cli.env.tasks import select_companies
from lfo_cli.env.teacher import sft_tasks, teacher_rollouts
from lfo_cli.env.trl_env import CustomerServiceEnv, make_env_factory
from lfo_cli.env.world import SPLITS, WorldData
from lfo_cli.env.world_files import GENERATOR_VERSION, MANIFEST_FILE, load_world, world_fingerprint
from lfo_cli.errors import LfoError
from lfo_cli.io import read_json
from lfo_cli.worlds.base import Example, SemanticProbe, StudyWords, TaskPools, World
from lfo_cli.worlds.tasks import stratified_tasks

PHONE = "make_phone_call"

# Per-episode behaviour (Episode.info) -> the validation metric that averages it.
BEHAVIOUR_METRICS = (("auth_before_first_call", rr.AUTH_BEFORE_CALL), ("department_order_correct", rr.ORDER_CORRECT),
                     ("phone_calls", rr.CALLS_PER_TASK), ("forms_submitted", rr.FORMS),
                     ("invalid_tool_calls", rr.INVALID_CALLS))


class CustomerServiceWorld(World):
    """Companies, departments with hidden identity requirements, and a rep whose replies say what is missing."""

    kind = "customer_service"
    tools = CustomerServiceEnv
    predict_tools = {
        "phone": (PHONE,),
        "phone_form": (PHONE, "auth_info_form"),
        "all": (PHONE, "auth_info_form", "search_company"),
    }
    reply_stop = CSR_CLOSE
    system_prompt = ("You are a support agent. Use the tools to do the user's task, one call per turn; reply Done "
                     "when finished.")
    episode_categories = {"first_call": (*FIRST_CALL_OUTCOMES, None)}
    # Enough per episode to recompute every behaviour and form measure offline (lfo report), without weights.
    episode_fields = ("auth_before_first_call", "department_order_correct", "phone_calls", "forms_submitted",
                      "form_fields", "invalid_tool_calls", "first_call", "probe_calls", "form_holds_named",
                      "departments")
    validation_fields = ("form_fields", "first_call", "phone_calls", "probe_calls", "form_holds_named", "departments")
    paired_skills = {rr.FIRST_CALL_RIGHT: "first call to the right department"}

    def __init__(self, data: WorldData) -> None:
        self.data = data
        self.rl_data = data  # the world RL plays in: a copy with data.fresh_companies' companies added

    # each identity field's JSON key with its value opener (`"zip_code": "`): one token in micro's vocabulary
    tokenizer_tokens = tuple(json.dumps({f: ""})[1:-2] for f in (*cat.FIELDS, cat.REFERENCE_KEY))
    corpus_version = GENERATOR_VERSION
    teacher_policies = ("prior", "probe", "random")
    train_data = CustomerServiceTrainData
    generation = CustomerServiceGeneration
    rewards = CustomerServiceRewards
    teacher_data = CustomerServiceTeacherData
    # teacher options added after warm starts were cached, at the value that gives the old data bit for bit
    # (named as the cache key flattens them: data.slip is data.noise.slip)
    warmstart_key_neutral = {"slip": 0.0, "field_extra": 0.0, "probe_rate": 0.0, "probe_noise_scale": 1.0,
                             "fresh_companies": 0}

    @classmethod
    def generate(cls, output_dir: Path, options: Any, *, seed: int, force: bool, progress: Any = None) -> dict:
        return generation.generate(Path(output_dir), options, seed=seed, force=force, progress=progress)

    @classmethod
    def check(cls, data_dir: Path, options: Any, *, seed: int, progress: Any = None) -> dict:
        return generation.check(Path(data_dir), options, seed=seed, progress=progress)

    @classmethod
    def data_identity(cls, data_dir: str | Path) -> Any:
        path = Path(data_dir) / MANIFEST_FILE
        return read_json(path) if path.is_file() else None

    @classmethod
    def load(cls, data_dir: str | Path) -> CustomerServiceWorld:
        if not (Path(data_dir) / MANIFEST_FILE).is_file():
            raise LfoError(f"{data_dir}: no environment data; create it with `lfo gen-env --seed 0 --output-dir "
                           f"{data_dir}` (or set data.dir)")
        return cls(load_world(data_dir))

    @property
    def seed(self) -> int:
        return self.data.seed

    @classmethod
    def fingerprint(cls, data_dir: str | Path) -> str | None:
        return world_fingerprint(data_dir)

    @classmethod
    def world_model_example(cls, transition: Any) -> Example:
        return world_model_example(transition)

    splits = SPLITS
    heldout_split = "transfer"
    heldout_label = "held-out companies"
    heldout_what = "companies training never drew from"
    study_grid = "observation_cpu"
    easier_regime = "field credit, lower difficulty, a longer warm start"
    behaviour_metrics = (rr.AUTH_BEFORE_CALL, rr.ORDER_CORRECT, rr.FIRST_CALL_RIGHT, rr.CALLS_PER_TASK, rr.FORMS)
    heldout_note = (" At difficulty 2 the policy cannot know a held-out company's exception: only probing (a call "
                    "before the one form) solves it.")
    study_words = StudyWords(
        d2="company exceptions", d2_subject="the d2 exceptions", d2_gloss="the exceptions only the replies reveal",
        training="training companies", validation="fresh customers of the training companies",
        specificity="company specificity",
        columns=((rr.VAL_FORM_SIZE, "form size"), (rr.VAL_EXCEPTION_FIELD_OWN, "exception field: own dept"),
                 (rr.VAL_EXCEPTION_FIELD_OTHER, "exception field: other dept")),
        note="*Exception field: own dept* is the share of forms holding a department's exception field when the task "
             "goes to that department; *other dept* when it goes to another department of the company. A policy that "
             "learned the exceptions raises the first, not the second; one that pads its forms raises both (and the "
             "form size). Held-out companies were never trained on: d2 there is solvable only by probing (calling "
             "before the one form), so a gain there is a habit, not the companies' exceptions.",
        semantic_probe="Semantic accuracy of the world model's predicted reply to the prior's call at an exception "
                       "department (does it name the right fields?) at each evaluation",
        replies="the rep's replies")

    def tasks(self, split: str) -> list:
        if split not in self.data.tasks:
            raise LfoError(f"no split {split!r} in this world; use one of {', '.join(sorted(self.data.tasks))}")
        return list(self.data.tasks[split])

    def task_pools(self, data: Any, evaluation: Any, seed: int) -> TaskPools:
        companies = select_companies(self.data, data.companies)
        # Companies generated for RL alone join a copy of the world: evaluation plays in the world as it is
        # (a misspelt name's "Did you mean" never lists them).
        self.rl_data = self.data.copy() if data.fresh_companies else self.data
        return TaskPools(train=training_tasks(self.rl_data, data, seed),
                         validation=stratified_tasks(validation_pool(self.data, evaluation, companies),
                                                     evaluation.num_tasks),
                         heldout=heldout_pool(self.data, evaluation))

    def env_factory(self, *, seed: int, max_turns: int, options: Mapping[str, Any]):
        return make_env_factory(self.rl_data, seed=seed, max_turns=max_turns, **options)

    def episode(self, max_turns: int) -> Episode:
        return Episode(self.data, max_turns=max_turns)

    def semantic_probe(self, tasks: Sequence[Any], seed: int, limit: int = 32) -> SemanticProbe | None:
        """The ``prior`` policy's first auth-failed phone call on each difficulty-2 task (at most ``limit``):
        the rep answers with an auth_failure naming the company exception's field, exactly what the policy
        has to learn. A prediction is right when it has the reply's category and names the same fields."""
        calls = exception_calls(self.data, list(tasks), limit=limit, seed=seed)
        if not calls:
            return None
        return SemanticProbe(inputs=[format_world_model_input(t.state, t.action) for t in calls],
                             replies=[t.observation for t in calls], judge=same_meaning, stop=CSR_CLOSE)

    # ---- inspect-wm ----
    def inspection_calls(self, split: str, episodes: int, seed: int, policy: str = "probe") -> list:
        """Phone calls of noisy ``policy`` episodes (epsilon and field dropout 0.2: replies of every category)."""
        tasks = list(self.data.tasks[split])
        random.Random(seed).shuffle(tasks)
        out, episode = [], Episode(self.data)
        for i, task in enumerate(tasks[:episodes]):
            run_episode(episode, policy, task, rollout_seed=seed * 100_003 + i,
                        noise=NoiseConfig(epsilon=0.2, field_dropout=0.2))
            out += [t for t in episode.transitions if t.action.get("tool") == PHONE]
        return out

    def inspection_probes(self, count: int, seed: int) -> list[tuple[Any, str, str]]:
        """The design's probes on the first department of difficulty-1 tasks of ``count`` companies of the
        val and transfer splits: a call with no identity data (the rep must ask for authentication) and the
        oracle's call with exactly the required data (the rep must serve)."""
        out = []
        for split in ("val", "transfer"):
            seen: set = set()
            for i, task in enumerate(self.data.tasks[split]):
                if task.difficulty != 1 or task.company_id in seen or len(seen) >= count:
                    continue
                seen.add(task.company_id)
                episode = Episode(self.data)
                # no auth: search, then call the right department with nothing
                episode.reset(task, rollout_seed=seed + i)
                company = self.data.companies[task.company_id]
                episode.step("search_company", {"company_name": company.name})
                phone = next(d.phone for d in company.departments if d.name == task.steps[0].department)
                episode.step(PHONE, {"phone_number": phone, "auth_info": {}})
                out.append((episode.transitions[-1], "auth_failure", split))
                # full auth: the oracle's successful call
                run_episode(episode, "oracle", task, rollout_seed=seed + i)
                calls = [t for t in episode.transitions if t.action.get("tool") == PHONE and t.category == "success"]
                if calls:
                    out.append((calls[-1], "success", split))
        return out

    @classmethod
    def reply_text(cls, generated: str) -> str:
        return strip_target_markers(generated)

    @classmethod
    def same_reply(cls, predicted: str, actual: str) -> bool:
        return same_meaning(predicted, actual)

    @classmethod
    def reply_category(cls, reply: str) -> str | None:
        return parse_reply(reply).category

    @classmethod
    def transition_category(cls, transition: Any) -> str:
        return transition["category"] if isinstance(transition, Mapping) else transition.category

    def episode_metrics(self, episodes: Sequence[Mapping[str, Any]]) -> dict[str, float]:
        """Where the first call went, behaviour (auth before the first call, department order, calls, forms,
        invalid calls), reading the rep (probes, forms that hold what a probe's reply named) and the form
        measures of :func:`lfo_cli.env.specificity.form_specificity`."""
        out: dict[str, float] = {}
        if not episodes:
            return out
        if any("first_call" in e for e in episodes):  # the department decision, apart from copying
            out[rr.FIRST_CALL_RIGHT] = sum(e.get("first_call") == "right_department" for e in episodes) / len(episodes)
        for key, name in BEHAVIOUR_METRICS:
            values = [float(e[key]) for e in episodes if key in e]
            if values:
                out[name] = sum(values) / len(values)
        # Reading the rep (the reading study's mechanism): how often the policy probes (a call with no identity
        # field, answered by naming what the department needs), and how often its form then holds every named field.
        probes = [e["probe_calls"] > 0 for e in episodes if "probe_calls" in e]
        if probes:
            out[rr.PROBE_RATE] = sum(probes) / len(probes)
        held = [bool(e["form_holds_named"]) for e in episodes if e.get("form_holds_named") is not None]
        if held:
            out[rr.FORM_HOLDS_NAMED] = sum(held) / len(held)
        if all("form_fields" in e for e in episodes):
            out.update(form_specificity(self.data, episodes))
        return out


    @classmethod
    def episode_skills(cls, episode: Mapping[str, Any]) -> dict[str, bool]:
        """The department decision: did the first call reach the department the task needs."""
        return {rr.FIRST_CALL_RIGHT: episode["first_call"] == "right_department"} if "first_call" in episode else {}

    # ---- the warm start and the micro tokenizer ----
    def sft_tasks(self, data: Any, seed: int) -> tuple[CustomerServiceWorld, list]:
        world, tasks = sft_tasks(data, seed, self.data)
        return (self if world is self.data else CustomerServiceWorld(world)), tasks

    def teacher_rollouts(self, tasks: Sequence[Any], *, policy: str, noise: Any = None, seed: int = 0,
                         rollouts_per_task: int = 1, settings: Any = None) -> list[dict]:
        probe_rate, probe_noise = (settings.probe_rate, settings.probe_noise) if settings is not None else (0.0, None)
        return teacher_rollouts(self.data, tasks, policy=policy, noise=noise, seed=seed,
                                rollouts_per_task=rollouts_per_task, probe_rate=probe_rate, probe_noise=probe_noise)

    @classmethod
    def corpus(cls, spec: Any) -> Iterator[dict | str]:
        """Full rollouts of the reference policies (the prior with noise, probe, random) on every split of
        ``spec.corpus_world_seeds`` worlds, and the world-model example of every transition."""
        for seed in spec.corpus_world_seeds:
            world = generate_world(seed=seed, num_companies=spec.corpus_companies, num_train_tasks=spec.corpus_tasks,
                                   num_val_tasks=spec.corpus_tasks // 4, heldout_fraction=0.25)
            tasks = [t for split in ("train", "val", "transfer") for t in world.tasks.get(split, [])]
            for policy, noise in (("prior", NoiseConfig(epsilon=0.2, field_dropout=0.1)), ("probe", None),
                                  ("random", None)):
                for rollout in teacher_rollouts(world, tasks, policy=policy, noise=noise, seed=seed):
                    yield rollout
                    for tr in rollout["transitions"]:
                        yield world_model_example(tr)[0]


def exception_calls(world: WorldData, tasks: list, limit: int = 32, seed: int = 0) -> list:
    """The ``prior`` policy's first auth-failed phone call on each difficulty-2 task (at most ``limit``)."""
    out, episode = [], Episode(world)
    for i, task in enumerate(t for t in tasks if t.difficulty == 2):
        if len(out) >= limit:
            break
        run_episode(episode, "prior", task, rollout_seed=seed + i)
        call = next((t for t in episode.transitions if t.action.get("tool") == PHONE and t.category == "auth_failure"), None)
        if call is not None:
            out.append(call)
    return out


def same_meaning(predicted: str, actual: str) -> bool:
    """A predicted reply means the actual one: the same category, naming the same fields."""
    guess, truth = parse_reply(strip_target_markers(predicted)), parse_reply(actual)
    return guess.category == truth.category and guess.fields == truth.fields
