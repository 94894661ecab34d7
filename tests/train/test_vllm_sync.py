"""The GPU path's weight sync, tested without vLLM: what TRL's vLLM engine would receive.

TRL syncs a PEFT model into vLLM by ``merge_adapter()`` on the *active* adapters, reading the merged
weights and ``unmerge_adapter()``. With two adapters, the engine must receive base + policy delta,
never the world model's delta. A fake engine stands in for ``vllm.LLM`` and records every
``load_weights`` call of TRL's own ``VLLMGeneration.sync_weights``.
"""

from __future__ import annotations

import copy
import sys
import types
from pathlib import Path

import pytest
import torch

sys.path.insert(0, str(Path(__file__).parent))
from test_trainer import make_inputs, make_trainer, one_step  # noqa: E402
from tiny import tiny_tokenizer  # noqa: E402

from lfo_cli.train.adapters import POLICY, WORLD_MODEL, activate  # noqa: E402


@pytest.fixture(scope="module")
def tokenizer():
    return tiny_tokenizer()


class FakeEngine:
    """What TRL's colocate sync touches on `vllm.LLM`: the driver worker's model and the prefix cache."""

    def __init__(self):
        self.weights: dict[str, torch.Tensor] = {}
        runner = types.SimpleNamespace(model=types.SimpleNamespace(load_weights=self._load))
        self.llm_engine = types.SimpleNamespace(
            model_executor=types.SimpleNamespace(driver_worker=types.SimpleNamespace(model_runner=runner)))

    def _load(self, weights):
        for name, tensor in weights:
            self.weights[name] = tensor.detach().clone()

    def reset_prefix_cache(self):
        pass


def synced_weights(trainer, monkeypatch) -> dict[str, torch.Tensor]:
    from trl.generation import vllm_generation

    engine = FakeEngine()
    monkeypatch.setattr(vllm_generation.VLLMGeneration, "_init_vllm", lambda self: setattr(self, "llm", engine))
    generation = vllm_generation.VLLMGeneration(trainer.model, trainer.accelerator, trainer.processing_class,
                                                mode="colocate")
    generation.sync_weights()
    return engine.weights


def policy_merged(model) -> dict[str, torch.Tensor]:
    """Base + policy delta, computed apart from TRL: a copy without the world model, merged and unloaded."""
    clone = copy.deepcopy(model)
    if WORLD_MODEL in clone.peft_config:
        clone.delete_adapter(WORLD_MODEL)
    clone.set_adapter(POLICY)
    return {k: v.detach() for k, v in clone.merge_and_unload().state_dict().items()}


CASES = [("separate", "joint"), ("stacked", "joint"), ("stacked", "alternating"), ("stacked", "wm_first:1"),
         ("stacked", "hierarchical:2"), ("separate", "alternating"), ("shared", "joint")]


@pytest.mark.parametrize(("coupling", "schedule"), CASES)
def test_vllm_receives_base_plus_policy_after_real_steps(tokenizer, tmp_path, monkeypatch, coupling, schedule):
    trainer = make_trainer(tokenizer, tmp_path, wm_coupling=coupling, wm_schedule=schedule, wm_coef=1.0,
                           dual=coupling != "shared")
    for step in range(3):  # real optimizer steps: both adapters move away from their zero init
        one_step(trainer, make_inputs(tokenizer, seed=step))
    got = synced_weights(trainer, monkeypatch)
    want = policy_merged(trainer.model)
    assert got and set(got) <= set(want)
    lora_targets = [n for n in got if "q_proj.weight" in n or "v_proj.weight" in n]
    base = {k: v.detach() for k, v in copy.deepcopy(trainer.model).unload().state_dict().items()}
    assert any(not torch.allclose(want[n], base[n]) for n in lora_targets)  # the policy moved: not a vacuous check
    for name, tensor in got.items():
        torch.testing.assert_close(tensor, want[name], msg=name)
    # the sync left the model as it was: unmerged, only the policy adapter active
    assert trainer.model.active_adapters == [POLICY]
    assert not any(getattr(m, "merged", False) for m in trainer.model.modules())


def test_the_check_catches_a_world_model_merged_into_the_engine(tokenizer, tmp_path, monkeypatch):
    """If both adapters were active at sync time (stacked's world-model forward), the engine would get the
    world model's delta too, and the comparison above fails."""
    trainer = make_trainer(tokenizer, tmp_path, wm_coupling="stacked", wm_coef=1.0)
    for step in range(3):
        one_step(trainer, make_inputs(tokenizer, seed=step))
    activate(trainer.model, [POLICY, WORLD_MODEL])
    got = synced_weights(trainer, monkeypatch)
    want = policy_merged(trainer.model)
    assert any(not torch.allclose(got[n], want[n]) for n in got if "q_proj.weight" in n or "v_proj.weight" in n)


def test_transfer_eval_vllm_backend_requests_the_policy_adapter(tmp_path, monkeypatch):
    """`transfer-eval --backend vllm`: one LoRARequest, for the run dir's policy adapter, never world_model/."""
    from peft import LoraConfig, get_peft_model
    from tiny import tiny_model
    from transformers import AutoModelForCausalLM

    from lfo_cli.eval import vllm_backend

    tok = tiny_tokenizer()
    tiny_model(tok).save_pretrained(tmp_path / "base")
    tok.save_pretrained(tmp_path / "base")
    run = tmp_path / "run"
    peft = get_peft_model(AutoModelForCausalLM.from_pretrained(tmp_path / "base"),
                          LoraConfig(r=4, lora_alpha=8, target_modules=["q_proj", "v_proj"]))
    peft.save_pretrained(run)  # policy adapter at the run root, as lfo train writes it
    peft.save_pretrained(run / "world_model")
    requests, prompts = [], []

    class LLM:
        def __init__(self, model, **kw):
            self.model, self.kw = model, kw

        def generate(self, batch, params, lora_request=None, use_tqdm=False):
            requests.append(lora_request)
            prompts.append(batch)
            out = types.SimpleNamespace(token_ids=[1, 2, 3])
            return [types.SimpleNamespace(outputs=[out]) for _ in batch]

    class LoRARequest:
        def __init__(self, name, lora_id, path):
            self.lora_name, self.lora_int_id, self.lora_path = name, lora_id, path

    fake = types.ModuleType("vllm")
    fake.LLM, fake.SamplingParams = LLM, lambda **kw: kw
    inputs = types.ModuleType("vllm.inputs")
    inputs.TokensPrompt = lambda prompt_token_ids: prompt_token_ids
    lora = types.ModuleType("vllm.lora.request")
    lora.LoRARequest = LoRARequest
    monkeypatch.setitem(sys.modules, "vllm", fake)
    monkeypatch.setitem(sys.modules, "vllm.inputs", inputs)
    monkeypatch.setitem(sys.modules, "vllm.lora", types.ModuleType("vllm.lora"))
    monkeypatch.setitem(sys.modules, "vllm.lora.request", lora)
    monkeypatch.setattr(vllm_backend, "vllm_available", lambda: (True, ""))
    generate = vllm_backend.vllm_generate_fn(run)
    assert generate([[5, 6], [7]], 1.0, 4, 0) == [[1, 2, 3], [1, 2, 3]]
    assert len(requests) == 1 and Path(requests[0].lora_path) == run and requests[0].lora_name == "policy"
    assert "world_model" not in str(requests[0].lora_path)
