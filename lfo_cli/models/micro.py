"""The ``micro`` tier: a small Qwen3-architecture model from scratch with a compact BPE tokenizer.

Sizing (measured with ``python -m lfo_cli.models.sizing``; numbers in the docstring of that module):
on the 2 CPU cores the cost of a GRPO step is generation (re-prefilling the growing conversation
every turn) plus forward+backward over prompt+completion tokens, so the *number of tokens* matters
as much as the parameter count. Hence two choices:

* the tokenizer is byte-level BPE (round-trips any text) trained on text the environment
  generates, rendered through the same chat template, with the fixed boilerplate of a rollout
  prompt -- the template's tool preamble, each tool's JSON schema line and the opening of each
  tool call -- added as single (non-special) tokens. The system prompt's tool block then costs a
  handful of tokens instead of hundreds, and a tool call is ~10 tokens. Digits are split one per
  token so phone numbers, codes and values are copied digit by digit;
* the architecture (``MicroArch``) is the largest that keeps a 4 prompts x 4 generations dual-LoRA
  step within 15 s on 2 cores.

The cache key hashes the architecture, the tokenizer settings, the environment generator version,
the tool schemas and the chat template, so changing any of them builds a new entry.
"""

from __future__ import annotations

import hashlib
import json
from collections.abc import Iterable, Iterator
from dataclasses import asdict, dataclass
from pathlib import Path
from typing import Any

from lfo_cli.models import cache

# Special tokens: ChatML turn markers (the template's) and a padding token that never appears in text.
IM_START, IM_END, PAD = "<|im_start|>", "<|im_end|>", "<|endoftext|>"
# The template's tool markup: plain added tokens (not special: decoding keeps them, TRL parses them).
MARKUP = ("<tool_call>", "</tool_call>", "<tool_response>", "</tool_response>")


@dataclass(frozen=True)
class MicroArch:
    """Qwen3 config of the micro tier (see lfo_cli.models.sizing for the measurements)."""

    hidden_size: int = 192
    num_hidden_layers: int = 4  # >= 2 layers for induction-style copying (phone numbers, form values)
    num_attention_heads: int = 4
    num_key_value_heads: int = 2  # GQA halves the KV cache that generation re-reads every token
    head_dim: int = 48
    intermediate_size: int = 576
    max_position_embeddings: int = 2048  # a 16-turn rollout stays well under 1.5k micro tokens
    rope_theta: float = 10000.0
    tie_word_embeddings: bool = True  # the LM head is the biggest matrix at this size; share it
    init_seed: int = 0


@dataclass(frozen=True)
class TokenizerSpec:
    vocab_size: int = 2048  # BPE merges; added tokens come on top
    min_frequency: int = 2
    corpus_world_seeds: tuple[int, ...] = (0, 1, 2)  # several worlds: names/values of unseen seeds still compress
    corpus_companies: int = 60
    corpus_tasks: int = 120  # per world and split; each runs a few reference-policy episodes


ARCH = MicroArch()
TOKENIZER = TokenizerSpec()


# ---- tokenizer -------------------------------------------------------------------------------
def boilerplate_tokens(tools: list[dict] | None = None) -> list[str]:
    """Fixed strings of every rollout prompt/turn that become single tokens.

    Derived by rendering the chat template (never hand-copied): the tool block around the schemas,
    one line per tool schema, and the ``{"name": "TOOL", "arguments": `` opening of each call.
    """
    from lfo_cli.models import prompts

    tools = tools if tools is not None else _env_tool_schemas()
    sentinel = "\x00SYS\x00"
    text = _render([{"role": "system", "content": sentinel}], tools)
    block = text.split(sentinel, 1)[1].rsplit(IM_END, 1)[0]  # preamble, schema lines, postamble
    pieces: list[str] = []
    schema_lines = ["\n" + json.dumps(t, ensure_ascii=False) for t in tools]
    start = block.index(schema_lines[0]) if schema_lines else len(block)
    pieces.append(block[:start])
    pos = start
    for line in schema_lines:
        if block.startswith(line, pos):
            pieces.append(line)
            pos += len(line)
    pieces.append(block[pos:])
    calls = [
        _render([prompts.tool_call_message(t["function"]["name"], {})], None)
        for t in tools
    ]
    for call, t in zip(calls, tools, strict=True):
        name = t["function"]["name"]
        opening = f'{{"name": "{name}", "arguments": '
        if opening in call:
            pieces.append(opening)
            # ... and through the first required argument's key and value opener, e.g.
            # '{"name": "search_company", "arguments": {"company_name": "' (fewer tokens to get wrong)
            params = t["function"].get("parameters", {})
            required = params.get("required") or []
            if required:
                kind = params.get("properties", {}).get(required[0], {}).get("type")
                opener = {"string": '"', "array": "["}.get(kind, "")
                pieces.append(opening + json.dumps({required[0]: None})[:-5] + opener)
    return [p for p in pieces if p and IM_END not in p and IM_START not in p]


