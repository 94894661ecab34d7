"""Supervised warm start: teach a base model the tool-calling format from environment trajectories.

Why (issue #4): SmolLM2-135M-Instruct made 0 well-formed tool calls in 32 samples at temperature
1.0, and a from-scratch model knows nothing at all; GRPO then sees identical rewards in every group
and its gradient is exactly zero. So before RL the model imitates the environment's ``prior``
reference policy (industry priors + rep feedback, never the hidden requirements) with noise
(random wrong calls, dropped form fields), NOT the oracle: the warm-started agent can call tools
but still has much to learn.

The trajectories are rendered with the same chat template, system prompt and tool schema that GRPO
uses (:mod:`lfo_cli.models.prompts`), tokenized with TRL's generation-tagged twin of the template
and trained with TRL's ``SFTTrainer`` (loss on assistant turns only). ``micro`` is trained whole;
larger models get a LoRA that is merged into the base. Afterwards the model plays the val tasks at
temperature 1.0 and we record the rate of assistant turns that parse as valid tool calls (TRL's own
``parse_response``) and success by difficulty.

``lfo train --recipe warmstart_micro --out runs/ws`` runs it; :func:`ensure_warmstart` returns the
cached warm-started checkpoint (under ``$LFO_HOME/warmstart``), building it if missing.
"""

from __future__ import annotations

import hashlib
import json
import math
import random
import shutil
import time
from collections import defaultdict
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Literal

from lfo_cli.errors import LfoError
from lfo_cli.io import (
    append_jsonl,
    atomic_write_json,
    atomic_write_jsonl,
    atomic_write_text,
    read_json,
    run_metadata,
)
from lfo_cli.models import cache
from lfo_cli.models import prompts as P


# ---- configuration ---------------------------------------------------------------------------
@dataclass
class ModelSection:
    name: str = field(default="micro", metadata={"help": "Base model: micro, smollm2-135m, a local path or a hub id."})
    dtype: Literal["float32", "bfloat16", "float16"] = field(
        default="float32", metadata={"help": "Training dtype (float32 on CPU)."}
    )
    full_finetune: bool | None = field(
        default=None,
        metadata={"help": "Train every weight (default for micro, which starts from scratch) instead of a LoRA "
                  "merged into the base (default for pretrained models)."},
    )
    lora_r: int = field(default=16, metadata={"help": "LoRA rank (pretrained bases)."})
    lora_alpha: int = field(default=32, metadata={"help": "LoRA alpha."})
    lora_dropout: float = field(default=0.05, metadata={"help": "LoRA dropout."})
    lora_target_modules: list[str] = field(
        default_factory=lambda: ["q_proj", "k_proj", "v_proj", "o_proj", "gate_proj", "up_proj", "down_proj"],
        metadata={"help": "Modules that get LoRA weights. All linear layers: teaching a format needs the MLPs too."},
    )

    def __post_init__(self) -> None:
        if not self.name:
            raise LfoError("model.name must name a model (micro, smollm2-135m, a path or a hub id)")
        if self.lora_r < 1 or self.lora_alpha < 1:
            raise LfoError("model.lora_r and model.lora_alpha must be >= 1")
        if not 0.0 <= self.lora_dropout < 1.0:
            raise LfoError(f"model.lora_dropout must be in [0, 1), got {self.lora_dropout}")

    @property
    def is_full(self) -> bool:
        return self.full_finetune if self.full_finetune is not None else self.name == "micro"


