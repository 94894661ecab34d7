"""Golden values of the training path: three optimizer steps of each coupling on fixed rollouts.

What a refactor of the trainer must keep (`tests/train/test_golden.py`). Each step starts from TRL's rollout
output as the tool loop leaves it (completion tokens with the rep's replies inside, `tool_mask`, and the
environments with their transition logs), built here from the `probe` reference policy's real episodes, and
goes through `DualLoRAGRPOTrainer._generate_and_score_completions` (the world-model record), `compute_loss`
(policy loss + lambda x world-model term, the gradient probe), the clip and the optimizer. Recorded per step:
the logged metrics and each adapter's parameter sum and norm. Recorded with

    python tests/train/golden_runs.py --write

at the commit named in the file (2-core CPU, one torch thread). Re-record only for a change meant to move
them, and say so in its commit.

Float results depend on the CPU's kernels (torch's vector ISA, AMX, MKL's reproducibility mode): one file per
kernel class (`kernel_class()`), compared at REL_TOL where this machine's class has one. On a class with no file
the values are compared with the first recorded file at CROSS_REL_TOL (the largest difference measured between
two classes, an AVX2-era machine's and AVX-512 + AMX with MKL_CBWR=AUTO,STRICT, was 0.5%, in a parameter sum);
`--write` then records this class's file.
"""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import torch

sys.path.insert(0, str(Path(__file__).parent))
from tiny import tiny_model, tiny_tokenizer  # noqa: E402

GOLDEN_DIR = Path(__file__).parent / "golden"
GOLDEN = GOLDEN_DIR / "couplings.json"  # the first recorded file (its kernels unrecorded): the cross-class fallback
CASES = (("separate", "joint"), ("stacked", "joint"), ("stacked", "alternating"), ("shared", "joint"))
STEPS = 3
# The normalisation the golden values were recorded with (each coupling's own, as the observation study ran).
NORMALIZE = "legacy"
REL_TOL, ABS_TOL = 1e-4, 1e-6  # a refactor may reorder float sums (last bits), never change the experiment
CROSS_REL_TOL = 0.02  # another CPU's kernels: 0.5% measured; a changed experiment moves them by far more
GROUP = 2  # rollouts per prompt


class _Transition(dict):
    """A transition as the environment logs it: readable as a mapping and by attribute."""

    __getattr__ = dict.__getitem__


