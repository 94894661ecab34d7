"""Two named PEFT LoRA adapters, `policy` and `world_model`, on one frozen base.

PEFT pitfall handled here: ``set_adapter`` marks every *inactive* adapter ``requires_grad=False``,
and autograd decides what gets a gradient at ``backward()`` time, not at forward time. After every
switch we therefore re-enable gradients on both adapters with ``set_requires_grad`` — otherwise a
joint step would silently train only the adapter that happened to be active last.
"""

from __future__ import annotations

import shutil
from collections.abc import Iterator, Sequence
from contextlib import contextmanager
from dataclasses import dataclass, field
from pathlib import Path

from lfo_cli import run_record as rr
from lfo_cli.errors import LfoError
from lfo_cli.io import atomic_dir
from lfo_cli.train.dropout import SparseDropout

POLICY = "policy"
WORLD_MODEL = "world_model"
ADAPTERS = (POLICY, WORLD_MODEL)


@dataclass
class LoraSettings:
    """The design's LoRA: r 16, alpha 32, dropout 0.05 on q/v/o projections, for both adapters."""

    r: int = field(default=16, metadata={"help": "LoRA rank of each adapter."})
    alpha: int = field(default=32, metadata={"help": "LoRA alpha (scale = alpha / r)."})
    dropout: float = field(default=0.05, metadata={"help": "LoRA dropout."})
    target_modules: list[str] = field(
        default_factory=lambda: ["q_proj", "v_proj", "o_proj"], metadata={"help": "Modules that get adapters."}
    )
    sparse_dropout: bool = field(
        default=True,
        metadata={"help": "On CPU, draw LoRA dropout masks as the gaps between dropped elements (the same "
                  "Bernoulli masks as nn.Dropout, one random number per 1/p elements): torch's CPU "
                  "bernoulli_ is serial, and on micro it cost more than the adapters' matmuls. "
                  "false = PEFT's nn.Dropout."},
    )

    def __post_init__(self):
        if self.r < 1:
            raise LfoError(f"lora.r must be >= 1, got {self.r}")
        if self.alpha < 1:
            raise LfoError(f"lora.alpha must be >= 1, got {self.alpha}")
        if not 0 <= self.dropout < 1:
            raise LfoError(f"lora.dropout must be in [0, 1), got {self.dropout}")
        if not self.target_modules:
            raise LfoError("lora.target_modules must name at least one module")

    def peft_config(self):
        from peft import LoraConfig

        return LoraConfig(
            r=self.r,
            lora_alpha=self.alpha,
            lora_dropout=self.dropout,
            target_modules=list(self.target_modules),
            task_type="CAUSAL_LM",
        )


def attach_dual_lora(model, lora: LoraSettings, with_world_model: bool = True):
    """Wrap ``model`` in a PeftModel with the `policy` adapter (and `world_model`), policy active."""
    from peft import get_peft_model

    peft_model = get_peft_model(model, lora.peft_config(), adapter_name=POLICY)
    if with_world_model:
        peft_model.add_adapter(WORLD_MODEL, lora.peft_config())
    if lora.sparse_dropout:
        use_sparse_dropout(peft_model)
    activate(peft_model, POLICY)
    return peft_model


def use_sparse_dropout(model) -> None:
    """Replace every LoRA layer's ``nn.Dropout`` with :class:`SparseDropout` (same p).

    PEFT keeps one dropout module per adapter in each LoRA layer's ``lora_dropout`` ModuleDict; the
    replacement is an ``nn.Dropout`` subclass, holds no parameters and so changes no checkpoint.
    """
    import torch

    for module in model.modules():
        dropouts = getattr(module, "lora_dropout", None)
        if not isinstance(dropouts, torch.nn.ModuleDict):
            continue
        for name, dropout in dropouts.items():
            if type(dropout) is torch.nn.Dropout and dropout.p > 0:
                dropouts[name] = SparseDropout(dropout.p)
                dropouts[name].train(dropout.training)


def adapter_names(model) -> list[str]:
    return list(getattr(model, "peft_config", {}).keys())


def activate(model, adapters: str | Sequence[str]) -> None:
    """Make ``adapters`` the active set and keep every adapter trainable."""
    names = [adapters] if isinstance(adapters, str) else list(adapters)
    if len(names) == 1:
        model.set_adapter(names[0])
    else:  # several LoRA adapters active at once (stacked): a LoraModel feature
        model.base_model.set_adapter(names)
    model.set_requires_grad(adapter_names(model), requires_grad=True)


@contextmanager
def active(model, adapters: str | Sequence[str]) -> Iterator[None]:
    """Temporarily switch adapters; always returns to `policy` only (what TRL generates with)."""
    activate(model, adapters)
    try:
        yield
    finally:
        activate(model, POLICY)


def adapter_params(model, name: str) -> list:
    """The LoRA parameters of one adapter (matched by the adapter-name component of the parameter path)."""
    token = f".{name}."
    return [p for n, p in model.named_parameters() if token in n and "lora_" in n]


def grad_norm(params) -> float:
    """L2 norm over the gradients that exist (0.0 when none do)."""
    from torch.nn.utils import get_total_norm

    grads = [p.grad.detach() for p in params if p.grad is not None]
    return float(get_total_norm(grads)) if grads else 0.0


def save_adapters(model, run_dir: Path) -> None:
    """Policy adapter at the run-dir root, world model in world_model/ (each loads with PeftModel.from_pretrained)."""
    run_dir = Path(run_dir)
    with atomic_dir(run_dir / ".adapters") as tmp:
        model.save_pretrained(tmp)  # PEFT writes tmp/policy/ and tmp/world_model/ (non-default names)
    staged = run_dir / ".adapters"
    for name in rr.ADAPTER_FILES:
        (staged / POLICY / name).replace(run_dir / name)
    if (staged / WORLD_MODEL).is_dir():
        if (run_dir / rr.WORLD_MODEL_DIR).exists():
            shutil.rmtree(run_dir / rr.WORLD_MODEL_DIR)
        (staged / WORLD_MODEL).replace(run_dir / rr.WORLD_MODEL_DIR)
    shutil.rmtree(staged)


class DualAdapterOptimizer:
    """Mixin for a ``Trainer`` subclass over both adapters (listed before it in the bases). transformers methods
    overridden:

    * ``create_optimizer`` — one AdamW over both adapters, with the world model's own learning rate as a second
      parameter group when ``wm.learning_rate`` is set.
    * ``_load_from_checkpoint`` (private: an upgrade can rename or change it) — transformers reloads non-active
      adapters as frozen; both are made trainable again before the optimizer is rebuilt."""

    def create_optimizer(self, model=None):
        split = self.optimizer is None and self.args.wm.learning_rate is not None
        optimizer = super().create_optimizer(model)
        if split:
            wm_ids = {id(p) for p in adapter_params(self.model, WORLD_MODEL)}
            groups = []
            for group in optimizer.param_groups:
                for is_wm in (False, True):
                    params = [p for p in group["params"] if (id(p) in wm_ids) == is_wm]
                    if params:
                        lr = self.args.wm.learning_rate if is_wm else group["lr"]
                        groups.append({**group, "params": params, "lr": lr})
            optimizer.param_groups.clear()
            for group in groups:
                optimizer.add_param_group(group)
        return optimizer

    def _load_from_checkpoint(self, resume_from_checkpoint, model=None):
        super()._load_from_checkpoint(resume_from_checkpoint, model=model)
        activate(self.model, POLICY)  # before the optimizer is built, so it covers both adapters again
