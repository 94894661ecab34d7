"""The ``micro`` tier: a small Qwen3-architecture model from scratch with a compact BPE tokenizer.

Sizing (measured with ``python -m lfo_cli.models.sizing``; numbers in the docstring of that module):
on the 2 CPU cores the cost of a GRPO step is generation (re-prefilling the growing conversation
every turn) plus forward+backward over prompt+completion tokens, so the *number of tokens* matters
as much as the parameter count. Hence two choices:

* the tokenizer is byte-level BPE (round-trips any text) trained on text the environment
  generates, rendered through the same chat template, with the fixed boilerplate of a rollout
  prompt -- the template's tool preamble, each tool's JSON schema line and the opening of each
  tool call -- added as single (non-special) tokens. The system prompt's tool block then costs a
  handful of tokens instead of hundreds, and a tool call is ~10 tokens;
* the tokenizer is built so that **copying is one induction step per token** (a 2M-parameter model
  trained for minutes does not learn multi-hop copying; measured: with one digit per token and
  space-prefixed words it predicted copied digits 25% of the time after a 30-minute warm start):
  - words carry their *trailing* space (``"Coastal "``), not a leading one, so a name reads the same
    tokens in the task prompt (``at Coastal Bank.``) and in a call's JSON argument (``"Coastal Bank"``);
  - numbers are split left to right into groups of up to 3 digits with a leading hyphen attached
    (``866``, ``-536``, ``-030``, ``2``): a 10-digit number is 4 nearly unique tokens instead of 12
    digits that each occur everywhere. Every 1-3 digit group is guaranteed a token (coverage text);
  - the strings a world names (``World.tokenizer_tokens``, e.g. a JSON key with its value opener) are one
    token each, in a reply and in a call alike, so a value is copied by looking up the token after the
    same key;
* the architecture (``MicroArch``) is the largest that keeps a 4 prompts x 4 generations dual-LoRA
  step within 15 s on 2 cores.

The cache key hashes the architecture, the tokenizer settings, the environment generator version,
the tool schemas and the chat template, so changing any of them builds a new entry.
"""

from __future__ import annotations

import hashlib
import itertools
import json
from collections.abc import Iterable, Iterator
from dataclasses import asdict, dataclass
from pathlib import Path
from typing import Any

from lfo_cli.io import atomic_write_text, sha256_file
from lfo_cli.models import cache, prompts
from lfo_cli.models.prompts import SYSTEM_PROMPT, chat_template, configure_tokenizer
from lfo_cli.models.trajectories import trajectory_messages
from lfo_cli.worlds import DEFAULT_KIND, World, world_class

# Special tokens: ChatML turn markers (the template's) and a padding token that never appears in text.
IM_START, IM_END, PAD = "<|im_start|>", "<|im_end|>", "<|endoftext|>"
# The template's tool markup: plain added tokens (not special: decoding keeps them, TRL parses them).
MARKUP = ("<tool_call>", "</tool_call>", "<tool_response>", "</tool_response>")


@dataclass(frozen=True)
class MicroArch:
    """Qwen3 config of the micro tier (see lfo_cli.models.sizing for the measurements)."""

    hidden_size: int = 192
    num_hidden_layers: int = 4  # >= 2 layers for induction-style copying (numbers, values read earlier)
    num_attention_heads: int = 4
    num_key_value_heads: int = 2  # GQA halves the KV cache that generation re-reads every token
    head_dim: int = 48
    intermediate_size: int = 576
    max_position_embeddings: int = 2048  # a 16-turn rollout stays well under 1.5k micro tokens
    # Qwen3's own default. With it 10 of the 24 rotary frequency pairs turn < 0.5 rad over 1k tokens:
    # the nearly position-free dimensions that content matching (the induction head) needs.
    rope_theta: float = 1_000_000.0
    tie_word_embeddings: bool = True  # the LM head is the biggest matrix at this size; share it
    init_seed: int = 0
    # Start with a working copy circuit (see install_induction_circuit): a from-scratch model of this
    # size trained for minutes never formed one (copied tokens predicted 21-25% of the time; on pure
    # "A + A" data the loss sat at the unigram plateau for 400 steps).
    induction_init: bool = True
    embedding_init_std: float = 0.1  # larger than HF's 0.02 so tied-embedding logits can be sharp at init