@dataclass
class DataSection:
    dir: Path = field(default=Path("data"), metadata={"help": "World written by `lfo gen-env` (train tasks are "
                                                             "the SFT prompts, val tasks the evaluation)."})
    policy: Literal["prior", "probe", "random"] = field(
        default="prior",
        metadata={"help": "Reference policy to imitate. The oracle (hidden requirements) is deliberately not "
                  "allowed: the warm start must leave room for RL."},
    )
    rollouts_per_task: int = field(default=2, metadata={"help": "Noisy rollouts per train task."})
    max_tasks: int | None = field(default=None, metadata={"help": "Use at most this many train tasks (None: all)."})
    fresh_tasks: int = field(
        default=0,
        metadata={"help": "Imitate on this many newly drawn tasks of the training companies instead of the world's "
                  "train tasks (0: the train tasks). Fresh tasks keep the RL train tasks unseen, so a small model "
                  "cannot memorise the tasks RL is then rewarded on, and give more distinct customers per epoch."},
    )
    epsilon: float = field(
        default=0.1,
        metadata={"help": "Probability that a step is replaced by a random call (wrong guesses, extra calls)."},
    )
    field_dropout: float = field(
        default=0.1, metadata={"help": "Probability of dropping each field from the policy's form (wrong guesses)."}
    )
    field_extra: float = field(
        default=0.0,
        metadata={"help": "Probability that the teacher's form also asks for one random field it would not ask for: "
                  "a warm start whose forms sometimes go beyond the industry prior, so that RL can find a company "
                  "exception's field (it still knows no exception)."},
    )
    slip: float = field(
        default=0.0,
        metadata={"help": "Probability that the teacher first makes a search or call with a copy slip (mistyped "
                  "name/number/value, another department's number) and then recovers after the error reply. "
                  "Slipped turns are kept in context but carry no loss: the model learns to recover, not to slip."},
    )
    imitate_random: bool = field(
        default=True,
        metadata={"help": "Train on the teacher's random replacement actions (epsilon) like on its other turns. "
                  "False keeps them in context with no loss, as for slips: the model sees detours and recovers "
                  "from them but never learns to emit a company, number or value the conversation did not show."},
    )
    success_weight: int = field(
        default=1, metadata={"help": "Duplicate successful trajectories this many times (1 = plain imitation)."}
    )
    induction_rows: int = field(
        default=0,
        metadata={"help": "Synthetic rows 'A + A' (random tokens, loss on the repeat) mixed into the SFT data so a "
                  "from-scratch model forms the copying circuit that phone numbers and form values need "
                  "(lfo_cli.models.induction). 0: none."},
    )
    induction_max_len: int = field(default=48, metadata={"help": "Longest random sequence A of an induction row."})

    def noise(self):
        """The teacher's :class:`~lfo_cli.env.policies.NoiseConfig` (SFT data and the teacher baseline)."""
        from lfo_cli.env.policies import NoiseConfig

        return NoiseConfig(epsilon=self.epsilon, field_dropout=self.field_dropout, slip=self.slip,
                           field_extra=self.field_extra)

    def __post_init__(self) -> None:
        if self.rollouts_per_task < 1:
            raise LfoError(f"data.rollouts_per_task must be >= 1, got {self.rollouts_per_task}")
        if self.max_tasks is not None and self.max_tasks < 1:
            raise LfoError(f"data.max_tasks must be >= 1 or null, got {self.max_tasks}")
        if self.fresh_tasks < 0:
            raise LfoError(f"data.fresh_tasks must be >= 0, got {self.fresh_tasks}")
        for name in ("epsilon", "field_dropout", "slip", "field_extra"):
            v = getattr(self, name)
            if not 0.0 <= v <= 1.0:
                raise LfoError(f"data.{name} must be in [0, 1], got {v}")
        if self.success_weight < 1:
            raise LfoError(f"data.success_weight must be >= 1, got {self.success_weight}")
        if self.induction_rows < 0:
            raise LfoError(f"data.induction_rows must be >= 0, got {self.induction_rows}")
        if not 8 <= self.induction_max_len <= 512:
            raise LfoError(f"data.induction_max_len must be in [8, 512], got {self.induction_max_len}")


@dataclass
class TrainSection:
    epochs: float = field(default=4.0, metadata={"help": "Passes over the SFT trajectories."})
    max_steps: int = field(default=-1, metadata={"help": "Stop after this many optimizer steps (-1: use epochs)."})
    max_minutes: float | None = field(
        default=None, metadata={"help": "Wall-clock budget for training; stops cleanly at the next step after it."}
    )
    batch_size: int = field(default=16, metadata={"help": "Sequences per optimizer step (before accumulation)."})
    gradient_accumulation_steps: int = field(default=1, metadata={"help": "Micro-batches per optimizer step."})
    learning_rate: float = field(
        default=1e-3, metadata={"help": "Peak lr. 1e-3 suits a 4M model from scratch; LoRA on a pretrained base ~2e-4."}
    )
    warmup_ratio: float = field(default=0.05, metadata={"help": "Fraction of steps of linear warmup."})
    weight_decay: float = field(default=0.01, metadata={"help": "AdamW weight decay."})
    max_length: int = field(
        default=1024, metadata={"help": "Longer tokenized trajectories are dropped (not truncated: a cut episode "
                                        "would teach the model to stop mid-task)."}
    )
    logging_steps: int = field(default=10, metadata={"help": "Log every N steps (metrics.jsonl)."})
    save_steps: int = field(default=100, metadata={"help": "Checkpoint every N steps (for --resume)."})
    threads: int | None = field(default=None, metadata={"help": "torch threads (None: torch's default)."})

    def __post_init__(self) -> None:
        if self.epochs <= 0 and self.max_steps <= 0:
            raise LfoError("train: set epochs > 0 or max_steps > 0")
        if self.batch_size < 1 or self.gradient_accumulation_steps < 1:
            raise LfoError("train.batch_size and train.gradient_accumulation_steps must be >= 1")
        if self.learning_rate <= 0:
            raise LfoError(f"train.learning_rate must be > 0, got {self.learning_rate}")
        if not 0 <= self.warmup_ratio < 1:
            raise LfoError(f"train.warmup_ratio must be in [0, 1), got {self.warmup_ratio}")
        if self.max_length < 64:
            raise LfoError(f"train.max_length must be >= 64, got {self.max_length}")
        if self.max_minutes is not None and self.max_minutes <= 0:
            raise LfoError(f"train.max_minutes must be > 0 or null, got {self.max_minutes}")
        if self.logging_steps < 1 or self.save_steps < 1:
            raise LfoError("train.logging_steps and train.save_steps must be >= 1")


