"""GRPO with lfo's world-model loss on a tool whose replies follow a hidden rule (the agent must infer it).

The environment is plain Python, in this file: `probe(x)` answers f(x) = a*x + b for a hidden a, b; the agent
probes, then answers f(10). The world model learns to predict `probe`'s replies from the tool messages TRL
itself inserts (wm.targets="tool_responses"); `stacked` sends its gradient into the policy's LoRA adapter at the
lambda lfo calibrated for it. Run: python examples/wm_tool_env.py [MODEL] (a chat model TRL parses tool calls of);
after a kill the same command resumes; a finished run dir is refused (pass another output_dir).
"""

import random
import re
import sys

from datasets import Dataset
from lfo_cli.api import DualLoRAConfig, LoraSettings, TrainerRun, WorldModelSettings, attach_dual_lora

TASK = "A hidden rule f(x) = a*x + b. Call probe to see f at a few numbers, then answer: f(10) = ?"
STACKED_LAMBDA = 0.015  # stacked's calibrated lambda in lfo's reading study (docs/api.md: calibrate your own)


class HiddenRule:
    def reset(self, seed: int = 0, **kwargs) -> None:
        rng = random.Random(seed)
        self.a, self.b, self.probed = rng.randint(2, 9), rng.randint(0, 9), set()

    def probe(self, x: int) -> str:
        """Evaluate the hidden rule at a number.

        Args:
            x: The number to evaluate f at.
        """
        self.probed.add(int(x))
        return f"f({int(x)}) = {self.a * int(x) + self.b}"


def reward(completions, environments, **kwargs) -> list[float]:
    """1 for the right f(10); else 0.25 per distinct probe, up to two (two points fix a line)."""
    out = []
    for messages, env in zip(completions, environments, strict=True):
        answer = re.findall(r"-?\d+", messages[-1].get("content") or "") if messages[-1]["role"] == "assistant" else []
        right = bool(answer) and int(answer[-1]) == 10 * env.a + env.b
        out.append(1.0 if right else 0.25 * min(len(env.probed), 2))
    return out


def train(model, tokenizer, steps: int = 200, output_dir: str = "runs/wm_tool_env", **trainer_args):
    wm = WorldModelSettings(coupling="stacked", coef=STACKED_LAMBDA, targets="tool_responses", tools=["probe"],
                            grad_probe_every=1)  # measure the world model's share of the policy gradient each step
    args = DualLoRAConfig(output_dir=output_dir, max_steps=steps, logging_steps=1, report_to=[], wm=wm,
                          **{"num_generations": 8, "max_completion_length": 256, "save_steps": 20, **trainer_args})
    data = Dataset.from_list([{"prompt": [{"role": "user", "content": TASK}], "seed": i} for i in range(10_000)])
    run = TrainerRun(args)  # output_dir becomes an lfo run dir: run.json, metrics.jsonl, checkpoints, summary.json
    trainer = run.trainer(model=attach_dual_lora(model, LoraSettings()), train_dataset=data, reward_funcs=reward,
                          processing_class=tokenizer, environment_factory=HiddenRule)
    run.train(trainer)  # logs losses/wm, wm/target_tokens, grad_norm/wm_over_rl; run it again after a kill: it resumes
    return trainer


if __name__ == "__main__":
    from transformers import AutoModelForCausalLM, AutoTokenizer

    name = sys.argv[1] if len(sys.argv) > 1 else "Qwen/Qwen2.5-0.5B-Instruct"
    train(AutoModelForCausalLM.from_pretrained(name), AutoTokenizer.from_pretrained(name))
