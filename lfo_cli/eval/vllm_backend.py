"""vLLM generation for evaluation: the run's base model served by `vllm.LLM`, the policy adapter
applied per request with `LoRARequest` (GPU machines with the `[gpu]` extra).

`vllm_generate_fn(run_dir)` returns a callable with the signature evaluate_agent's ``generate_fn``
expects: ``fn(prompt_ids: list[list[int]], temperature: float, max_new_tokens: int, seed: int)
-> list[list[int]]``, plus a ``tokenizer`` attribute (the run's tokenizer, same chat template).
"""

from __future__ import annotations

import importlib.util
import json
from pathlib import Path

from lfo_cli import run_record as rr
from lfo_cli.errors import LfoError
from lfo_cli.eval.loading import base_model_of
from lfo_cli.models.registry import load_tokenizer, resolve


def vllm_available() -> tuple[bool, str]:
    if importlib.util.find_spec("vllm") is None:
        return False, "vllm is not installed (pip install 'lfo[gpu]' on a CUDA machine)"
    import torch

    if not torch.cuda.is_available():
        return False, "vllm needs a CUDA GPU and none is visible"
    return True, ""


def vllm_generate_fn(run_dir: str | Path):
    ok, why = vllm_available()
    if not ok:
        raise LfoError(f"--backend vllm: {why}; use --backend transformers")
    from vllm import LLM, SamplingParams
    from vllm.inputs import TokensPrompt
    from vllm.lora.request import LoRARequest

    run_dir = Path(run_dir)
    base = resolve(base_model_of(run_dir, "policy"))
    rank = int(json.loads((run_dir / rr.ADAPTER_CONFIG_FILE).read_text())["r"])
    llm = LLM(model=str(base), enable_lora=True, max_lora_rank=max(rank, 8), max_loras=1, dtype="bfloat16")
    lora = LoRARequest("policy", 1, str(run_dir))

    def generate(prompt_ids: list[list[int]], temperature: float, max_new_tokens: int, seed: int) -> list[list[int]]:
        params = SamplingParams(temperature=temperature, max_tokens=max_new_tokens, seed=seed)
        outputs = llm.generate([TokensPrompt(prompt_token_ids=ids) for ids in prompt_ids], params,
                               lora_request=lora, use_tqdm=False)
        return [list(o.outputs[0].token_ids) for o in outputs]

    generate.tokenizer = load_tokenizer(base)
    return generate