@dataclass
class EvalSection:
    num_tasks: int = field(default=100, metadata={"help": "Val tasks played after training (0: skip evaluation)."})
    samples_per_task: int = field(
        default=1,
        metadata={"help": "Episodes sampled per val task (same environment seed, new model samples): more sampled "
                  "turns for the valid-call rate and more episodes per difficulty for success, at k times the cost."},
    )
    temperature: float = field(default=1.0, metadata={"help": "Sampling temperature (1.0, as in GRPO rollouts)."})
    max_turns: int = field(default=16, metadata={"help": "Tool calls per episode (the environment's limit)."})
    max_new_tokens: int = field(default=128, metadata={"help": "Token budget of one assistant turn."})
    batch_size: int = field(default=50, metadata={"help": "Episodes generated together."})
    min_valid_rate: float | None = field(
        default=None, metadata={"help": "Fail the run (exit 2) if the valid tool-call rate is below this."}
    )

    def __post_init__(self) -> None:
        if self.num_tasks < 0:
            raise LfoError(f"eval.num_tasks must be >= 0, got {self.num_tasks}")
        if not 1 <= self.samples_per_task <= 64:
            raise LfoError(f"eval.samples_per_task must be in [1, 64], got {self.samples_per_task}")
        if self.temperature <= 0:
            raise LfoError(f"eval.temperature must be > 0 (sampling), got {self.temperature}")
        if not 1 <= self.max_turns <= 64:
            raise LfoError(f"eval.max_turns must be in [1, 64], got {self.max_turns}")
        if self.max_new_tokens < 8 or self.batch_size < 1:
            raise LfoError("eval.max_new_tokens must be >= 8 and eval.batch_size >= 1")


@dataclass
class WarmStartConfig:
    """Recipe kind ``warmstart``: SFT on noisy reference-policy trajectories, then evaluation."""

    seed: int = field(default=0, metadata={"help": "Seeds data noise, initialisation order, shuffling and sampling."})
    model: ModelSection = field(default_factory=ModelSection)
    data: DataSection = field(default_factory=DataSection)
    train: TrainSection = field(default_factory=TrainSection)
    eval: EvalSection = field(default_factory=EvalSection)

    def __post_init__(self) -> None:
        if self.seed < 0:
            raise LfoError(f"seed must be >= 0, got {self.seed}")
        for name, cls in (("model", ModelSection), ("data", DataSection), ("train", TrainSection), ("eval", EvalSection)):
            if isinstance(getattr(self, name), dict):
                setattr(self, name, cls(**getattr(self, name)))


# ---- data ------------------------------------------------------------------------------------
def load_world_for(cfg: WarmStartConfig):
    from lfo_cli.env.world import MANIFEST_FILE, load_world

    if not (Path(cfg.data.dir) / MANIFEST_FILE).is_file():
        raise LfoError(
            f"{cfg.data.dir}: no environment data; create it with `lfo gen-env --seed 0 --output-dir {cfg.data.dir}` "
            "(or set data.dir)"
        )
    return load_world(cfg.data.dir)


def collect_sft_trajectories(cfg: WarmStartConfig, world) -> list[dict]:
    from lfo_cli.models.trajectories import collect_trajectories

    if cfg.data.fresh_tasks:
        from lfo_cli.env.world import fresh_training_tasks, sub_seed

        tasks = fresh_training_tasks(world, cfg.data.fresh_tasks, seed=sub_seed("sft", world.seed, cfg.seed))
    else:
        tasks = list(world.tasks.get("train", []))
    if cfg.data.max_tasks is not None:
        tasks = random.Random(cfg.seed).sample(tasks, min(cfg.data.max_tasks, len(tasks)))
    if not tasks:
        raise LfoError(f"{cfg.data.dir}: the world has no train tasks")
    return collect_trajectories(
        world, tasks, policy=cfg.data.policy, noise=cfg.data.noise(), seed=cfg.seed,
        rollouts_per_task=cfg.data.rollouts_per_task, imitate_random=cfg.data.imitate_random,
    )


def tokenize_trajectories(tokenizer, trajectories: list[dict], tools: list[dict], max_length: int):
    """``input_ids`` + ``assistant_masks`` with TRL's generation-tagged training template.

    We tokenize here (exactly as SFTTrainer's own ``tokenize_fn`` would) rather than hand SFTTrainer
    the raw messages because a ``datasets`` column of tool-call arguments with different keys per
    tool is unified into one struct, and the missing keys would render as ``null`` arguments.
    """
    from trl.chat_template_utils import get_training_chat_template

    template = get_training_chat_template(tokenizer)
    rows, dropped = [], 0
    for traj in trajectories:
        out = tokenizer.apply_chat_template(
            traj["messages"], tools=tools, chat_template=template, tokenize=True, return_dict=True,
            return_assistant_tokens_mask=True,
        )
        ids, mask = list(out["input_ids"]), list(out["assistant_masks"])
        if len(ids) > max_length:
            dropped += 1
            continue
        if 1 not in mask:
            raise LfoError("the chat template produced no assistant tokens (generation markers missing)")
        weights = [m.get("weight", 1) for m in traj["messages"] if m["role"] == "assistant"]
        if 0 in weights:
            mask = _zero_assistant_turns(mask, weights)
        rows.append({"input_ids": ids, "assistant_masks": mask})
    return rows, dropped


def assistant_spans(mask: list[int]) -> list[tuple[int, int]]:
    """``(start, end)`` of each run of assistant tokens in an assistant mask: one per assistant turn."""
    runs, start = [], None
    for i, m in enumerate([*mask, 0]):
        if m and start is None:
            start = i
        elif not m and start is not None:
            runs.append((start, i))
            start = None
    return runs


