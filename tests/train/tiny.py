"""A tiny random Qwen3 model + a BPE tokenizer trained on the spot: no download, builds in < 1 s; and what its
runs logged, timings aside (for tests that compare two runs of it)."""

from __future__ import annotations

import json
import sys
import traceback
from pathlib import Path
from typing import NamedTuple

import torch

TIMING = {"step_time", "eval_seconds", "train_runtime", "train_samples_per_second", "train_steps_per_second",
          "total_flos"}
# The Trainer's closing row also holds the mean loss over the steps this invocation ran: a resumed run's differs.
PER_INVOCATION = TIMING | {"train_loss"}


def logged_values(run: Path) -> dict:
    """Every value a run's metrics.jsonl logged, by step, except wall-clock timings and the closing row's mean
    loss over the invocation's own steps."""
    out: dict = {}
    for line in (Path(run) / "metrics.jsonl").read_text().splitlines():
        row = json.loads(line)
        out.setdefault(row.get("step"), {}).update({k: v for k, v in row.items() if k not in PER_INVOCATION})
    return out

WORDS = (
    "the rep said I need your account number and the last 4 of your ssn date of birth zip code pin "
    "policy number member id card email phone on file thank you your request is done reference code "
    "please call billing fraud customer service technical support claims loans state task step action "
    "collected auth previous actions search company make phone call auth info form"
)
MARKERS = ["<|state|>", "<|/state|>", "<|action|>", "<|/action|>", "<|tool|>", "<|args|>", "<|/tool|>",
           "<|predict_csr|>", "<|csr|>", "<|/csr|>"]


def tiny_tokenizer():
    import trl
    from tokenizers import Tokenizer, models, pre_tokenizers, trainers
    from transformers import PreTrainedTokenizerFast

    tok = Tokenizer(models.BPE(unk_token="<unk>"))
    tok.pre_tokenizer = pre_tokenizers.ByteLevel(add_prefix_space=False)
    trainer = trainers.BpeTrainer(
        vocab_size=400, special_tokens=["<unk>", "<|endoftext|>", "<|im_start|>", "<|im_end|>"],
        initial_alphabet=pre_tokenizers.ByteLevel.alphabet(),
    )
    tok.train_from_iterator([WORDS, " ".join(MARKERS), '{"phone_number": "800-555-0100"}'] * 5, trainer)
    from tokenizers import decoders

    tok.decoder = decoders.ByteLevel()
    fast = PreTrainedTokenizerFast(tokenizer_object=tok, unk_token="<unk>", pad_token="<|endoftext|>",
                                   eos_token="<|im_end|>", padding_side="left")
    fast.chat_template = (Path(trl.__file__).parent / "chat_templates" / "qwen2_5.jinja").read_text()
    return fast


def tiny_model(tokenizer, seed: int = 0):
    from transformers import Qwen3Config, Qwen3ForCausalLM

    torch.manual_seed(seed)
    config = Qwen3Config(
        vocab_size=len(tokenizer), hidden_size=32, intermediate_size=64, num_hidden_layers=2,
        num_attention_heads=4, num_key_value_heads=2, head_dim=8, max_position_embeddings=1024,
        pad_token_id=tokenizer.pad_token_id, eos_token_id=tokenizer.eos_token_id, tie_word_embeddings=True,
    )
    return Qwen3ForCausalLM(config)


class Done(NamedTuple):
    """What a finished `lfo` call left: its exit status and output, as ``subprocess.run`` reports them."""

    returncode: int
    stdout: str
    stderr: str


def lfo_here(*args: str, env: dict | None = None) -> Done:
    """``lfo ARGS`` in this process, through typer's CliRunner: the same command without the ~5 s that a
    fresh ``python -m lfo_cli`` spends importing torch, transformers, PEFT and TRL. Accepts a whole
    ``[sys.executable, "-m", "lfo_cli", ...]`` command too. The tests that kill a run, launch several
    processes or check what a fresh process imports keep their subprocesses."""
    from typer.testing import CliRunner

    from lfo_cli.cli import app

    args = list(args[0]) if len(args) == 1 and isinstance(args[0], list) else list(args)
    if args[:3] == [sys.executable, "-m", "lfo_cli"]:
        args = args[3:]
    result = CliRunner().invoke(app, args, env={"TRL_EXPERIMENTAL_SILENCE": "1", **(env or {})})
    if result.exception is not None and not isinstance(result.exception, SystemExit):
        return Done(1, result.stdout, result.stderr + "".join(traceback.format_exception(*result.exc_info)))
    return Done(result.exit_code, result.stdout, result.stderr)


def tiny_world_and_model(root: Path) -> Path:
    """``root`` holding a small world (``data/``: 12 companies, seed 5) and the tiny model with its tokenizer
    (``model/``): what an end-to-end `lfo train` on the tiny model reads."""
    from lfo_cli.env import generate_world, write_world

    write_world(generate_world(num_companies=12, num_train_tasks=40, num_val_tasks=8, heldout_fraction=0.25, seed=5),
                root / "data")
    tok = tiny_tokenizer()
    tiny_model(tok).save_pretrained(root / "model")
    tok.save_pretrained(root / "model")
    return root
