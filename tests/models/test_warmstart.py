"""Warm start: config validation, recipes, and a tiny-model SFT run end to end."""

from __future__ import annotations

import json

import pytest
import torch
from safetensors.torch import load_file
from typer.testing import CliRunner

from lfo_cli.cli import app
from lfo_cli.env.noise import NoiseConfig
from lfo_cli.env.plugin import CustomerServiceWorld
from lfo_cli.errors import LfoError
from lfo_cli.models import cache
from lfo_cli.models.agent_eval import stratified_tasks, summarize_eval
from lfo_cli.models.warmstart import ensure_warmstart, run_warmstart
from lfo_cli.models.warmstart_cache import warmstart_key
from lfo_cli.models.warmstart_config import (
    DataSection as LfoDataSection,
)
from lfo_cli.models.warmstart_config import (
    EvalSection,
    ModelSection,
    TrainSection,
    WarmStartConfig,
    world_sections,
)
from lfo_cli.recipes import load_recipe

DataSection = world_sections("customer_service")["data"]  # lfo's fields and the customer-service teacher's


@pytest.mark.parametrize(
    ("section", "kwargs", "match"),
    [
        (NoiseConfig, {"epsilon": 1.5}, "epsilon"),
        (DataSection, {"rollouts_per_task": 0}, "rollouts_per_task"),
        (DataSection, {"induction_rows": -1}, "induction_rows"),
        (DataSection, {"induction_max_len": 4}, "induction_max_len"),
        (DataSection, {"fresh_tasks": -1}, "fresh_tasks"),
        (NoiseConfig, {"slip": 1.5}, "slip"),
        (DataSection, {"probe_noise_scale": 1.5}, "probe_noise_scale"),
        (TrainSection, {"learning_rate": 0}, "learning_rate"),
        (TrainSection, {"max_length": 8}, "max_length"),
        (TrainSection, {"max_minutes": -1}, "max_minutes"),
        (EvalSection, {"temperature": 0}, "temperature"),
        (EvalSection, {"samples_per_task": 0}, "samples_per_task"),
        (ModelSection, {"lora_dropout": 1.0}, "lora_dropout"),
    ],
)
def test_bad_values_are_rejected_with_actionable_messages(section, kwargs, match):
    with pytest.raises(LfoError, match=match):
        section(**kwargs)


def test_recipes_resolve_and_reject_bad_input():
    micro = load_recipe("warmstart_micro").config
    assert micro.model.name == "micro" and micro.model.is_full and micro.data.policy == "prior"
    assert micro.train.max_minutes is None and micro.eval.temperature == 1.0  # steps define it, no wall clock
    smol = load_recipe("warmstart_smollm2").config
    assert smol.model.name == "smollm2-135m" and not smol.model.is_full
    # a step count, not a wall-clock budget, ends it: the cached checkpoint is the same on any machine
    assert smol.train.max_steps > 0 and smol.train.max_minutes is None
    with pytest.raises(LfoError, match="data.policy=oracle is not a teacher of the customer_service world: prior, probe, random"):
        load_recipe("warmstart_micro", ["data.policy=oracle"])  # the oracle is never imitated
    with pytest.raises(LfoError, match="unknown key 'train.epoch'"):
        load_recipe("warmstart_micro", ["train.epoch=2"])
    # the reply loss names tools of the recipe's world: the rep's on customer service, act on TextWorld
    with pytest.raises(LfoError, match=r"reply_loss_tools must name tools of the customer_service world \(auth_info_form, "
                                       r"make_phone_call, search_company\), got \['act'\]"):
        load_recipe("warmstart_reading_wm", ["train.reply_loss_tools=[act]"])
    assert load_recipe("warmstart_textworld", ["train.reply_loss_weight=0.5", "train.reply_loss_tools=[act]"]).config
    result = CliRunner().invoke(app, ["train", "--recipe", "warmstart_micro", "--set", "eval.temperature=0",
                                      "--dry-run"])
    assert result.exit_code == 2 and "temperature" in result.output and "Traceback" not in result.output


def test_fresh_tasks_replace_the_rl_train_tasks_in_the_sft_data(small_world_dir):
    from lfo_cli.env import load_world
    from lfo_cli.models.sft_data import collect_sft_trajectories

    world = load_world(small_world_dir)
    cfg = WarmStartConfig(data=DataSection(dir=small_world_dir, fresh_tasks=30, rollouts_per_task=2))
    trajs = collect_sft_trajectories(cfg, CustomerServiceWorld(world))
    ids = {t["task_id"] for t in trajs}
    assert len(trajs) == 60 and len(ids) == 30
    assert not ids & {t.task_id for t in world.all_tasks()}  # never the world's train, val or transfer tasks
    default = collect_sft_trajectories(WarmStartConfig(data=DataSection(dir=small_world_dir)), CustomerServiceWorld(world))
    assert {t["task_id"] for t in default} == {t.task_id for t in world.tasks["train"]}
    other_seed = collect_sft_trajectories(WarmStartConfig(seed=1, data=DataSection(dir=small_world_dir, fresh_tasks=30)), CustomerServiceWorld(world))
    assert other_seed[0]["messages"] != trajs[0]["messages"]