def _render(messages: list[dict], tools: list[dict] | None) -> str:
    """Render with the chat template only (no tokenizer needed): jinja via transformers."""
    from transformers.utils.chat_template_utils import render_jinja_template

    from lfo_cli.models.prompts import chat_template

    rendered, _ = render_jinja_template(
        conversations=[messages], tools=tools, chat_template=chat_template(), add_generation_prompt=False
    )
    return rendered[0]


def _env_tool_schemas() -> list[dict]:
    from lfo_cli.env.trl_env import CustomerServiceEnv
    from lfo_cli.models.prompts import tool_schemas

    return tool_schemas(CustomerServiceEnv)


def train_tokenizer(corpus: Iterable[str], spec: TokenizerSpec = TOKENIZER, extra_tokens: list[str] | None = None):
    """Byte-level BPE on ``corpus`` (tokenizers library), wrapped as a transformers fast tokenizer."""
    from tokenizers import Regex, Tokenizer, decoders, models, pre_tokenizers, trainers
    from transformers import PreTrainedTokenizerFast

    from lfo_cli.models.prompts import configure_tokenizer

    tok = Tokenizer(models.BPE())
    tok.pre_tokenizer = pre_tokenizers.Sequence(
        [
            pre_tokenizers.Split(Regex(r"\d"), behavior="isolated"),  # one digit per token
            pre_tokenizers.ByteLevel(add_prefix_space=False, use_regex=True),
        ]
    )
    tok.decoder = decoders.ByteLevel()
    special = [PAD, IM_START, IM_END]
    trainer = trainers.BpeTrainer(
        vocab_size=spec.vocab_size,
        min_frequency=spec.min_frequency,
        special_tokens=special,
        initial_alphabet=pre_tokenizers.ByteLevel.alphabet(),
        show_progress=False,
    )
    tok.train_from_iterator(corpus, trainer=trainer)
    fast = PreTrainedTokenizerFast(
        tokenizer_object=tok, eos_token=IM_END, pad_token=PAD, unk_token=None, bos_token=None,
        additional_special_tokens=[IM_START],
    )
    fast.add_tokens(list(MARKUP) + list(extra_tokens or []))
    fast.model_max_length = ARCH.max_position_embeddings
    return configure_tokenizer(fast)


def environment_corpus(spec: TokenizerSpec = TOKENIZER) -> Iterator[str]:
    """Text the environment produces, rendered as the model will see it: full rollout chats of the
    reference policies (with tools), task prompts, directories, rep replies, and world-model
    examples (input + target) for every transition."""
    from lfo_cli.env.formatting import world_model_example
    from lfo_cli.env.policies import NoiseConfig
    from lfo_cli.env.world import generate_world
    from lfo_cli.models import prompts
    from lfo_cli.models.trajectories import collect_trajectories

    tools = _env_tool_schemas()
    for seed in spec.corpus_world_seeds:
        world = generate_world(
            seed=seed, num_companies=spec.corpus_companies, num_train_tasks=spec.corpus_tasks,
            num_val_tasks=spec.corpus_tasks // 4, heldout_fraction=0.25,
        )
        tasks = [t for split in ("train", "val", "transfer") for t in world.tasks.get(split, [])]
        for policy, noise in (("prior", NoiseConfig(epsilon=0.2, field_dropout=0.1)), ("probe", None), ("random", None)):
            for traj in collect_trajectories(world, tasks, policy=policy, noise=noise, seed=seed):
                yield _render(traj["messages"], tools)
                for tr in traj["transitions"]:
                    text, _ = world_model_example(tr)
                    yield text
    yield prompts.SYSTEM_PROMPT


