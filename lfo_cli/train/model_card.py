"""The run dir's model card (README.md): what the files are, which base they need, how to load them.

TRL's own card names no base for a local base model ("a fine-tuned version of None") and knows nothing
of the world-model adapter, so `lfo train` writes this one when the run finishes.
"""

from __future__ import annotations

from pathlib import Path

from lfo_cli import run_record as rr
from lfo_cli.io import atomic_write_text

LOAD_SNIPPET = '''```python
from peft import PeftModel
from transformers import AutoModelForCausalLM, AutoTokenizer

base = AutoModelForCausalLM.from_pretrained("{base}")
tokenizer = AutoTokenizer.from_pretrained("{run}")           # the base's tokenizer with lfo's chat template
model = PeftModel.from_pretrained(base, "{run}", adapter_name="policy")
{wm_line}model.set_adapter("policy")                                     # the agent; "world_model" predicts the replies
```'''


def base_label(ref: dict) -> str:
    if "lfo_home" in ref:
        return f"$LFO_HOME/{ref['lfo_home']}"
    return ref.get("name") or ref.get("path") or "?"


def model_card(run_name: str, recipe: str | None, seed: int, coupling: str, ref: dict, summary: dict, *,
               has_world_model: bool) -> str:
    """Markdown for RUN/README.md. ``summary`` is the run's summary.json content (validation numbers);
    ``has_world_model``: the run's objective trained a `world_model` adapter."""
    base = base_label(ref)
    has_wm = has_world_model
    rows = ["| file | what |", "|---|---|",
            "| `adapter_config.json`, `adapter_model.safetensors` | the policy adapter (the agent) |"]
    rows.append("| `world_model/` | the world-model adapter: predicts the world's reply to a tool call |" if has_wm else
                f"| (no `world_model/`) | `{coupling}` coupling: the policy's own weights predicted the replies |")
    rows += ["| `tokenizer.json`, `tokenizer_config.json`, `chat_template.jinja` | the tokenizer with its chat template |",
             "| `recipe.yaml`, `run.json`, `summary.json`, `metrics.jsonl`, `validation/` | the resolved recipe, "
             "provenance, results |"]
    how = (f"built by `lfo train --recipe {ref['warmstart']}` (the same model on every machine: its cache key "
           "names the recipe and data)") if ref.get("warmstart") else "a registry name, hub id or local path"
    wm_line = ('model.load_adapter("{run}/world_model", adapter_name="world_model")\n' if has_wm else "")
    snippet = LOAD_SNIPPET.replace("{wm_line}", wm_line).replace("{base}", base.replace("$LFO_HOME", "~/.cache/lfo"))
    snippet = snippet.replace("{run}", ".")
    results = []
    for key, d, label in ((rr.VAL_SUCCESS, None, "validation success"), (rr.VAL_SUCCESS_D1, 1, "difficulty 1"),
                          (rr.VAL_SUCCESS_D2, 2, "difficulty 2")):
        start = summary.get(rr.vs_start_key(rr.VAL, rr.START_SUCCESS, d))
        if key in summary:
            results.append(f"| {label} | {'' if start is None else f'{start:.3f}'} | {summary[key]:.3f} |")
    lines = ["---", f"base_model: {base}", "library_name: peft", "tags:", "- lfo", "- trl", "- grpo", "- lora",
             "---", "", f"# {run_name}", "",
             f"A dual-LoRA DAPO run of lfo (`lfo train --recipe {recipe}`, seed {seed}, "
             f"world-model coupling `{coupling}`).", "", *rows, "",
             f"Base model: `{base}`, {how}. `lfo transfer-eval`, `lfo inspect-wm` and `lfo export` find it "
             "through `$LFO_HOME` wherever the run dir is moved; `lfo export RUN --out DIR --merge` writes a "
             "standalone model that `AutoModelForCausalLM` loads directly.", "", "## Load with PEFT", "", snippet, ""]
    if results:
        lines += ["## Results", "", "| | start (warm start) | end |", "|---|---|---|", *results, ""]
    return "\n".join(lines)


def write_model_card(run_dir: Path, text: str) -> None:
    atomic_write_text(Path(run_dir) / "README.md", text)