def _zero_assistant_turns(mask: list[int], weights: list) -> list[int]:
    """``mask`` with the k-th run of assistant tokens zeroed wherever ``weights[k] == 0``."""
    runs = assistant_spans(mask)
    if len(runs) != len(weights):
        raise LfoError(f"the chat template marked {len(runs)} assistant spans for {len(weights)} assistant "
                       "messages; cannot drop the loss of single turns")
    out = list(mask)
    for (a, b), w in zip(runs, weights, strict=True):
        if w == 0:
            out[a:b] = [0] * (b - a)
    return out


# ---- evaluation: the model plays the environment, parsed exactly like GRPO -------------------
def stratified_tasks(tasks: list, n: int) -> list:
    """``n`` tasks taken round-robin over difficulties (in task-id order), so every level is measured."""
    by: dict[int, list] = defaultdict(list)
    for t in sorted(tasks, key=lambda t: t.task_id):
        by[t.difficulty].append(t)
    out, levels = [], sorted(by)
    while len(out) < min(n, len(tasks)):
        for d in levels:
            if by[d] and len(out) < n:
                out.append(by[d].pop(0))
    return out


# Episode info fields kept per evaluated episode (behaviour metrics of transfer-eval and validation).
BEHAVIOUR_FIELDS = ("auth_before_first_call", "department_order_correct", "phone_calls", "forms_submitted", "form_fields",
                    "invalid_tool_calls", "first_call")


def evaluate_agent(
    model, tokenizer, world, tasks: list, *, temperature: float = 1.0, max_turns: int = 16,
    max_new_tokens: int = 128, batch_size: int = 50, seed: int = 0, progress=None, generate_fn=None,
) -> dict[str, Any]:
    """Play ``tasks`` with the model; returns per-turn validity and per-episode outcomes.

    ``generate_fn(prompt_ids, temperature, max_new_tokens, seed) -> list[list[int]]`` replaces
    ``model.generate`` (e.g. vLLM with a ``LoRARequest``, ``lfo_cli.eval.vllm_backend``); ``model``
    may then be None. Episodes carry the environment's behaviour fields (auth before the first call,
    department order, phone calls, forms, invalid calls).

    Each assistant turn is sampled at ``temperature`` from the chat-templated conversation and
    parsed with TRL's ``parse_response`` (the GRPO tool loop's parser). A turn is a *valid tool
    call* when it holds exactly one call to a known tool with an argument object. A turn without a
    tool call ends the episode, as in TRL.
    """
    import torch
    from trl.chat_template_utils import add_response_schema, parse_response

    from lfo_cli.env.episode import Episode
    from lfo_cli.env.trl_env import CustomerServiceEnv
    from lfo_cli.env.world import sub_seed
    from lfo_cli.models.trajectories import FINAL_REPLY

    tools = P.tool_schemas(CustomerServiceEnv)
    tool_names = {t["function"]["name"] for t in tools}
    if getattr(tokenizer, "response_template", None) is None and getattr(tokenizer, "response_schema", None) is None:
        add_response_schema(tokenizer)
    tokenizer.padding_side = "left"
    if model is not None:
        model.eval()
    torch.manual_seed(seed)
    episodes, turns, samples = [], [], []
    for start in range(0, len(tasks), batch_size):
        chunk = tasks[start:start + batch_size]
        envs = [Episode(world, max_turns=max_turns) for _ in chunk]
        convs = []
        for env, task in zip(envs, chunk, strict=True):
            convs.append(P.build_messages(env.reset(task, sub_seed("warmstart-eval", seed, task.task_id) % 2**31)))
        active = list(range(len(chunk)))
        ended_by = ["max_turns"] * len(chunk)
        while active:
            prompt_ids = [
                tokenizer.apply_chat_template(convs[i], tools=tools, add_generation_prompt=True, tokenize=True,
                                              return_dict=False)
                for i in active
            ]
            if generate_fn is not None:
                generated = generate_fn(prompt_ids, temperature, max_new_tokens, seed + start)
            else:
                batch = tokenizer.pad({"input_ids": prompt_ids}, return_tensors="pt", padding_side="left").to(model.device)
                with torch.no_grad():
                    out = model.generate(
                        **batch, do_sample=True, temperature=temperature, top_k=0, top_p=1.0,
                        max_new_tokens=max_new_tokens, pad_token_id=tokenizer.pad_token_id,
                        eos_token_id=tokenizer.eos_token_id,
                    )
                width = batch["input_ids"].shape[1]
                generated = [out[row, width:].tolist() for row in range(len(active))]
            still = []
            for row, i in enumerate(active):
                ids = generated[row]
                if tokenizer.eos_token_id in ids:
                    ids = ids[: ids.index(tokenizer.eos_token_id) + 1]
                else:
                    ids = [t for t in ids if t != tokenizer.pad_token_id]
                msg = parse_response(tokenizer, ids, prefix=prompt_ids[row], tools=tools)
                valid = P.valid_tool_call(msg, tool_names)
                is_final = not msg.get("tool_calls") and (msg.get("content") or "").strip() == FINAL_REPLY
                turns.append({"valid_tool_call": valid, "final_reply": is_final, "task_id": chunk[i].task_id})
                # the first 40 turns, and every malformed one (up to 200 in all): what to look at first
                if len(samples) < 40 or (not valid and not is_final and len(samples) < 200):
                    samples.append({"task_id": chunk[i].task_id, "text": tokenizer.decode(ids), "valid": valid})
                calls = msg.get("tool_calls") or []
                if not calls:
                    ended_by[i] = "final_reply" if is_final else "no_tool_call"
                    continue
                convs[i].append({"role": "assistant", "content": msg.get("content") or "", "tool_calls": calls})
                for call in calls:
                    fn = call.get("function", {})
                    args = fn.get("arguments")
                    obs = envs[i].step(fn.get("name"), args if isinstance(args, dict) else {})
                    convs[i].append(P.tool_result_message(str(fn.get("name")), obs))
                if envs[i].done:
                    ended_by[i] = "success" if envs[i].success else "max_turns"
                else:
                    still.append(i)
            active = still
            if progress is not None:
                progress(len(chunk) - len(active), len(chunk))
        for env, task, how in zip(envs, chunk, ended_by, strict=True):
            info = env.info()
            episodes.append({"task_id": task.task_id, "difficulty": task.difficulty, "success": bool(info["success"]),
                             "turns": info["turns"], "ended_by": how,
                             **{k: info[k] for k in BEHAVIOUR_FIELDS if k in info}})
    return {"turns": turns, "episodes": episodes, "samples": samples}