# Pre-tokenizer (applied before byte-level BPE; see the module docstring): words with one trailing
# space, numbers as hyphen-led groups of <= 3 digits, punctuation runs with the spaces around them,
# other whitespace. BPE merges never cross these pieces.
PRETOKENIZE_PATTERN = r"\p{L}+\x20?|-?\p{N}{1,3}|\x20?[^\s\p{L}\p{N}]+\x20?|\s+"


def number_chunks() -> list[str]:
    """Every digit group the pre-tokenizer can produce (with and without the leading hyphen)."""
    groups = [f"{i:0{n}d}" for n in (1, 2, 3) for i in range(10**n)]
    return groups + ["-" + g for g in groups]


@dataclass(frozen=True)
class TokenizerSpec:
    vocab_size: int = 5600  # BPE merges incl. the 2,220 digit groups; added tokens come on top
    min_frequency: int = 2
    corpus_world_seeds: tuple[int, ...] = (0, 1, 2)  # several worlds: names/values of unseen seeds still compress
    corpus_companies: int = 60  # the customer-service world's corpus; a field of the cache key (kept: renaming rebuilds every micro)
    corpus_tasks: int = 120  # per world and split; each runs a few reference-policy episodes
    number_coverage_repeats: int = 200  # copies of the digit-group list in the corpus: every group gets a merge


ARCH = MicroArch()
TOKENIZER = TokenizerSpec()


# ---- tokenizer -------------------------------------------------------------------------------
def _world(world: type[World] | None) -> type[World]:
    return world_class(DEFAULT_KIND) if world is None else world


def boilerplate_tokens(tools: list[dict] | None = None, world: type[World] | None = None) -> list[str]:
    """Fixed strings of every rollout prompt/turn that become single tokens.

    Derived by rendering the chat template (never hand-copied): the tool block around the schemas,
    one line per tool schema, and the ``{"name": "TOOL", "arguments": `` opening of each call; then the
    world's own (:attr:`lfo_cli.worlds.World.tokenizer_tokens`).
    """
    tools = tools if tools is not None else _env_tool_schemas(world)
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
            # '{"name": "search", "arguments": {"query": "' (fewer tokens to get wrong)
            params = t["function"].get("parameters", {})
            required = params.get("required") or []
            if required:
                kind = params.get("properties", {}).get(required[0], {}).get("type")
                opener = {"string": '"', "array": "["}.get(kind, "")
                pieces.append(opening + json.dumps({required[0]: None})[:-5] + opener)
            # ... and the separator into each later required argument, e.g. '", "details": {'
            for prev, arg in itertools.pairwise(required):
                prev_kind = params.get("properties", {}).get(prev, {}).get("type")
                kind = params.get("properties", {}).get(arg, {}).get("type")
                if prev_kind == "string":
                    pieces.append('", ' + json.dumps({arg: None})[1:-5] + {"string": '"', "array": "[", "object": "{"}.get(kind, ""))
    # the world's own (World.tokenizer_tokens)
    pieces.extend(_world(world).tokenizer_tokens)
    return [p for p in dict.fromkeys(pieces) if p and IM_END not in p and IM_START not in p]


def _render(messages: list[dict], tools: list[dict] | None) -> str:
    """Render with the chat template only (no tokenizer needed): jinja via transformers."""
    from transformers.utils.chat_template_utils import render_jinja_template

    rendered, _ = render_jinja_template(
        conversations=[messages], tools=tools, chat_template=chat_template(), add_generation_prompt=False
    )
    return rendered[0]


def _env_tool_schemas(world: type[World] | None = None) -> list[dict]:
    """The world's tool schemas as TRL sees them. transformers' ``get_json_schema`` imports torch (~2 s),
    and the schemas are part of the cache key that `lfo models list` and `--dry-run` compute, so they are
    memoised under $LFO_HOME, keyed by everything they derive from: the environment's and the schema
    code's source and the transformers version. Key order is kept: the rendered tool lines (and so the
    boilerplate tokens) follow it."""
    import importlib.metadata
    import inspect

    tools = _world(world).tools
    sources = b"".join(Path(f).read_bytes() for f in (inspect.getfile(tools), prompts.__file__))
    fp = hashlib.sha256(sources + importlib.metadata.version("transformers").encode()).hexdigest()[:16]
    memo = cache.models_dir() / f".tool_schemas-v2-{fp}.json"  # v1 memos sorted the keys
    try:
        return json.loads(memo.read_text(encoding="utf-8"))
    except (OSError, ValueError):
        pass
    schemas = prompts.tool_schemas(tools)
    try:
        atomic_write_text(memo, json.dumps(schemas, ensure_ascii=False))  # not sorted: order is meaningful
    except OSError:  # a read-only $LFO_HOME: computed every time
        pass
    return schemas