@pytest.mark.parametrize("rate", [0.0, 0.3, 0.7])
def test_the_probing_teacher_plays_probe_at_its_rate_and_leaves_the_other_rollouts_as_they_were(small_world_dir, rate):
    """data.probe_rate: a rollout is the `probe` policy's with that probability (a binomial count over 600
    rollouts within 4 standard deviations), and a rollout that stays with the prior is the same rollout
    as without any probing (its policy is drawn apart from its own seed)."""
    import math

    from lfo_cli.env import load_world
    from lfo_cli.models.sft_data import collect_sft_trajectories

    world = load_world(small_world_dir)
    plain = collect_sft_trajectories(WarmStartConfig(data=DataSection(dir=small_world_dir, fresh_tasks=300)), CustomerServiceWorld(world))
    mixed = collect_sft_trajectories(
        WarmStartConfig(data=DataSection(dir=small_world_dir, fresh_tasks=300, probe_rate=rate)), CustomerServiceWorld(world))
    n = len(mixed)
    probes = [t for t in mixed if t["policy"].split("+")[0] == "probe"]
    assert n == 600 and abs(len(probes) - rate * n) <= 4 * math.sqrt(n * rate * (1 - rate)) + 1e-9
    assert all(a["messages"] == b["messages"] for a, b in zip(plain, mixed, strict=True) if b["policy"].split("+")[0] == "prior")

    def first_call_empty(t) -> bool:  # the probe calls a needed department with an empty auth_info first
        calls = [c["function"] for m in t["messages"] if m["role"] == "assistant" for c in m.get("tool_calls") or []]
        phone = [c for c in calls if c["name"] == "make_phone_call"]
        return bool(phone) and not phone[0]["arguments"].get("auth_info")

    if probes:  # noise (a random call 10% of the time) aside, every probe rollout starts so; prior ones do not
        assert sum(map(first_call_empty, probes)) / len(probes) > 0.7
    priors = [t for t in mixed if t["policy"].split("+")[0] == "prior"]
    assert sum(map(first_call_empty, priors)) / len(priors) < 0.3


@pytest.mark.parametrize("scale", [0.0, 0.5])
def test_the_probing_teachers_noise_is_scaled_and_the_priors_is_not(small_world_dir, scale):
    """data.probe_noise_scale: probe rollouts play with the prior's noise times the scale (0: clean, so the
    probe reads every reply and finishes d1-2 tasks); the prior's rollouts stay as they were."""
    from lfo_cli.env import load_world
    from lfo_cli.models.sft_data import collect_sft_trajectories

    world = load_world(small_world_dir)

    def collect(**data):
        return collect_sft_trajectories(
            WarmStartConfig(data=DataSection(dir=small_world_dir, fresh_tasks=300, probe_rate=0.5, **data)),
            CustomerServiceWorld(world))

    noisy, scaled = collect(), collect(probe_noise_scale=scale)
    def played(trajs):
        return [t["policy"].split("+")[0] for t in trajs]

    assert played(noisy) == played(scaled)  # the same rollouts play probe
    assert all(t["policy"] == "probe" for t in scaled if t["policy"].startswith("probe")) == (scale == 0.0)
    assert all(a["messages"] == b["messages"] for a, b in zip(noisy, scaled, strict=True) if b["policy"].startswith("prior"))

    def success(trajs, easy=False):
        probes = [t for t in trajs if t["policy"].startswith("probe") and (not easy or t["difficulty"] <= 2)]
        return sum(t["reward"] >= 1.0 for t in probes) / len(probes)

    assert success(scaled) > success(noisy)
    if scale == 0.0:
        assert success(scaled, easy=True) == 1.0  # a clean probe reads the reply: d1 and d2 always succeed