def episode_outcomes(result: dict[str, Any]) -> list[list]:
    """``[[task_id, 0 | 1], ...]`` per episode of an ``evaluate_agent`` result, in evaluation order: what a
    paired comparison of two evaluations of the same episodes lines up."""
    return [[e["task_id"], int(bool(e["success"]))] for e in result["episodes"]]


def summarize_eval(result: dict[str, Any], teacher: list[dict] | None = None) -> dict[str, Any]:
    turns, eps = result["turns"], result["episodes"]
    call_turns = [t for t in turns if not t["final_reply"]]
    out: dict[str, Any] = {
        "eval/assistant_turns": len(turns),
        "eval/call_turns": len(call_turns),  # the valid-call rate's denominator (turns other than the final reply)
        "eval/valid_tool_call_rate": sum(t["valid_tool_call"] for t in call_turns) / max(1, len(call_turns)),
        "eval/wellformed_turn_rate": sum(t["valid_tool_call"] or t["final_reply"] for t in turns) / max(1, len(turns)),
        "eval/success_rate": sum(e["success"] for e in eps) / max(1, len(eps)),
        "eval/episodes": len(eps),
    }
    by = defaultdict(list)
    for e in eps:
        by[e["difficulty"]].append(e["success"])
    for d, v in sorted(by.items()):
        out[f"eval/success_d{d}"] = sum(v) / len(v)
        out[f"eval/episodes_d{d}"] = len(v)
    if eps and any("first_call" in e for e in eps):  # share of episodes by where the first call went
        from lfo_cli.env.episode import FIRST_CALL_OUTCOMES

        for outcome in (*FIRST_CALL_OUTCOMES, None):
            out[f"eval/first_call/{outcome or 'none'}"] = sum(e.get("first_call") == outcome for e in eps) / len(eps)
    lo = [e["success"] for e in eps if e["difficulty"] <= 2]
    hi = [e["success"] for e in eps if e["difficulty"] >= 3]
    out["eval/success_d1_2"] = sum(lo) / len(lo) if lo else None
    out["eval/success_d3_5"] = sum(hi) / len(hi) if hi else None
    if teacher:
        tb = defaultdict(list)
        for t in teacher:
            tb[t["difficulty"]].append(t["reward"] >= 1.0)
        for d, v in sorted(tb.items()):
            out[f"teacher/success_d{d}"] = sum(v) / len(v)
    return out


def _write_eval_tables(out_dir: Path, summary: dict[str, Any]) -> None:
    """eval_by_difficulty.csv and .png (model vs the noisy teacher on the same val tasks)."""
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt
    import pandas as pd

    diffs = sorted({int(k.rsplit("_d", 1)[1]) for k in summary if k.startswith("eval/success_d") and "_" not in k.rsplit("_d", 1)[1]})
    df = pd.DataFrame(
        {
            "difficulty": diffs,
            "episodes": [summary.get(f"eval/episodes_d{d}") for d in diffs],
            "model_success": [summary.get(f"eval/success_d{d}") for d in diffs],
            "teacher_success": [summary.get(f"teacher/success_d{d}") for d in diffs],
        }
    )
    atomic_write_text(out_dir / "eval_by_difficulty.csv", df.to_csv(index=False))
    fig, ax = plt.subplots(figsize=(5, 3))
    x = range(len(diffs))
    ax.bar([i - 0.2 for i in x], df["model_success"].fillna(0), width=0.4, label="warm-started model")
    ax.bar([i + 0.2 for i in x], df["teacher_success"].fillna(0), width=0.4, label="teacher (prior + noise)")
    ax.set_xticks(list(x), [str(d) for d in diffs])
    ax.set_xlabel("difficulty")
    ax.set_ylabel("val success")
    ax.set_ylim(0, 1)
    ax.legend(fontsize=7)
    ax.set_title(f"valid tool calls: {summary['eval/valid_tool_call_rate']:.1%}")
    fig.tight_layout()
    tmp = out_dir / ".eval_by_difficulty.png.tmp"
    fig.savefig(tmp, format="png", dpi=120)
    plt.close(fig)
    tmp.replace(out_dir / "eval_by_difficulty.png")