def train_tokenizer(corpus: Iterable[str], spec: TokenizerSpec = TOKENIZER, extra_tokens: list[str] | None = None):
    """Byte-level BPE on ``corpus`` (tokenizers library), wrapped as a transformers fast tokenizer."""
    from tokenizers import Regex, Tokenizer, decoders, models, pre_tokenizers, trainers
    from transformers import PreTrainedTokenizerFast

    tok = Tokenizer(models.BPE())
    tok.pre_tokenizer = pre_tokenizers.Sequence(
        [
            pre_tokenizers.Split(Regex(PRETOKENIZE_PATTERN), behavior="isolated"),
            pre_tokenizers.ByteLevel(add_prefix_space=False, use_regex=False),  # bytes only: round-trips anything
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
    coverage = "\n".join(number_chunks())  # newline-separated: " -30" would pre-tokenize as " -" + "30"
    tok.train_from_iterator(
        itertools.chain(corpus, itertools.repeat(coverage, spec.number_coverage_repeats)), trainer=trainer
    )
    fast = PreTrainedTokenizerFast(
        tokenizer_object=tok, eos_token=IM_END, pad_token=PAD, unk_token=None, bos_token=None,
        additional_special_tokens=[IM_START],
    )
    fast.add_tokens(list(MARKUP) + list(extra_tokens or []))
    fast.model_max_length = ARCH.max_position_embeddings
    return configure_tokenizer(fast)


def environment_corpus(spec: TokenizerSpec = TOKENIZER, world: type[World] | None = None) -> Iterator[str]:
    """Text the world produces (:meth:`lfo_cli.worlds.World.corpus`), rendered as the model will see it: the
    reference policies' rollouts as full chats with the tools (for the customer-service world: task
    prompts, directories, rep replies) and world-model examples (input + target), then the system prompt."""
    world = _world(world)
    tools = _env_tool_schemas(world)
    system = world.system_prompt or SYSTEM_PROMPT
    for item in world.corpus(spec):
        yield item if isinstance(item, str) else _render(trajectory_messages(item, system), tools)
    yield system


# ---- the cached base model -------------------------------------------------------------------
def cache_key(world: type[World] | None = None) -> str:
    """Hash of what the model and its tokenizer derive from: the architecture, the tokenizer recipe, the
    world's text (its corpus version, tools and system prompt) and the chat template."""
    world = _world(world)
    payload = {
        "arch": asdict(ARCH),
        "tokenizer": asdict(TOKENIZER),
        "env": world.corpus_version,
        "tools": _env_tool_schemas(world),
        "template": chat_template(),
        "system": world.system_prompt or SYSTEM_PROMPT,
        "pretokenize": PRETOKENIZE_PATTERN,
        "format": 4,  # bump when the tokenizer recipe (boilerplate tokens, pre-tokenizer) changes
    }
    if world.kind != DEFAULT_KIND:  # the first world's keys predate worlds as plugins
        payload["world"] = world.kind
    return hashlib.sha256(json.dumps(payload, sort_keys=True).encode()).hexdigest()[:12]


def model_name(world: type[World] | None = None) -> str:
    """``micro`` for the customer-service world, ``micro_<kind>`` for another (its own tokenizer)."""
    world = _world(world)
    return "micro" if world.kind == DEFAULT_KIND else f"micro_{world.kind}"


def cache_path(world: type[World] | None = None) -> Path:
    return cache.models_dir() / f"{model_name(world)}-{cache_key(world)}"


def qwen3_config(vocab_size: int, arch: MicroArch = ARCH, **token_ids: Any):
    from transformers import Qwen3Config

    kw = asdict(arch)
    for key in ("init_seed", "induction_init", "embedding_init_std"):
        kw.pop(key)
    return Qwen3Config(vocab_size=vocab_size, **kw, **token_ids)


def init_model(tokenizer, arch: MicroArch = ARCH):
    """A freshly initialised (seeded) Qwen3 model sized for ``tokenizer``, with the induction circuit
    installed when ``arch.induction_init``."""
    import torch
    from transformers import Qwen3ForCausalLM

    config = qwen3_config(
        len(tokenizer), arch,
        pad_token_id=tokenizer.pad_token_id, eos_token_id=tokenizer.eos_token_id, bos_token_id=None,
    )
    torch.manual_seed(arch.init_seed)
    model = Qwen3ForCausalLM(config)
    if arch.induction_init:
        install_induction_circuit(model, embedding_std=arch.embedding_init_std, seed=arch.init_seed)
    model.generation_config.pad_token_id = tokenizer.pad_token_id
    model.generation_config.eos_token_id = tokenizer.eos_token_id
    return model


def _rope_inv_freq(config) -> Any:
    import torch

    params = getattr(config, "rope_parameters", None) or {}
    base = params.get("rope_theta", getattr(config, "rope_theta", 10000.0))
    d = config.head_dim
    return base ** (-torch.arange(d // 2, dtype=torch.float64) * 2 / d)


def install_induction_circuit(
    model, *, embedding_std: float = 0.1, prev_sharpness: float = 3.0, match_sharpness: float = 2.0,
    copy_gain: float = 4.0, max_context: int = 1024, seed: int = 0,
) -> dict[str, int]:
    """Write a two-head copy circuit into a fresh Qwen3 model (Olsson et al., 2022, "induction heads").

    An agent must copy values it read (a number from a directory, a value from a reply) into a call's
    arguments. Copying "what followed this token last time" takes two heads in sequence, and a
    small model trained for minutes does not find them on its own (module docstring). So we build
    them, in unused subspaces of the residual stream, and let training take it from there:

    * residual layout: dim 0 is a constant channel (every embedding row has the same value there),
      dims ``1..d`` carry the token's identity (``d`` = head_dim), the last ``d`` dims start empty
      and receive the *previous* token's identity;
    * layer 0, head 0, **previous-token head**: query and key read only the constant channel, with
      the key set to the query rotated one position by RoPE, so the score peaks at offset -1 (three
      high-frequency rotary pairs, sharpened through the q/k norm weights); its value reads the
      identity dims and its output writes them into the previous-token dims;
    * layer 1, the first head of the second KV group, **induction head**: the query reads the
      current identity, the key the previous-token identity, through the same random orthonormal
      map into the rotary pairs that turn less than 0.5 rad over ``max_context`` tokens (so the
      match ignores distance); its value reads the identity of the attended position (the token
      that followed the earlier occurrence) and its output adds it, amplified, to the identity dims
      that the tied LM head scores;
    * every other attention output and MLP down-projection starts at zero, so the circuit is not
      drowned at initialisation; gradients reach them through their (non-zero) inputs.

    At initialisation the model predicts the repeat of a random "A + A" sequence with > 90% top-1
    accuracy (tests/models/test_induction.py). Returns the number of rotary pairs used for matching.
    """
    import torch

    cfg = model.config
    hidden, d = cfg.hidden_size, cfg.head_dim
    half = d // 2
    group = cfg.num_attention_heads // cfg.num_key_value_heads
    if cfg.num_hidden_layers < 2 or cfg.num_key_value_heads < 2 or hidden < 2 * d + 1:
        raise ValueError("the induction circuit needs >= 2 layers, >= 2 KV heads and hidden_size > 2 * head_dim")
    tok_dims, prev_dims = slice(1, 1 + d), slice(hidden - d, hidden)
    inv = _rope_inv_freq(cfg)
    low = [i for i in range(half) if float(inv[i]) * max_context < 0.5]
    if len(low) < 4:
        raise ValueError(f"rope_theta too small: only {len(low)} rotary pairs are position-free over {max_context} tokens")
    g = torch.Generator().manual_seed(seed)
    with torch.no_grad():
        emb = model.get_input_embeddings().weight
        emb.normal_(0.0, embedding_std, generator=g)
        emb[:, prev_dims] = 0.0
        emb[:, 0] = 3 * embedding_std
        for layer in model.model.layers:
            layer.self_attn.o_proj.weight.zero_()
            layer.mlp.down_proj.weight.zero_()
        # layer 0, head 0: previous-token head
        att = model.model.layers[0].self_attn
        pairs = (0, 1, 2)
        q = torch.zeros(d, dtype=torch.float64)
        q[list(pairs)] = 1.0
        cos, sin = torch.cos(inv), torch.sin(inv)
        k = q * torch.cat([cos, cos]) + torch.cat([-q[half:], q[:half]]) * torch.cat([sin, sin])  # RoPE by +1
        att.q_proj.weight[:d] = 0.0
        att.q_proj.weight[:d, 0] = q.float()
        att.k_proj.weight[:d] = 0.0
        att.k_proj.weight[:d, 0] = k.float()
        for i in pairs:
            for w in (att.q_norm.weight, att.k_norm.weight):
                w[i] = w[i + half] = prev_sharpness
        att.v_proj.weight[:d] = 0.0
        att.v_proj.weight[:d, tok_dims] = torch.eye(d)
        att.o_proj.weight[prev_dims, :d] = torch.eye(d)
        # layer 1, first head of KV group 1: induction head
        att = model.model.layers[1].self_attn
        h = group  # query head index; its KV head is 1
        dims = low + [i + half for i in low]
        mix = torch.linalg.qr(torch.randn(d, len(dims), generator=g))[0].T  # len(dims) x d, orthonormal rows
        att.q_proj.weight[h * d:(h + 1) * d] = 0.0
        att.k_proj.weight[d:2 * d] = 0.0
        for r, dim in enumerate(dims):
            att.q_proj.weight[h * d + dim, tok_dims] = mix[r]
            att.k_proj.weight[d + dim, prev_dims] = mix[r]
            att.q_norm.weight[dim] = match_sharpness
            att.k_norm.weight[dim] = match_sharpness
        att.v_proj.weight[d:2 * d] = 0.0
        att.v_proj.weight[d:2 * d, tok_dims] = torch.eye(d)
        att.o_proj.weight[tok_dims, h * d:(h + 1) * d] = copy_gain * torch.eye(d)
    return {"match_pairs": len(low)}


def build(out_dir: Path, world: type[World] | None = None) -> dict[str, Any]:
    """Train the tokenizer on the world's text, initialise the model, save both into ``out_dir``."""
    corpus = list(environment_corpus(TOKENIZER, world))
    tokenizer = train_tokenizer(corpus, TOKENIZER, extra_tokens=boilerplate_tokens(world=world))
    model = init_model(tokenizer, ARCH)
    model.save_pretrained(out_dir, safe_serialization=True)
    tokenizer.save_pretrained(out_dir)
    n_chars = sum(len(t) for t in corpus)
    n_tokens = sum(len(tokenizer(t, add_special_tokens=False)["input_ids"]) for t in corpus[:2000])
    n_chars_sample = sum(len(t) for t in corpus[:2000])
    return {
        "name": model_name(world),
        "key": cache_path(world).name,  # out_dir is the build's temporary folder; the entry is renamed after
        "num_parameters": int(sum(p.numel() for p in model.parameters())),
        "vocab_size": len(tokenizer),
        "corpus_texts": len(corpus),
        "corpus_chars": n_chars,
        "chars_per_token": round(n_chars_sample / max(1, n_tokens), 3),
        "arch": asdict(ARCH),
        "tokenizer_sha256": sha256_file(out_dir / "tokenizer.json"),
    }


def count_parameters(world: type[World] | None = None) -> int:
    """Parameter count without building (meta device); the vocabulary size is taken from the cache
    when built, else the BPE target plus the added tokens."""
    import torch
    from transformers import Qwen3ForCausalLM

    info = cache.entry_info(cache_path(world))
    vocab = (info or {}).get("vocab_size") or TOKENIZER.vocab_size + len(MARKUP) + len(boilerplate_tokens(world=world))
    with torch.device("meta"):
        model = Qwen3ForCausalLM(qwen3_config(vocab, ARCH))
    return int(sum(p.numel() for p in model.parameters()))
