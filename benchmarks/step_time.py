"""Seconds per dual-LoRA GRPO step for `micro` and `smollm2-135m`, split into its parts, in one run.

For each model and batch shape (prompts x generations) one real step's work is timed with the
project's trainer (``DualLoRAGRPOTrainer``, TRL's multi-turn tool loop against the environment):

* generation: ``_generate_and_score_completions`` (rollouts with tool calls, rewards, world-model
  examples from the transition log);
* policy loss: ``compute_loss`` + ``backward`` with lambda = 0 (plain DAPO, bit-for-bit TRL's loss);
* world-model loss: the extra time of ``compute_loss`` + ``backward`` with lambda = 0.5
  (``separate`` coupling, the design's) over the lambda = 0 one;
* optimizer: one AdamW step over both adapters.

    python benchmarks/step_time.py                                 # micro and smollm2, 4x4 and 8x8
    python benchmarks/step_time.py --models micro --shapes 4x4 --json
    python benchmarks/step_time.py --models smollm2-135m --shapes 4x4 --max-completion-length 256
    python benchmarks/step_time.py --max-completion-length 256 --repeats 0 --micro-batch smollm2-135m=4

``micro`` uses its warm-started base when it is cached (``--warmstart auto``): a from-scratch model
rambles until the token limit, which is not the regime RL runs in. ``smollm2-135m`` uses its
warm start when cached, else the pretrained base. Goal (issue #4): micro 4 x 4 <= 15 s on 2 cores.
On a CUDA machine the same script times the GPU with bf16 autocast (the GPU recipes' precision),
synchronising the device around every timer.
"""

from __future__ import annotations

import argparse
import copy
import json
import statistics
import time
from pathlib import Path

RECIPES = {"micro": ("dual_lora_micro", "warmstart_micro"), "smollm2-135m": ("dual_lora", "warmstart_smollm2")}


def _base_model(name: str, warmstart_recipe: str, mode: str, data_dir: str) -> tuple[str, bool]:
    from lfo_cli.models import cache
    from lfo_cli.models.warmstart import ensure_warmstart
    from lfo_cli.models.warmstart_cache import resolve_config, warmstart_cache_path

    if mode == "never":
        return name, False
    _, wcfg = resolve_config(warmstart_recipe)
    wcfg.data.dir = Path(data_dir)
    if mode == "build" or cache.is_complete(warmstart_cache_path(wcfg)):
        return str(ensure_warmstart(warmstart_recipe, data_dir=data_dir)), True
    return name, False