def _print_summary(summary: dict[str, Any]) -> None:
    from rich.console import Console
    from rich.table import Table

    table = Table(title=f"warm start: evaluation on val tasks (temperature {summary.get('eval/temperature', 1.0):.1f})")
    table.add_column("metric")
    table.add_column("value", justify="right")
    for k, v in summary.items():
        if k.startswith(("eval/", "teacher/", "data/", "train/")):
            table.add_row(k, f"{v:.3f}" if isinstance(v, float) else str(v))
    Console().print(table)


# ---- the run ----------------------------------------------------------------------------------
def _metrics_callback(path: Path, deadline: float | None):
    from transformers import TrainerCallback

    class _Cb(TrainerCallback):
        def on_log(self, args, state, control, logs=None, **kw):
            if logs:
                row = {"step": state.global_step, "epoch": state.epoch}
                for k, v in logs.items():
                    if isinstance(v, (int, float)) and math.isfinite(v):
                        key = k if "/" in k else (f"losses/{k}" if "loss" in k else f"charts/{k}")
                        row[key] = v
                append_jsonl(path, row)

        def on_step_end(self, args, state, control, **kw):
            if deadline is not None and time.time() > deadline:
                control.should_training_stop = True
                control.should_save = True
            return control

    return _Cb()


def _last_checkpoint(ckpt_dir: Path) -> str | None:
    from transformers.trainer_utils import get_last_checkpoint

    return get_last_checkpoint(str(ckpt_dir)) if ckpt_dir.is_dir() else None