def test_slipped_turns_stay_in_context_without_loss(small_world_dir, tiny_tokenizer):
    from lfo_cli.env import load_world
    from lfo_cli.env.trl_env import CustomerServiceEnv
    from lfo_cli.models import prompts as P
    from lfo_cli.models.sft_data import collect_sft_trajectories, tokenize_trajectories

    world = load_world(small_world_dir)
    noise = NoiseConfig(epsilon=0.1, field_dropout=0.1, slip=0.6)
    cfg = WarmStartConfig(data=DataSection(dir=small_world_dir, noise=noise, rollouts_per_task=2))
    trajs = [t for t in collect_sft_trajectories(cfg, CustomerServiceWorld(world)) if t["info"].get("slipped_steps")]
    assert trajs
    tools = P.tool_schemas(CustomerServiceEnv)
    rows, _ = tokenize_trajectories(tiny_tokenizer, trajs, tools, 4096)
    for traj, row in zip(trajs, rows, strict=True):
        trained = tiny_tokenizer.decode([i for i, m in zip(row["input_ids"], row["assistant_masks"], strict=True) if m])
        everything = tiny_tokenizer.decode(row["input_ids"])
        slipped = set(traj["info"]["slipped_steps"])
        kept = {json.dumps(tr["action"]["args"], ensure_ascii=False)
                for k, tr in enumerate(traj["transitions"]) if k not in slipped}
        for tr in traj["transitions"]:
            args = json.dumps(tr["action"]["args"], ensure_ascii=False)
            assert args in everything  # every call, slipped or not, is in the context
            assert (args in trained) == (args in kept)  # ... but only the intended ones carry loss
        weights = [m.get("weight", 1) for m in traj["messages"] if m["role"] == "assistant"]
        assert weights.count(0) == len(traj["info"]["slipped_steps"])
        n_runs = sum(1 for a, b in zip([0, *row["assistant_masks"]], row["assistant_masks"], strict=False) if b and not a)
        assert n_runs == len(weights) - weights.count(0)


def test_random_steps_carry_no_loss_unless_imitated(small_world_dir, tiny_tokenizer):
    from lfo_cli.env import load_world
    from lfo_cli.env.trl_env import CustomerServiceEnv
    from lfo_cli.models import prompts as P
    from lfo_cli.models.sft_data import collect_sft_trajectories, tokenize_trajectories

    world = load_world(small_world_dir)
    tools = P.tool_schemas(CustomerServiceEnv)
    data = {"dir": small_world_dir, "noise": NoiseConfig(epsilon=0.3), "rollouts_per_task": 2}
    imitated = collect_sft_trajectories(WarmStartConfig(data=DataSection(**data)), CustomerServiceWorld(world))
    held = collect_sft_trajectories(WarmStartConfig(data=DataSection(**data, imitate_random=False)), CustomerServiceWorld(world))
    assert [t["transitions"] for t in imitated] == [t["transitions"] for t in held]  # same episodes
    n_random = sum(len(t["info"].get("random_steps", ())) for t in held)
    assert n_random >= 5
    for trajs, zeros in ((imitated, 0), (held, n_random)):
        assert sum(m.get("weight", 1) == 0 for t in trajs for m in t["messages"] if m["role"] == "assistant") == zeros
    traj = next(t for t in held if t["info"].get("random_steps"))
    (row,), _ = tokenize_trajectories(tiny_tokenizer, [traj], tools, 4096)
    runs = sum(1 for a, b in zip([0, *row["assistant_masks"]], row["assistant_masks"], strict=False) if b and not a)
    n_assistant = sum(m["role"] == "assistant" for m in traj["messages"])
    assert runs == n_assistant - len(traj["info"]["random_steps"])


def test_warmstart_key_leaves_out_later_options_at_their_neutral_value(small_world_dir, monkeypatch):
    import lfo_cli.models.warmstart_cache as ws

    plain = WarmStartConfig(data=DataSection(dir=small_world_dir))
    slipped = WarmStartConfig(data=DataSection(dir=small_world_dir, noise=NoiseConfig(0.1, 0.1, slip=0.25)))
    assert warmstart_key(plain) != warmstart_key(slipped)
    held = WarmStartConfig(data=DataSection(dir=small_world_dir, imitate_random=False))
    assert warmstart_key(plain) != warmstart_key(held)
    key = warmstart_key(plain)
    monkeypatch.setattr(ws, "NEUTRAL_LATER_FIELDS", {})
    assert warmstart_key(plain) != key  # the option is hashed like any other field unless neutral


