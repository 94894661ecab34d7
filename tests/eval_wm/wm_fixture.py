"""A tiny env-tokenised model whose world-model adapter is trained for real in a few seconds."""

from __future__ import annotations

import torch


def tiny_world():
    from lfo_cli.env import generate_world

    return generate_world(num_companies=16, num_train_tasks=80, num_val_tasks=30, heldout_fraction=0.25, seed=11)


def tiny_env_tokenizer():
    from lfo_cli.models import micro

    spec = micro.TokenizerSpec(vocab_size=3600, corpus_world_seeds=(7,), corpus_companies=12, corpus_tasks=16)
    return micro.train_tokenizer(micro.environment_corpus(spec), spec, extra_tokens=micro.boilerplate_tokens())


def tiny_dual_model(tokenizer):
    from lfo_cli.models import micro
    from lfo_cli.train.adapters import LoraSettings, attach_dual_lora

    arch = micro.MicroArch(hidden_size=64, num_hidden_layers=2, num_attention_heads=4, num_key_value_heads=2,
                           head_dim=16, intermediate_size=128, max_position_embeddings=2048, induction_init=False)
    base = micro.init_model(tokenizer, arch)
    lora = LoraSettings(r=16, alpha=32, dropout=0.0,
                        target_modules=["q_proj", "k_proj", "v_proj", "o_proj", "gate_proj", "up_proj", "down_proj"])
    return attach_dual_lora(base, lora)


def train_world_model(model, tokenizer, transitions, steps: int = 150, lr: float = 3e-3, seed: int = 0, max_length: int = 384):
    """Supervised world-model steps (the trainer's WM term alone): world_model adapter active."""
    from lfo_cli.env import world_model_example
    from lfo_cli.train.adapters import WORLD_MODEL, active, adapter_params
    from lfo_cli.train.wm_batches import build_batch
    from lfo_cli.train.wm_loss import world_model_forward

    torch.manual_seed(seed)
    examples = [world_model_example(t) for t in transitions]
    opt = torch.optim.AdamW(adapter_params(model, WORLD_MODEL), lr=lr)
    g = torch.Generator().manual_seed(seed)
    model.train()
    with active(model, WORLD_MODEL):
        for _ in range(steps):
            idx = torch.randint(len(examples), (8,), generator=g).tolist()
            loss, _, _ = world_model_forward(model, build_batch(tokenizer, [examples[i] for i in idx], max_length))
            loss.backward()
            opt.step()
            opt.zero_grad()
    model.eval()
    return model