def run_warmstart(cfg: WarmStartConfig, out_dir: Path, *, resume: bool = False) -> dict:
    """SFT + evaluation. Writes ``model/`` (the base checkpoint RL starts from), ``metrics.jsonl``,
    ``summary.json``, ``eval_by_difficulty.{csv,png}``, ``samples.jsonl``, ``run_metadata.json``."""
    world = load_world_for(cfg)  # first: a missing world is reported before the heavy imports
    import numpy as np
    import torch
    from datasets import Dataset
    from rich.progress import Progress
    from transformers import set_seed
    from trl import SFTConfig, SFTTrainer
    from trl.trainer.callbacks import RichProgressCallback

    from lfo_cli.env.trl_env import CustomerServiceEnv
    from lfo_cli.models.registry import load_model
    from lfo_cli.recipes import config_to_dict

    out_dir = Path(out_dir)
    out_dir.mkdir(parents=True, exist_ok=True)
    final_dir = out_dir / "model"
    # ---- seeding, in one place ----
    random.seed(cfg.seed)
    np.random.seed(cfg.seed)
    torch.manual_seed(cfg.seed)
    set_seed(cfg.seed)
    if cfg.train.threads:
        torch.set_num_threads(cfg.train.threads)
    t_start = time.time()
    atomic_write_json(out_dir / "run_metadata.json", run_metadata(cfg.seed, config_to_dict(cfg)))

    model, tokenizer = load_model(cfg.model.name, dtype=cfg.model.dtype)
    tools = P.tool_schemas(CustomerServiceEnv)

    # ---- data ----
    trajectories = collect_sft_trajectories(cfg, world)
    weighted = [t for t in trajectories for _ in range(cfg.data.success_weight if t["reward"] >= 1.0 else 1)]
    rows, dropped = tokenize_trajectories(tokenizer, weighted, tools, cfg.train.max_length)
    if not rows:
        raise LfoError(f"every trajectory is longer than train.max_length={cfg.train.max_length} tokens")
    atomic_write_jsonl(
        out_dir / "sft_trajectories.jsonl",
        ({k: t[k] for k in ("task_id", "difficulty", "policy", "reward", "messages")} for t in trajectories),
    )
    lengths = [len(r["input_ids"]) for r in rows]
    if cfg.data.induction_rows:
        from lfo_cli.models.induction import induction_rows

        rows += induction_rows(tokenizer, cfg.data.induction_rows, max_len=cfg.data.induction_max_len, seed=cfg.seed)
    data_stats = {
        "data/trajectories": len(trajectories),
        "data/sequences": len(lengths),
        "data/induction_rows": cfg.data.induction_rows,
        "data/dropped_too_long": dropped,
        "data/slipped_turns": sum(len(t["info"].get("slipped_steps", ())) for t in trajectories),
        "data/random_turns": sum(len(t["info"].get("random_steps", ())) for t in trajectories),
        "data/untrained_turns": sum(m.get("weight", 1) == 0 for t in trajectories for m in t["messages"]
                                    if m["role"] == "assistant"),
        "data/teacher_success": sum(t["reward"] >= 1.0 for t in trajectories) / len(trajectories),
        "data/mean_tokens": float(np.mean(lengths)),
        "data/max_tokens": int(max(lengths)),
        "data/prompt_tokens": len(tokenizer.apply_chat_template(
            P.build_messages(world.tasks["train"][0].prompt()), tools=tools, add_generation_prompt=True,
            tokenize=True, return_dict=False)),
    }
    dataset = Dataset.from_list(rows)

    # ---- model: whole (micro) or LoRA (pretrained) ----
    peft_config = None
    if not cfg.model.is_full:
        from peft import LoraConfig

        peft_config = LoraConfig(
            r=cfg.model.lora_r, lora_alpha=cfg.model.lora_alpha, lora_dropout=cfg.model.lora_dropout,
            target_modules=list(cfg.model.lora_target_modules), task_type="CAUSAL_LM",
        )

    ckpt_dir = out_dir / "checkpoints"
    deadline = t_start + 60 * cfg.train.max_minutes if cfg.train.max_minutes else None
    args = SFTConfig(
        output_dir=str(ckpt_dir),
        seed=cfg.seed,
        data_seed=cfg.seed,
        num_train_epochs=cfg.train.epochs,
        max_steps=cfg.train.max_steps,
        per_device_train_batch_size=cfg.train.batch_size,
        gradient_accumulation_steps=cfg.train.gradient_accumulation_steps,
        learning_rate=cfg.train.learning_rate,
        lr_scheduler_type="cosine",
        warmup_steps=cfg.train.warmup_ratio,  # a float < 1 is a ratio of the total steps
        weight_decay=cfg.train.weight_decay,
        max_length=cfg.train.max_length,
        assistant_only_loss=False,  # the dataset already carries TRL's assistant_masks
        logging_steps=cfg.train.logging_steps,
        save_steps=cfg.train.save_steps,
        save_total_limit=2,
        report_to="none",
        disable_tqdm=True,
        use_cpu=not torch.cuda.is_available(),
        bf16=cfg.model.dtype == "bfloat16",
        dataloader_num_workers=0,
        gradient_checkpointing=False,  # TRL's SFT default recomputes activations: ~1/3 more compute, no need here
        train_sampling_strategy="group_by_length",  # similar lengths per batch: far less padding on CPU
    )
    trainer = SFTTrainer(
        model=model, args=args, train_dataset=dataset, processing_class=tokenizer, peft_config=peft_config,
        callbacks=[RichProgressCallback(), _metrics_callback(out_dir / "metrics.jsonl", deadline)],
    )
    # disable_tqdm makes transformers add a PrinterCallback that prints every log row as a dict; the rich bar
    # shows progress and metrics.jsonl keeps the rows.
    from transformers.trainer_callback import PrinterCallback

    trainer.remove_callback(PrinterCallback)
    resume_from = _last_checkpoint(ckpt_dir) if resume else None
    train_out = trainer.train(resume_from_checkpoint=resume_from)
    trained = trainer.model
    if peft_config is not None:
        trained = trained.merge_and_unload()
    trained.generation_config.pad_token_id = tokenizer.pad_token_id
    shutil.rmtree(final_dir, ignore_errors=True)
    from lfo_cli.io import atomic_dir

    with atomic_dir(final_dir) as tmp:
        trained.save_pretrained(tmp, safe_serialization=True)
        tokenizer.save_pretrained(tmp)
    train_stats = {
        "train/steps": trainer.state.global_step,
        "train/loss": float(train_out.training_loss),
        "train/seconds": round(time.time() - t_start, 1),
        "train/stopped_by_budget": bool(deadline is not None and time.time() > deadline),
    }

    # ---- evaluation ----
    summary: dict[str, Any] = {**data_stats, **train_stats}
    if cfg.eval.num_tasks > 0:
        val = list(world.tasks.get("val", []))
        if not val:
            raise LfoError(f"{cfg.data.dir}: the world has no val tasks to evaluate on")
        val = stratified_tasks(val, cfg.eval.num_tasks)
        from lfo_cli.models.trajectories import collect_trajectories

        teacher = collect_trajectories(world, val, policy=cfg.data.policy, seed=cfg.seed + 1, noise=cfg.data.noise(),
                                       rollouts_per_task=cfg.eval.samples_per_task)
        val = [t for t in val for _ in range(cfg.eval.samples_per_task)]  # as `lfo transfer-eval --samples`
        t_eval = time.time()
        with Progress() as bar:
            task = bar.add_task("[green]Evaluating (episodes done)", total=len(val))
            done = {"n": 0}

            def _progress(finished: int, total: int, _b=bar, _t=task, _d=done) -> None:
                _b.update(_t, completed=_d["n"] + finished)
                if finished == total:
                    _d["n"] += total

            result = evaluate_agent(
                trained, tokenizer, world, val, temperature=cfg.eval.temperature, max_turns=cfg.eval.max_turns,
                max_new_tokens=cfg.eval.max_new_tokens, batch_size=cfg.eval.batch_size, seed=cfg.seed,
                progress=_progress,
            )
        summary.update(summarize_eval(result, teacher))
        summary["eval/temperature"] = cfg.eval.temperature
        summary["eval/samples_per_task"] = cfg.eval.samples_per_task
        summary["eval/seconds"] = round(time.time() - t_eval, 1)
        atomic_write_jsonl(out_dir / "eval_episodes.jsonl", result["episodes"])
        atomic_write_jsonl(out_dir / "samples.jsonl", result["samples"])
        _write_eval_tables(out_dir, summary)
    summary["total_seconds"] = round(time.time() - t_start, 1)
    summary["model_dir"] = "model"  # relative to the run dir
    atomic_write_json(out_dir / "summary.json", summary)
    warm_root = (cache.lfo_home() / "warmstart").resolve()
    if warm_root not in out_dir.resolve().parents:
        summary["cache_dir"] = str(register_in_cache(cfg, out_dir) or warmstart_cache_path(cfg))
    _print_summary(summary)
    if cfg.eval.min_valid_rate is not None and cfg.eval.num_tasks > 0:
        rate = summary["eval/valid_tool_call_rate"]
        if rate < cfg.eval.min_valid_rate:
            raise LfoError(f"valid tool-call rate {rate:.1%} is below eval.min_valid_rate={cfg.eval.min_valid_rate:.0%}")
    return summary


