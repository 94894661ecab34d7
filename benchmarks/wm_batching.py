"""World-model loss: one padded batch vs length-sorted batches (`wm.batch_tokens`), same examples;
the LM head on every position vs on the target tokens only; and each group's common start run once
(`wm.share_prefix`, what training does).

The examples are the phone calls of noisy `prior` rollouts on the val tasks (the lengths a training
batch sees: a first call's short state up to a long history). Each arm runs forward + backward of the
world-model loss with the `world_model` adapter, alternating arms, ``--repeats`` times; the median
seconds and the ratio are printed, with the padded-token counts that explain them. Timing does not
depend on the weights, so the plain `micro` base is used (no warm start needed).

    python benchmarks/wm_batching.py                       # 16 rollouts' phone calls, micro
    python benchmarks/wm_batching.py --rollouts 64 --batch-tokens 2048 --json
    python benchmarks/wm_batching.py --rollouts 32 --per-task 8   # groups of 8 rollouts of one task, like GRPO
"""

from __future__ import annotations

import argparse
import json
import statistics
import time


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--model", default="micro")
    parser.add_argument("--data-dir", default="data")
    parser.add_argument("--rollouts", type=int, default=16, help="rollouts whose phone calls form the batch")
    parser.add_argument("--per-task", type=int, default=1, help="rollouts per task (a GRPO group: 8)")
    parser.add_argument("--batch-tokens", type=int, default=4096)
    parser.add_argument("--max-length", type=int, default=512)
    parser.add_argument("--repeats", type=int, default=7)
    parser.add_argument("--threads", type=int, default=2)
    parser.add_argument("--seed", type=int, default=0)
    parser.add_argument("--json", action="store_true")
    a = parser.parse_args()

    import torch
    from transformers import set_seed

    from lfo_cli.env import load_world
    from lfo_cli.env.episode import Episode
    from lfo_cli.env.formatting import world_model_example
    from lfo_cli.env.noise import NoiseConfig
    from lfo_cli.env.rollout import run_episode
    from lfo_cli.models.registry import load_model
    from lfo_cli.train.adapters import WORLD_MODEL, LoraSettings, activate, attach_dual_lora
    from lfo_cli.train.rollout_record import examples_from_environment
    from lfo_cli.train.wm_batches import build_length_batches, build_wm_batches
    from lfo_cli.train.wm_loss import masked_lm_loss, world_model_forward

    torch.set_num_threads(a.threads)
    set_seed(a.seed)
    world = load_world(a.data_dir)
    episode = Episode(world)
    examples = []
    for i in range(a.rollouts):
        task = world.tasks["val"][i // a.per_task]
        run_episode(episode, "prior", task, rollout_seed=a.seed + i, noise=NoiseConfig(epsilon=0.1, field_dropout=0.1))
        examples += examples_from_environment(episode, ("make_phone_call",), world_model_example)
    model, tokenizer = load_model(a.model)
    model = attach_dual_lora(model, LoraSettings())
    activate(model, WORLD_MODEL)
    model.train()
    # arm -> (batch_tokens, LM head on all positions?); the last arm is what training runs
    arms = {"one_batch_full_head": (0, True), "length_batches_full_head": (a.batch_tokens, True),
            "length_batches": (a.batch_tokens, False), "shared_prefixes": (a.batch_tokens, False)}
    built = {name: build_length_batches(tokenizer, examples, a.max_length, tokens)[0]
             for name, (tokens, _) in arms.items()}
    built["shared_prefixes"] = build_wm_batches(tokenizer, examples, a.max_length, a.batch_tokens, share_prefix=True)[0]

    def tokens(batches, real: bool = False) -> int:
        def one(b):
            if hasattr(b, "suffixes"):  # a SharedPrefixBatch: prefixes once, then suffixes
                parts = [m for _, m in b.prefixes] + [s.attention_mask for s in b.suffixes]
                return sum(int(m.sum()) if real else m.numel() for m in parts)
            return int(b.attention_mask.sum()) if real else b.input_ids.numel()
        return sum(one(b) for b in batches)

    def full_head_loss(batches):  # the logits of every position, then the masked cross-entropy
        per = [masked_lm_loss(model(input_ids=b.input_ids, attention_mask=b.attention_mask, use_cache=False).logits,
                              b.labels)[0] for b in batches]
        return torch.cat(per).mean()

    def run(name: str) -> float:
        batches = built[name]
        t0 = time.perf_counter()
        loss = full_head_loss(batches) if arms[name][1] else world_model_forward(model, batches)[0]
        loss.backward()
        model.zero_grad(set_to_none=True)
        return time.perf_counter() - t0

    for name in arms:  # warm-up, not counted
        run(name)
    samples: dict[str, list[float]] = {name: [] for name in arms}
    for _ in range(a.repeats):
        for name in arms:
            samples[name].append(run(name))
    result = {
        "model": a.model, "examples": len(examples), "threads": a.threads, "batch_tokens": a.batch_tokens,
        "target_tokens": sum(b.num_target_tokens for b in built["length_batches"]),
        "arms": {name: {"forwards": sum(len(b.prefixes) + len(b.suffixes) if hasattr(b, "suffixes") else 1
                                        for b in built[name]), "padded_tokens": tokens(built[name]),
                        "real_tokens": tokens(built[name], real=True),
                        "median_s": round(statistics.median(samples[name]), 4)} for name in arms},
    }
    med = {name: r["median_s"] for name, r in result["arms"].items()}
    result["speedup_length_batches"] = round(med["one_batch_full_head"] / med["length_batches_full_head"], 3)
    result["speedup_target_head"] = round(med["length_batches_full_head"] / med["length_batches"], 3)
    result["speedup_total"] = round(med["one_batch_full_head"] / med["length_batches"], 3)
    result["speedup_shared_prefixes"] = round(med["length_batches"] / med["shared_prefixes"], 3)
    if a.json:
        print(json.dumps(result, indent=2))
        return
    from rich.console import Console
    from rich.table import Table

    table = Table(title=f"world-model loss forward+backward: {len(examples)} phone calls, {a.threads} threads")
    for col in ("arm", "forwards", "padded tokens", "real tokens", "median s"):
        table.add_column(col, justify="right")
    for name, r in result["arms"].items():
        table.add_row(name, str(r["forwards"]), str(r["padded_tokens"]), str(r["real_tokens"]), f"{r['median_s']:.3f}")
    Console().print(table)
    print(f"speed-up of length batches over one padded batch: {result['speedup_length_batches']:.2f}x; "
          f"of the head on {result['target_tokens']} target tokens over all positions: "
          f"{result['speedup_target_head']:.2f}x; both: {result['speedup_total']:.2f}x; shared prefixes over "
          f"length batches: {result['speedup_shared_prefixes']:.2f}x")


if __name__ == "__main__":
    main()