def test_the_teachers_noise_is_the_environments_noise_config_declared_once(tmp_path):
    """data.noise is lfo_cli.env.noise.NoiseConfig, passed as is to the rollouts, with the warm start's defaults;
    a recipe that sets some of its keys keeps those defaults for the rest."""
    import dataclasses
    import typing

    from lfo_cli.worlds.noise import TeacherNoise

    assert typing.get_type_hints(DataSection)["noise"] is NoiseConfig and issubclass(NoiseConfig, TeacherNoise)
    assert DataSection().noise == NoiseConfig(epsilon=0.1, field_dropout=0.1, field_extra=0.0, slip=0.0)
    assert LfoDataSection().noise == TeacherNoise(epsilon=0.1)  # a world whose teacher has no noise of its own
    assert WarmStartConfig(data=LfoDataSection(dir=tmp_path)).data == DataSection(dir=tmp_path, policy="prior")  # its defaults
    assert not {f.name for f in dataclasses.fields(NoiseConfig)} & {f.name for f in dataclasses.fields(DataSection)}
    assert all(f.metadata.get("help") for f in dataclasses.fields(NoiseConfig))
    explore = load_recipe("warmstart_micro_explore").config.data
    assert explore.noise == NoiseConfig(epsilon=0.1, field_dropout=0.1, field_extra=0.5)
    assert explore.probe_noise == explore.noise  # probe_noise_scale 1
    clean = load_recipe("warmstart_reading_clean").config.data
    assert clean.probe_noise == NoiseConfig() and not clean.probe_noise.active
    assert NoiseConfig(0.1, 0.2, 0.5, 0.4).scaled(0.5) == NoiseConfig(0.05, 0.1, 0.25, 0.2)
    own = tmp_path / "own.yaml"  # no base: only data.noise.slip is set
    own.write_text("kind: warmstart\ndata: {noise: {slip: 0.2}}\n")
    assert load_recipe(str(own)).config.data.noise == NoiseConfig(epsilon=0.1, field_dropout=0.1, slip=0.2)
    for override, message in (("data.noise.epsilon=2", "data.noise.epsilon must be in [0, 1], got 2.0"),
                              ("data.epsilon=0.2", "unknown key 'data.epsilon' (did you mean 'data.noise.epsilon'?)")):
        result = CliRunner().invoke(app, ["train", "--recipe", "warmstart_micro", "--set", override, "--dry-run"])
        lines = [ln for ln in result.output.splitlines() if ln.strip()]
        assert result.exit_code == 2 and lines == [f"error: recipe 'warmstart_micro': {message}"]


def test_the_key_hashes_the_noise_settings_not_their_layout(small_world_dir, monkeypatch):
    """The key hashes the settings, not their layout: a config's key equals the key of the same settings
    written by hand with the noise options flat in the data section (data.epsilon, ...), the layout the
    cached warm starts were keyed under, so they keep their keys."""
    import lfo_cli.models.warmstart_cache as ws
    from lfo_cli.recipes import config_to_dict

    cfg = load_recipe("warmstart_micro_explore", [f"data.dir={small_world_dir}", "model.name=smollm2-135m"]).config
    nested = config_to_dict(cfg)
    assert nested["data"]["noise"] == {"epsilon": 0.1, "field_dropout": 0.1, "field_extra": 0.5, "slip": 0.0}
    flat_data = {"dir": str(small_world_dir), "policy": "prior", "rollouts_per_task": 1, "max_tasks": None,
                 "fresh_tasks": 10000, "epsilon": 0.1, "field_dropout": 0.1, "field_extra": 0.5, "slip": 0.0,
                 "imitate_random": True, "probe_rate": 0.0, "probe_noise_scale": 1.0, "success_weight": 3,
                 "induction_rows": 0, "induction_max_len": 48}
    flat = {**nested, "data": flat_data}
    key = warmstart_key(cfg)
    with monkeypatch.context() as m:
        m.setattr(ws, "config_to_dict", lambda _cfg: json.loads(json.dumps(flat)))
        assert warmstart_key(cfg) == key
    # the neutral values are left out of the flat form: data.noise.slip 0 is no part of the key, 0.25 is
    slipped = load_recipe("warmstart_micro_explore", [f"data.dir={small_world_dir}", "model.name=smollm2-135m",
                                                      "data.noise.slip=0.25"]).config
    slipped_key = warmstart_key(slipped)
    assert slipped_key != key
    with monkeypatch.context() as m:
        m.setattr(ws, "config_to_dict", lambda _cfg: json.loads(json.dumps({**flat, "data": {**flat_data, "slip": 0.25}})))
        assert warmstart_key(cfg) == slipped_key
    for noise in ("epsilon=0.2", "field_dropout=0.2", "field_extra=0.25"):
        changed = load_recipe("warmstart_micro_explore", [f"data.dir={small_world_dir}", "model.name=smollm2-135m",
                                                          f"data.noise.{noise}"]).config
        assert warmstart_key(changed) != key