# ---- the cached base model -------------------------------------------------------------------
def cache_key() -> str:
    from lfo_cli.env.world import GENERATOR_VERSION
    from lfo_cli.models.prompts import SYSTEM_PROMPT, chat_template

    payload = {
        "arch": asdict(ARCH),
        "tokenizer": asdict(TOKENIZER),
        "env": GENERATOR_VERSION,
        "tools": _env_tool_schemas(),
        "template": chat_template(),
        "system": SYSTEM_PROMPT,
        "format": 2,  # bump when the tokenizer recipe (boilerplate tokens, pre-tokenizer) changes
    }
    return hashlib.sha256(json.dumps(payload, sort_keys=True).encode()).hexdigest()[:12]


def cache_path() -> Path:
    return cache.models_dir() / f"micro-{cache_key()}"


def qwen3_config(vocab_size: int, arch: MicroArch = ARCH, **token_ids: Any):
    from transformers import Qwen3Config

    kw = asdict(arch)
    kw.pop("init_seed")
    return Qwen3Config(vocab_size=vocab_size, **kw, **token_ids)


def init_model(tokenizer, arch: MicroArch = ARCH):
    """A freshly initialised (seeded) Qwen3 model sized for ``tokenizer``."""
    import torch
    from transformers import Qwen3ForCausalLM

    config = qwen3_config(
        len(tokenizer), arch,
        pad_token_id=tokenizer.pad_token_id, eos_token_id=tokenizer.eos_token_id, bos_token_id=None,
    )
    torch.manual_seed(arch.init_seed)
    model = Qwen3ForCausalLM(config)
    model.generation_config.pad_token_id = tokenizer.pad_token_id
    model.generation_config.eos_token_id = tokenizer.eos_token_id
    return model


def build(out_dir: Path) -> dict[str, Any]:
    """Train the tokenizer on environment text, initialise the model, save both into ``out_dir``."""
    from lfo_cli.io import sha256_file

    corpus = list(environment_corpus(TOKENIZER))
    tokenizer = train_tokenizer(corpus, TOKENIZER, extra_tokens=boilerplate_tokens())
    model = init_model(tokenizer, ARCH)
    model.save_pretrained(out_dir, safe_serialization=True)
    tokenizer.save_pretrained(out_dir)
    n_chars = sum(len(t) for t in corpus)
    n_tokens = sum(len(tokenizer(t, add_special_tokens=False)["input_ids"]) for t in corpus[:2000])
    n_chars_sample = sum(len(t) for t in corpus[:2000])
    return {
        "name": "micro",
        "key": out_dir.name,
        "num_parameters": int(sum(p.numel() for p in model.parameters())),
        "vocab_size": len(tokenizer),
        "corpus_texts": len(corpus),
        "corpus_chars": n_chars,
        "chars_per_token": round(n_chars_sample / max(1, n_tokens), 3),
        "arch": asdict(ARCH),
        "tokenizer_sha256": sha256_file(out_dir / "tokenizer.json"),
    }


def count_parameters() -> int:
    """Parameter count without building (meta device); the vocabulary size is taken from the cache
    when built, else the BPE target plus the added tokens."""
    import torch
    from transformers import Qwen3ForCausalLM

    info = cache.entry_info(cache_path())
    vocab = (info or {}).get("vocab_size") or TOKENIZER.vocab_size + len(MARKUP) + 8
    with torch.device("meta"):
        model = Qwen3ForCausalLM(qwen3_config(vocab, ARCH))
    return int(sum(p.numel() for p in model.parameters()))