def rollouts(tokenizer, n: int = 8, seed: int = 0):
    """TRL-shaped rollout output for ``n`` episodes of the noisy `probe` policy (2 per task), and their
    environments. Completions hold the assistant's calls (tool_mask 1) and the tool replies (tool_mask 0)."""
    from types import SimpleNamespace

    from lfo_cli.env import generate_world
    from lfo_cli.env.noise import NoiseConfig
    from lfo_cli.env.plugin import CustomerServiceWorld
    from lfo_cli.models.trajectories import collect_trajectories

    world = generate_world(num_companies=8, num_train_tasks=8, num_val_tasks=4, heldout_fraction=0.25, seed=5)
    tasks = [t for t in world.tasks["train"] if t.difficulty <= 2][: n // GROUP]
    trajs = collect_trajectories(CustomerServiceWorld(world), tasks, policy="probe", seed=seed, rollouts_per_task=GROUP,
                                 noise=NoiseConfig(epsilon=0.3, field_dropout=0.3))
    prompts, completions, tool_masks, envs = [], [], [], []
    for traj in trajs:
        msgs = traj["messages"]
        prompts.append(tokenizer(f"<|im_start|>user\n{msgs[1]['content']}<|im_end|>\n<|im_start|>assistant\n",
                                 add_special_tokens=False)["input_ids"][-24:])
        ids, mask = [], []
        for m in msgs[2:]:
            if m["role"] == "assistant":
                text = json.dumps([c["function"] for c in m.get("tool_calls") or []]) + (m.get("content") or "")
                piece, flag = f"{text}<|im_end|>\n", 1
            else:
                piece, flag = f"<|im_start|>user\n<tool_response>\n{m['content']}\n</tool_response><|im_end|>\n", 0
            toks = tokenizer(piece, add_special_tokens=False)["input_ids"]
            ids, mask = ids + toks, mask + [flag] * len(toks)
        completions.append(ids[:900])
        tool_masks.append(mask[:900])
        # messages: the completion as TRL's messages (what wm.targets=tool_responses reads)
        envs.append(SimpleNamespace(transitions=[_Transition(t) for t in traj["transitions"]], messages=msgs[2:]))
    width_p, width_c = max(map(len, prompts)), max(map(len, completions))
    pad = tokenizer.pad_token_id

    def left(rows, width):
        return torch.tensor([[pad] * (width - len(r)) + r for r in rows]), \
            torch.tensor([[0] * (width - len(r)) + [1] * len(r) for r in rows])

    def right(rows, width, fill):
        return torch.tensor([r + [fill] * (width - len(r)) for r in rows])

    prompt_ids, prompt_mask = left(prompts, width_p)
    completion_ids = right(completions, width_c, pad)
    completion_mask = right([[1] * len(r) for r in completions], width_c, 0)
    tool_mask = right(tool_masks, width_c, 1)
    g = torch.Generator().manual_seed(seed)
    advantages = torch.randn(len(trajs), generator=g)
    output = {"prompt_ids": prompt_ids, "prompt_mask": prompt_mask, "completion_ids": completion_ids,
              "completion_mask": completion_mask, "tool_mask": tool_mask, "advantages": advantages,
              "num_items_in_batch": (completion_mask * tool_mask).sum().float()}
    return output, envs


def _adapter_stats(model) -> dict[str, float]:
    from lfo_cli.train.adapters import POLICY, WORLD_MODEL, adapter_params

    out = {}
    for name in (POLICY, WORLD_MODEL):
        params = adapter_params(model, name)
        if params:
            out[f"params/{name}/sum"] = float(sum(p.detach().double().sum() for p in params))
            out[f"params/{name}/norm"] = float(torch.nn.utils.get_total_norm([p.detach() for p in params]))
    return out


def make_phone_call(phone_number: str) -> str:
    """Call a department (the customer-service tool by name, for a trainer whose targets are TRL's tool replies).

    Args:
        phone_number: The department's number.
    """
    raise NotImplementedError("the golden rollouts are fixed; no tool runs")


def run_case(coupling: str, schedule: str, tmp_dir: Path, **wm) -> list[dict]:
    """Three steps of one coupling/schedule on fixed rollouts; one row of values per step. ``wm``: other
    world-model settings (the golden values are recorded without)."""
    from unittest import mock

    from datasets import Dataset
    from trl import GRPOTrainer

    from lfo_cli.train.adapters import LoraSettings, attach_dual_lora
    from lfo_cli.train.config import DualLoRAConfig
    from lfo_cli.train.objectives import objective_class
    from lfo_cli.train.trainer import DualLoRAGRPOTrainer
    from lfo_cli.train.wm_settings import WorldModelSettings
    from lfo_cli.worlds import world_class

    torch.manual_seed(0)
    torch.set_num_threads(1)
    tokenizer = tiny_tokenizer()
    model = attach_dual_lora(tiny_model(tokenizer), LoraSettings(r=4, alpha=8, dropout=0.0),
                             with_world_model=objective_class(coupling).has_adapter)
    args = DualLoRAConfig(output_dir=str(tmp_dir / f"{coupling}_{schedule}"), per_device_train_batch_size=8,
                          num_generations=GROUP, max_completion_length=900, learning_rate=1e-2, report_to=[],
                          use_cpu=True, logging_steps=1, save_strategy="no", warmup_steps=0, max_grad_norm=1.0,
                          loss_length_groups=1,  # TRL's one forward, as recorded (grouping: test_sampling.py)
                          wm=WorldModelSettings(coef=0.5, coupling=coupling, schedule=schedule, grad_probe_every=1,
                                                normalize=NORMALIZE, **wm))
    data = Dataset.from_dict({"prompt": [[{"role": "user", "content": "call"}]] * 8})
    trainer = DualLoRAGRPOTrainer(model=model, reward_funcs=lambda completions, **kw: [0.0] * len(completions),
                                  args=args, train_dataset=data, processing_class=tokenizer,
                                  world=world_class("customer_service"),
                                  tools=[make_phone_call] if wm.get("targets") == "tool_responses" else None)
    trainer.current_gradient_accumulation_steps = 1
    optimizer = trainer.create_optimizer()
    rows = []
    for step in range(STEPS):
        output, envs = rollouts(tokenizer, seed=step)
        trainer.environments = envs
        trainer._conversations = [env.messages for env in envs]  # as the trainer's `_generate` keeps TRL's
        with mock.patch.object(GRPOTrainer, "_generate_and_score_completions", lambda self, inputs, o=output: dict(o)):
            inputs = trainer._generate_and_score_completions(None)
        trainer.model.train()
        loss = trainer.compute_loss(trainer.model, inputs)
        loss.backward()
        trainer._clip_grad_norm(trainer.model)
        trainer.callback_handler.on_pre_optimizer_step(trainer.args, trainer.state, trainer.control)
        optimizer.step()
        optimizer.zero_grad()
        trainer.state.global_step += 1
        logged = {k: v[-1] for k, v in trainer._metrics["train"].items() if v}
        trainer._metrics["train"].clear()
        rows.append({"step": step + 1, "loss": float(loss.detach()), **logged, **_adapter_stats(trainer.model)})
    return rows


def run_all(tmp_dir: Path) -> dict[str, list[dict]]:
    return {f"{c}/{s}": run_case(c, s, tmp_dir) for c, s in CASES}


def kernel_class() -> str:
    """What this machine's float results depend on: torch's CPU vector ISA, AMX, and MKL's reproducibility mode
    (``lfo_cli`` sets ``MKL_CBWR``)."""
    import os

    import lfo_cli  # noqa: F401  (sets MKL_CBWR before torch's first matrix product)

    try:
        flags = next((line for line in Path("/proc/cpuinfo").read_text().splitlines() if line.startswith("flags")), "")
    except OSError:
        flags = ""
    amx = "+AMX" if " amx_tile" in flags else ""
    return f"{torch.backends.cpu.get_cpu_capability()}{amx} MKL_CBWR={os.environ.get('MKL_CBWR', 'unset')}"


def _class_file(kernels: str) -> Path:
    return GOLDEN_DIR / f"couplings-{''.join(c if c.isalnum() else '_' for c in kernels)}.json"


def load_golden() -> tuple[dict[str, list[dict]], float, str]:
    """(golden runs, relative tolerance, where from): this kernel class's file at REL_TOL, else the first
    recorded file at CROSS_REL_TOL."""
    kernels = kernel_class()
    mine = _class_file(kernels)
    if mine.is_file():
        return json.loads(mine.read_text())["runs"], REL_TOL, mine.name
    return json.loads(GOLDEN.read_text())["runs"], CROSS_REL_TOL, f"{GOLDEN.name} (no file for {kernels})"


def main() -> None:
    import tempfile

    if "--write" not in sys.argv:
        raise SystemExit("usage: python tests/train/golden_runs.py --write")
    commit = subprocess.run(["git", "rev-parse", "--short", "HEAD"], capture_output=True, text=True).stdout.strip()
    with tempfile.TemporaryDirectory() as tmp:
        runs = run_all(Path(tmp))
    kernels = kernel_class()
    out = _class_file(kernels)
    out.parent.mkdir(exist_ok=True)
    out.write_text(json.dumps({"commit": commit, "kernels": kernels, "steps": STEPS, "runs": runs}, indent=1,
                              sort_keys=True) + "\n")
    print(f"wrote {out} ({commit}, {kernels})")


if __name__ == "__main__":
    main()