def test_missing_world_names_the_gen_env_command(tmp_path):
    cfg = WarmStartConfig(data=DataSection(dir=tmp_path / "nope"))
    with pytest.raises(LfoError, match="lfo gen-env"):
        run_warmstart(cfg, tmp_path / "out")


def test_summary_metrics_are_computed_from_turns_and_episodes():
    result = {
        "turns": [{"valid_tool_call": True, "final_reply": False}] * 9
        + [{"valid_tool_call": False, "final_reply": False}, {"valid_tool_call": False, "final_reply": True}],
        "episodes": [{"difficulty": 1, "success": True, "first_call": "right_department"},
                     {"difficulty": 2, "success": False, "first_call": "other_department"},
                     {"difficulty": 4, "success": False, "first_call": None}],
    }
    s = summarize_eval(result, teacher=[{"difficulty": 1, "reward": 1.0}, {"difficulty": 1, "reward": 0.0}],
                       categories=CustomerServiceWorld.episode_categories)
    assert s["eval/valid_tool_call_rate"] == pytest.approx(0.9) and s["eval/call_turns"] == 10
    assert s["eval/wellformed_turn_rate"] == pytest.approx(10 / 11)
    assert s["eval/success_d1_2"] == pytest.approx(0.5) and s["eval/success_d3_5"] == 0.0
    assert s["teacher/success_d1"] == 0.5
    assert s["eval/first_call/right_department"] == s["eval/first_call/none"] == pytest.approx(1 / 3)
    assert s["eval/first_call/unknown_number"] == 0.0
    assert sum(v for k, v in s.items() if k.startswith("eval/first_call/")) == pytest.approx(1.0)


def test_stratified_tasks_cover_every_difficulty():
    class T:
        def __init__(self, i, d):
            self.task_id, self.difficulty = f"t{i:03d}", d

    tasks = [T(i, 1 + i % 5) for i in range(50)]
    picked = stratified_tasks(tasks, 10)
    assert sorted(t.difficulty for t in picked) == [1, 1, 2, 2, 3, 3, 4, 4, 5, 5]


def test_tiny_sft_smoke_trains_saves_and_evaluates(tmp_path, tiny_model_dir, small_world_dir, monkeypatch):
    monkeypatch.setenv("LFO_HOME", str(tmp_path / "home"))
    cfg = WarmStartConfig(
        seed=1,
        model=ModelSection(name=str(tiny_model_dir), full_finetune=True),
        data=DataSection(dir=small_world_dir, rollouts_per_task=1, max_tasks=8, induction_rows=6),
        train=TrainSection(max_steps=3, batch_size=4, learning_rate=1e-3, logging_steps=1, save_steps=2),
        eval=EvalSection(num_tasks=4, samples_per_task=2, max_turns=2, max_new_tokens=12, batch_size=4),
    )
    out = tmp_path / "run"
    summary = run_warmstart(cfg, out)
    # trained: weights moved from the initialisation
    before = load_file(tiny_model_dir / "model.safetensors")
    after = load_file(out / "model" / "model.safetensors")
    assert any(not torch.equal(before[k], after[k]) for k in before)
    # recorded: metrics, evaluation tables, metadata, SFT data
    rows = [json.loads(line) for line in (out / "metrics.jsonl").read_text().splitlines()]
    assert rows and all("losses/loss" in r for r in rows if "losses/loss" in r) and rows[-1]["step"] <= 3
    for name in ("summary.json", "eval_by_difficulty.csv", "eval_by_difficulty.png", "run_metadata.json",
                 "sft_trajectories.jsonl", "eval_episodes.jsonl"):
        assert (out / name).is_file(), name
    assert summary["train/steps"] == 3 and summary["eval/episodes"] == 8 and summary["eval/samples_per_task"] == 2
    played = [json.loads(line)["task_id"] for line in (out / "eval_episodes.jsonl").read_text().splitlines()]
    assert len(set(played)) == 4 and all(played.count(t) == 2 for t in played)  # every val task twice
    assert 0 < summary["eval/call_turns"] <= summary["eval/assistant_turns"]
    assert summary["data/induction_rows"] == 6 and summary["data/sequences"] == 8
    assert 0.0 <= summary["eval/valid_tool_call_rate"] <= 1.0
    assert json.loads((out / "run_metadata.json").read_text())["config"]["seed"] == 1
    # the finished run is registered in the cache, and ensure_warmstart reuses it without training
    cached = ensure_warmstart(cfg)
    assert cached.parent.name.endswith(warmstart_key(cfg)) and cache.is_complete(cached.parent)
    assert (cached / "model.safetensors").is_file()


