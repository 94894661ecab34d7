"""The hidden-rule example (wm_tool_env.py) on a Hugging Face model loaded by name, sized for one GPU.

    pip install -e /path/to/lfo          # lfo and its pinned TRL, transformers, PEFT
    python examples/wm_hf_model.py Qwen/Qwen3-0.6B

Any causal LM whose chat template TRL can parse tool calls from works (Qwen2.5, Qwen3, Llama 3.x among them;
TRL raises one error for another). The logs, in runs/wm_hf_model/ and on the console, carry TRL's metrics and
lfo's: losses/wm (the world model's loss on probe's replies), wm/target_tokens and grad_norm/wm_over_rl (the
world model's part of the policy's gradient over RL's). Not run by the tests: it downloads the model.
"""

import sys

import torch
from transformers import AutoModelForCausalLM, AutoTokenizer
from wm_tool_env import train

name = sys.argv[1] if len(sys.argv) > 1 else "Qwen/Qwen3-0.6B"
cuda = torch.cuda.is_available()
model = AutoModelForCausalLM.from_pretrained(name, dtype=torch.bfloat16 if cuda else torch.float32)
tokenizer = AutoTokenizer.from_pretrained(name)
train(model, tokenizer, steps=200, output_dir="runs/wm_hf_model", bf16=cuda, use_cpu=not cuda,
      per_device_train_batch_size=16, num_generations=8, max_completion_length=512, learning_rate=1e-5)