# ---- cached warm-started bases ----------------------------------------------------------------
def _resolve_cfg(recipe_name_or_cfg: str | WarmStartConfig, overrides: list[str] | None = None) -> tuple[str, WarmStartConfig]:
    if isinstance(recipe_name_or_cfg, WarmStartConfig):
        if overrides:
            raise LfoError("overrides apply to recipe names, not to config objects")
        return "warmstart", recipe_name_or_cfg
    from lfo_cli.recipes import load_recipe

    rec = load_recipe(recipe_name_or_cfg, overrides)
    if rec.kind != "warmstart":
        raise LfoError(f"recipe '{recipe_name_or_cfg}' is kind '{rec.kind}', not a warm start")
    return Path(rec.name).stem, rec.config


# Options added after warm starts were cached, with the value that reproduces the old data bit for bit:
# left out of the key at that value, so adding an option does not invalidate every cached base.
NEUTRAL_LATER_FIELDS: dict[str, dict[str, Any]] = {"data": {"slip": 0.0, "imitate_random": True, "field_extra": 0.0}}


def warmstart_key(cfg: WarmStartConfig) -> str:
    """Hash of the resolved config, the data manifest and the base model's identity."""
    from lfo_cli.env.world import MANIFEST_FILE
    from lfo_cli.recipes import config_to_dict

    manifest = Path(cfg.data.dir) / MANIFEST_FILE
    base = cfg.model.name
    if base == "micro":
        from lfo_cli.models import micro

        base = f"micro-{micro.cache_key()}"
    payload = {
        "config": {k: v for k, v in config_to_dict(cfg).items()},
        "data_manifest": read_json(manifest) if manifest.is_file() else None,
        "base": base,
        "template": P.chat_template(),
        "system": P.SYSTEM_PROMPT,
    }
    payload["config"]["data"].pop("dir", None)  # the content (manifest) matters, not where it lives
    for section, fields in NEUTRAL_LATER_FIELDS.items():  # options added later, at the value that changes nothing
        for name, neutral in fields.items():
            if payload["config"][section].get(name) == neutral:
                del payload["config"][section][name]
    payload["config"]["eval"] = None  # evaluation does not change the checkpoint
    payload["config"]["train"].pop("threads", None)  # nor does the thread count
    return hashlib.sha256(json.dumps(payload, sort_keys=True, default=str).encode()).hexdigest()[:12]


def warmstart_cache_path(cfg: WarmStartConfig) -> Path:
    safe = "".join(c if c.isalnum() or c in "-_." else "_" for c in cfg.model.name.strip("/"))[-60:]
    return cache.lfo_home() / "warmstart" / f"{safe}-{warmstart_key(cfg)}"


def ensure_warmstart(
    recipe_name_or_cfg: str | WarmStartConfig, *, data_dir: str | Path | None = None, overrides: list[str] | None = None,
    build: bool = True,
) -> Path:
    """The warm-started base checkpoint for a recipe (``$LFO_HOME/warmstart/NAME-KEY/model``),
    trained now if not cached (``build=False``: an error instead). ``data_dir`` points the warm start
    at the trainer's world."""
    name, cfg = _resolve_cfg(recipe_name_or_cfg, overrides)
    if data_dir is not None:
        cfg.data.dir = Path(data_dir)
    load_world_for(cfg)  # fail early with the gen-env hint
    path = warmstart_cache_path(cfg)
    if not build and not cache.is_complete(path):
        raise LfoError(
            f"warm start '{name}' is not built yet ({path}); build it once in a plain process first: "
            f"lfo train --recipe {recipe_name_or_cfg if isinstance(recipe_name_or_cfg, str) else '<warm-start recipe>'}"
            f" --out runs/{name}"
        )
    cache.build_once(path, lambda tmp: {"recipe": name, "key": path.name, **run_warmstart(cfg, tmp)})
    return path / "model"


def register_in_cache(cfg: WarmStartConfig, out_dir: Path) -> Path | None:
    """Copy a finished CLI run's ``model/`` into the cache so dual-LoRA recipes reuse it."""
    path = warmstart_cache_path(cfg)
    if cache.is_complete(path) or not (Path(out_dir) / "model").is_dir():
        return None

    def _copy(tmp: Path) -> dict:
        shutil.copytree(Path(out_dir) / "model", tmp / "model")
        summary = read_json(Path(out_dir) / "summary.json") if (Path(out_dir) / "summary.json").is_file() else {}
        return {"key": path.name, "copied_from": str(out_dir), **summary}

    return cache.build_once(path, _copy)