def test_evaluate_agent_with_an_external_generator(tiny_tokenizer, small_world_dir):
    """The generate_fn hook (used by the vLLM backend): no local model, calls parsed like GRPO."""
    from lfo_cli.env.plugin import CustomerServiceWorld
    from lfo_cli.models.agent_eval import evaluate_agent

    world = CustomerServiceWorld.load(small_world_dir)
    tasks = world.tasks("val")[:3]
    call = '<tool_call>\n{"name": "search_company", "arguments": {"company_name": "%s"}}\n</tool_call>'
    seen = []

    def generate(prompt_ids, temperature, max_new_tokens, seed):
        seen.append(len(prompt_ids))
        # first turn: a valid search; afterwards: a plain reply, which ends the episode
        texts = [call % tasks[0].company_name if len(seen) == 1 else "Done." for _ in prompt_ids]
        return [tiny_tokenizer(t + "<|im_end|>", add_special_tokens=False)["input_ids"] for t in texts]

    result = evaluate_agent(None, tiny_tokenizer, world, tasks, generate_fn=generate, seed=0)
    assert seen == [3, 3]  # one batched call per turn, all three episodes in it
    assert all(t["valid_tool_call"] for t in result["turns"][:3])
    assert [e["ended_by"] for e in result["episodes"]] == ["final_reply"] * 3
    assert all(set(world.episode_fields) <= set(e) for e in result["episodes"])


def test_dry_run_says_whether_the_warm_start_is_built_and_what_it_took(tmp_path, monkeypatch):
    import json

    from typer.testing import CliRunner

    from lfo_cli.cli import app
    from lfo_cli.models.warmstart_cache import warmstart_status

    monkeypatch.setenv("LFO_HOME", str(tmp_path))
    args = ["train", "--recipe", "dual_lora_micro", "--dry-run"]
    first = CliRunner().invoke(app, args)
    assert first.exit_code == 0 and "warm start 'warmstart_micro_long': not built yet" in first.stderr
    assert "kind: grpo" in first.stdout and "warm start" not in first.stdout  # stdout stays the recipe
    st = warmstart_status("warmstart_micro_long", data_dir="data")
    path = tmp_path / "warmstart" / st["path"].rsplit("/", 1)[-1]
    (path / "model").mkdir(parents=True)
    (path / "lfo_cache.json").write_text(json.dumps({"total_seconds": 2448.0, "key": path.name}))
    built = CliRunner().invoke(app, args)
    assert f"cached at {path}, built in 40.8 min" in built.stderr
    (path / "lfo_cache.json").write_text(json.dumps({"key": path.name, "train/steps": 331, "train/planned_steps": 900}))
    cut = CliRunner().invoke(app, args)
    assert "is budget-stopped and will be refused" in cut.stderr
    assert "`lfo models build warmstart_micro_long --data-dir data --force`" in cut.stderr
    assert json.loads(CliRunner().invoke(app, [*args, "--json"]).stdout)["kind"] == "grpo"


def test_a_warm_start_drawn_per_seed_is_its_own_cache_entry(tmp_path, monkeypatch):
    """`model.warmstart_per_seed`: the run's warm start is its recipe built with the run's seed, a cache entry of
    its own (another key than the recipe's own seed), and the dry run reports that entry."""
    import json

    from typer.testing import CliRunner

    from lfo_cli.cli import app
    from lfo_cli.models.warmstart_cache import warmstart_status
    from lfo_cli.recipes import load_recipe

    monkeypatch.setenv("LFO_HOME", str(tmp_path))
    rec = load_recipe("dual_lora_micro", ["model.warmstart_per_seed=true", "seed=3"])
    assert rec.config.warmstart_overrides() == ["seed=3"]
    assert load_recipe("dual_lora_micro", ["seed=3"]).config.warmstart_overrides() == []
    assert load_recipe("dual_lora_micro", ["model.warmstart_per_seed=true", "model.warmstart=null"]).config \
        .warmstart_overrides() == []
    own = warmstart_status("warmstart_micro_long", data_dir="data")["path"]
    drawn = {s: warmstart_status("warmstart_micro_long", data_dir="data", overrides=[f"seed={s}"])["path"] for s in (3, 4)}
    assert len({own, *drawn.values()}) == 3
    path = tmp_path / "warmstart" / drawn[3].rsplit("/", 1)[-1]
    (path / "model").mkdir(parents=True)
    (path / "lfo_cache.json").write_text(json.dumps({"total_seconds": 60.0, "key": path.name}))
    args = ["train", "--recipe", "dual_lora_micro", "--dry-run", "--set", "model.warmstart_per_seed=true"]
    assert f"cached at {path}, built in 1.0 min" in CliRunner().invoke(app, [*args, "--seed", "3"]).stderr
    fresh = CliRunner().invoke(app, [*args, "--seed", "4"]).stderr
    # the line that builds it names the run's draw (its seed), or it would build another entry
    assert "not built yet" in fresh and "`lfo models build warmstart_micro_long --data-dir data --set seed=4`" in fresh
    assert "not built yet" in CliRunner().invoke(app, args[:4] + ["--seed", "3"]).stderr  # the recipe's own seed