def measure(name: str, prompts: int, generations: int, a) -> dict:
    import torch
    from datasets import Dataset
    from transformers import set_seed

    from lfo_cli.env import load_world, make_env_factory
    from lfo_cli.models.prompts import dataset_row
    from lfo_cli.models.registry import load_model
    from lfo_cli.recipes import load_recipe
    from lfo_cli.train.adapters import attach_dual_lora
    from lfo_cli.train.trainer import DualLoRAGRPOTrainer
    from lfo_cli.worlds import world_class

    set_seed(a.seed)
    cuda = torch.cuda.is_available()  # GPU: bf16 autocast (the GPU recipes' setting); CPU: float32
    if cuda:
        torch.cuda.reset_peak_memory_stats()

    def sync() -> None:  # CUDA kernels run asynchronously: wait for them before reading a clock
        if cuda:
            torch.cuda.synchronize()

    recipe, warm = RECIPES[name]
    cfg = load_recipe(recipe, [f"data.dir={a.data_dir}", f"model.name={name}", "model.warmstart=null"]).config
    if name in a.base:
        base, warm_started = a.base[name], None  # a given checkpoint: warm-started or not, the benchmark can't tell
    else:
        base, warm_started = _base_model(name, warm, a.warmstart, a.data_dir)
    model, tok = load_model(base, dtype="float32")
    model = attach_dual_lora(model, cfg.lora)
    world = load_world(a.data_dir)
    tasks = world.tasks["train"][:prompts]
    data = Dataset.from_list([dataset_row(t.task_id) for t in tasks])

    def trainer_for(coef: float):
        c = copy.deepcopy(cfg)
        c.wm.coef, c.wm.coupling, c.wm.grad_probe_every = coef, "separate", 0
        c.trainer.update(per_device_train_batch_size=prompts * generations, num_generations=generations,
                         gradient_accumulation_steps=1, max_steps=1, bf16=cuda, use_cpu=not cuda,
                         max_completion_length=a.max_completion_length or c.trainer.get("max_completion_length"))
        t = DualLoRAGRPOTrainer(model=model, args=c.training_args("/tmp/lfo-step-time"), train_dataset=data,
                                processing_class=tok, environment_factory=make_env_factory(world, seed=a.seed),
                                world=world_class("customer_service"))
        t.current_gradient_accumulation_steps = 1
        return t

    dual = trainer_for(0.5)
    dual.model.train()
    rows = [dict(r) for r in data for _ in range(generations)]
    with dual.accelerator.autocast():  # warm-up on one prompt's group: first-call costs (allocator, kernels) uncounted
        dual._generate_and_score_completions(rows[:generations])
    sync()
    t0 = time.perf_counter()
    with dual.accelerator.autocast():
        batch = dual._generate_and_score_completions(rows)
    sync()
    gen_s = time.perf_counter() - t0
    baseline = trainer_for(0.0)

    from trl.trainer.utils import split_tensor_dict

    n_seq = int(batch["completion_mask"].shape[0])
    micro_batch = int(a.micro_batch.get(name, 0))
    chunks = max(1, n_seq // micro_batch) if micro_batch else 1

    def loss_backward(trainer, keep_grads: bool = False) -> float:
        """Median seconds of compute_loss + backward over the step's batch (in ``chunks`` micro-batches, as
        TRL's gradient accumulation would run it); gradients of the last pass kept when asked."""
        if a.repeats == 0:  # no full warm-up pass follows: warm up on one sequence's loss instead
            with trainer.accelerator.autocast():
                trainer.compute_loss(trainer.model, split_tensor_dict(dict(batch), n_seq)[0]).backward()
            trainer.model.zero_grad(set_to_none=True)
        samples = []
        for i in range(a.repeats + 1):  # the first run warms caches and is not counted (unless --repeats 0)
            sync()
            t0 = time.perf_counter()
            for part in split_tensor_dict(dict(batch), chunks):
                with trainer.accelerator.autocast():
                    loss = trainer.compute_loss(trainer.model, part) / chunks
                loss.backward()
                del loss
            sync()
            samples.append(time.perf_counter() - t0)
            if not (keep_grads and i == a.repeats):
                trainer.model.zero_grad(set_to_none=True)
        return statistics.median(samples[1:] or samples)

    policy_s = loss_backward(baseline)
    dual_s = loss_backward(dual, keep_grads=True)  # its gradients feed the timed optimizer step
    params = [p for p in dual.model.parameters() if p.requires_grad]
    opt = torch.optim.AdamW(params, lr=1e-5)
    opt.step()  # first step allocates the moments
    sync()
    t0 = time.perf_counter()
    opt.step()
    sync()
    opt_s = time.perf_counter() - t0
    completion_tokens = int(batch["completion_mask"].sum())
    return {
        "model": name, "base": base, "warm_started": warm_started, "shape": f"{prompts}x{generations}",
        "device": torch.cuda.get_device_name(0) if cuda else "cpu", "bf16": cuda,
        "threads": torch.get_num_threads(), "loss_micro_batches": chunks, "prompt_tokens_mean": round(float(batch["prompt_mask"].sum(1).float().mean()), 1),
        "completion_tokens": completion_tokens, "phone_calls": sum(len(x) for x in batch.get("lfo_wm_examples", [])),
        "generation_s": round(gen_s, 2), "policy_loss_s": round(policy_s, 2),
        "wm_loss_s": round(max(dual_s - policy_s, 0.0), 2), "optimizer_s": round(opt_s, 3),
        "step_s": round(gen_s + dual_s + opt_s, 2),
        "completion_tokens_per_s": round(completion_tokens / max(gen_s + dual_s + opt_s, 1e-9), 1),
        "max_memory_gib": round(torch.cuda.max_memory_allocated() / 2**30, 2) if cuda else None,
    }


def main() -> None:
    p = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("--models", nargs="+", default=["micro", "smollm2-135m"], choices=list(RECIPES))
    p.add_argument("--shapes", nargs="+", default=["4x4", "8x8"], help="PROMPTSxGENERATIONS")
    p.add_argument("--data-dir", default="data")
    p.add_argument("--warmstart", choices=["auto", "build", "never"], default="auto",
                   help="auto: use a cached warm start if present; build: train it if missing; never: base model")
    p.add_argument("--base", action="append", default=[], metavar="MODEL=PATH",
                   help="use this checkpoint for MODEL (e.g. micro=runs/ws_micro/model, a warm-start run); "
                        "the result's warm_started is then null")
    p.add_argument("--max-completion-length", type=int, default=None, help="override the recipe's (all turns)")
    p.add_argument("--repeats", type=int, default=2,
                   help="timed loss passes after one full warm-up pass; 0: one timed pass after a one-sequence warm-up "
                   "(for slow models)")
    p.add_argument("--micro-batch", action="append", default=[], metavar="MODEL=N",
                   help="sequences per loss forward for MODEL (default: the whole step at once); e.g. smollm2-135m=4 "
                   "on a 24 GB CPU box, where a 16 x 1k-token forward's float32 logits over a 49k vocabulary do not fit")
    p.add_argument("--threads", type=int, default=2)
    p.add_argument("--seed", type=int, default=0)
    p.add_argument("--json", action="store_true")
    a = p.parse_args()
    a.base = dict(b.split("=", 1) for b in a.base)
    a.micro_batch = dict(m.split("=", 1) for m in a.micro_batch)

    import torch

    torch.set_num_threads(a.threads)
    rows = []
    for name in a.models:
        for shape in a.shapes:
            prompts, generations = (int(x) for x in shape.lower().split("x"))
            rows.append(measure(name, prompts, generations, a))
    if a.json:
        print(json.dumps(rows, indent=2))
        return
    from rich.console import Console
    from rich.table import Table

    table = Table(title=f"seconds per dual-LoRA GRPO step ({rows[0]['device']}, {a.threads} CPU threads)")
    cols = ["model", "shape", "warm_started", "prompt_tokens_mean", "completion_tokens", "generation_s",
            "policy_loss_s", "wm_loss_s", "optimizer_s", "step_s"]
    for c in cols:
        table.add_column(c, justify="right")
    for r in rows:
        table.add_row(*[str(r[c]) for c in cols])
    Console(width=max(160, Console().width)).print(table)  # never truncate the numbers
    for r in rows:
        if r["model"] == "micro" and r["shape"] == "4x4":
            verdict = "meets" if r["step_s"] <= 15 else "misses"
            print(f"micro 4x4: {r['step_s']:.1f} s per step ({verdict} the <= 15 s goal)")


if __name__ == "__main__":
    main()