def test_models_build_set_is_for_warm_start_recipes_only():
    from typer.testing import CliRunner

    from lfo_cli.cli import app

    out = CliRunner().invoke(app, ["models", "build", "micro", "--set", "seed=1"])
    assert out.exit_code == 2 and "--set apply to warm-start recipes" in out.output


def test_the_warm_start_prints_a_few_judged_figures_not_every_metric():
    from lfo_cli.models.warmstart_outputs import summary_rows

    summary = {"train/steps": 340, "train/seconds": 250.4, "train/loss": 0.51, "data/trajectories": 2000,
               "data/sequences": 3200, "eval/valid_tool_call_rate": 0.9, "eval/success_rate": 0.1,
               "eval/success_d1": 0.3, "eval/success_d2": 0.05, "eval/success_d4": 0.0,
               "eval/first_call/none": 0.02, "data/max_tokens": 800, "teacher/success_d1": 0.7}
    rows = dict(summary_rows(summary))
    assert rows["SFT"] == "340 steps, 250 s, final loss 0.510" and rows["data"] == "2000 trajectories -> 3200 sequences"
    assert rows["success by difficulty"] == "d1, d2, d4: 0.30 / 0.05 / 0.00"  # not a range when one is missing
    assert rows["the teacher, by difficulty"] == "d1: 0.70" and rows["valid tool calls"] == "0.900"
    assert len(rows) <= 8 and "eval/first_call/none" not in str(rows)
    assert dict(summary_rows({"train/steps": 3})).keys() == {"SFT"}
    # of each of the world's episode categories, the share of its first value (the one a good policy reaches)
    categories = {"first_call": ("right_department", "other_department", None), "door": (None, "open")}
    rows = dict(summary_rows({**summary, "eval/first_call/right_department": 0.4}, categories))
    assert rows["first call: right department"] == "0.400" and not any("door" in k or "other" in k for k in rows)


def test_a_world_model_warm_start_adds_the_replies_loss_on_the_same_steps(tmp_path, tiny_model_dir, small_world_dir,
                                                                         tiny_tokenizer, monkeypatch):
    """train.reply_loss_weight: the reply masks cover exactly the rep's replies to phone calls; the SFT runs
    the same steps, logs reply_loss, and ends with other weights than the plain warm start."""
    from lfo_cli.env import load_world
    from lfo_cli.models import prompts as P
    from lfo_cli.models.reply_loss import reply_masks
    from lfo_cli.models.sft_data import collect_sft_trajectories, tokenize_trajectories

    world = load_world(small_world_dir)
    cfg = WarmStartConfig(data=DataSection(dir=small_world_dir, rollouts_per_task=1, max_tasks=4))
    trajs = collect_sft_trajectories(cfg, CustomerServiceWorld(world))
    tools = P.tool_schemas(__import__("lfo_cli.env.trl_env", fromlist=["x"]).CustomerServiceEnv)
    (row, *_), _ = tokenize_trajectories(tiny_tokenizer, trajs, tools, 4096, reply_tools=("make_phone_call",))
    marked = tiny_tokenizer.decode([t for t, m in zip(row["input_ids"], row["reply_masks"], strict=True) if m])
    phone = [m["content"] for m in trajs[0]["messages"] if m["role"] == "tool" and m["name"] == "make_phone_call"]
    assert phone and all(reply.strip() in marked for reply in phone)
    assert not any(m and a for m, a in zip(row["reply_masks"], row["assistant_masks"], strict=True))
    assert sum(reply_masks(tiny_tokenizer, row["input_ids"], row["assistant_masks"], trajs[0]["messages"], ())) == 0

    monkeypatch.setenv("LFO_HOME", str(tmp_path / "home"))
    out = {}
    for weight in (0.0, 0.5):
        run_cfg = WarmStartConfig(
            seed=1, model=ModelSection(name=str(tiny_model_dir), full_finetune=True),
            data=DataSection(dir=small_world_dir, rollouts_per_task=1, max_tasks=8, induction_rows=2),
            train=TrainSection(max_steps=3, batch_size=4, logging_steps=1, save_steps=10, reply_loss_weight=weight),
            eval=EvalSection(num_tasks=0))
        summary = run_warmstart(run_cfg, tmp_path / f"w{weight}")
        assert summary["train/steps"] == summary["train/planned_steps"] == 3
        out[weight] = (tmp_path / f"w{weight}" / "model" / "model.safetensors").read_bytes()
    logged = [json.loads(line) for line in (tmp_path / "w0.5" / "metrics.jsonl").read_text().splitlines()]
    assert any(r.get("losses/reply_loss", 0) > 0 for r in logged)
    assert out[0.0] != out[0.5]
    # its own compute_loss keeps every metric TRL's logs (entropy, token accuracy, tokens seen), as numbers
    plain = [json.loads(line) for line in (tmp_path / "w0.0" / "metrics.jsonl").read_text().splitlines()]
    assert {k for r in plain for k in r} <= {k for r in logged for k in r}
    assert any(0 < r.get("charts/mean_token_accuracy", -1) <= 1 for r in logged)


def test_fresh_companies_play_the_sft_tasks_in_a_world_of_their_own(small_world_dir):
    """data.fresh_companies: SFT tasks on newly generated companies whose numbers the world never uses, the same
    ones on every call; evaluation stays on the world. Off (0) it is no part of the key."""
    from lfo_cli.env.teacher import sft_world
    from lfo_cli.env.world import normalize_phone
    from lfo_cli.env.world_files import load_world
    from lfo_cli.models.sft_data import collect_sft_trajectories
    from lfo_cli.models.warmstart_cache import resolve_config, warmstart_key

    world = load_world(small_world_dir)
    _, cfg = resolve_config("warmstart_micro", [f"data.dir={small_world_dir}", "data.fresh_tasks=30",
                                                "data.fresh_companies=40"])
    fresh = sft_world(cfg.data, cfg.seed, world)
    assert len(fresh.companies) == len(fresh.train_company_ids) == 40 and not fresh.heldout_company_ids
    assert not set(fresh.phone_index) & set(world.phone_index)
    assert sorted(fresh.phone_index) == sorted(sft_world(cfg.data, cfg.seed, world).phone_index)  # seeded, not random
    trajectories = collect_sft_trajectories(cfg, CustomerServiceWorld(world))
    assert len(trajectories) == 30 and {t["task_id"] for t in trajectories} <= {f"sft-{i:05d}" for i in range(30)}
    dialled = {normalize_phone(c["function"]["arguments"]["phone_number"]) for t in trajectories
               for m in t["messages"] for c in m.get("tool_calls") or [] if c["function"]["name"] == "make_phone_call"}
    assert len(dialled & set(fresh.phone_index)) > 10
    assert not dialled & set(world.phone_index)  # no number of the world's own companies is ever dialled
    _, plain = resolve_config("warmstart_micro", [f"data.dir={small_world_dir}", "data.fresh_tasks=30"])
    _, zero = resolve_config("warmstart_micro", [f"data.dir={small_world_dir}", "data.fresh_tasks=30",
                                                 "data.fresh_companies=0"])
    assert warmstart_key(plain) == warmstart_key(zero) != warmstart_key(cfg)
    with pytest.raises(LfoError, match="data.fresh_companies needs data.fresh_tasks > 0"):
        resolve_config("warmstart_micro", ["data.fresh_tasks=0", "data.fresh_companies=10"])


def test_a_per_seed_draw_is_named_with_its_seed_in_every_hint(tmp_path, monkeypatch):
    """A run's own draw (`model.warmstart_per_seed`) that is missing or unusable is named by the command that
    builds that draw, with its `--set seed=N`: without it the hint would build the recipe's own seed."""
    from lfo_cli.models.warmstart import ensure_warmstart
    from lfo_cli.models.warmstart_cache import warmstart_status

    monkeypatch.setenv("LFO_HOME", str(tmp_path))
    with pytest.raises(LfoError, match=r"lfo models build warmstart_micro_long --data-dir data --set seed=4$"):
        ensure_warmstart("warmstart_micro_long", data_dir="data", overrides=["seed=4"], build=False)
    path = tmp_path / "warmstart" / warmstart_status("warmstart_micro_long", data_dir="data",
                                                     overrides=["seed=4"])["path"].rsplit("/", 1)[-1]
    (path / "model").mkdir(parents=True)
    (path / "lfo_cache.json").write_text(json.dumps({"key": "micro-elsewhere"}))  # copied from another entry
    with pytest.raises(LfoError, match=r"lfo models build warmstart_micro_long --set seed=4 --force"):
        ensure_warmstart("warmstart_micro_long", data_dir="data", overrides=["seed=4"], build=False)
