"""The training console (GRPO and the warm start's SFT): transformers' progress bar (with its total), and one compact line per log row
instead of the raw dict of every metric (those are all in ``metrics.jsonl`` and any ``report_to`` tracker)."""

from __future__ import annotations

from transformers.trainer_callback import ProgressCallback

# (metric, label, format) shown on a training step's line, when logged.
STEP_FIELDS = (("loss", "loss", ".4f"), ("mean_token_accuracy", "token acc", ".3f"), ("reward", "reward", ".3f"), ("frac_reward_zero_std", "zero-var groups", ".2f"),
               ("losses/policy", "policy loss", ".4f"), ("losses/wm", "wm loss", ".3f"),
               ("wm/token_acc", "wm acc", ".3f"), ("grad_norm/policy", "|g| policy", ".3g"),
               ("step_time", "s/step", ".1f"))
VAL_FIELDS = (("val/success", "success", ".3f"), ("val/success/d1", "d1", ".3f"), ("val/success/d2", "d2", ".3f"),
              ("val/exception_field_own", "exception field (own dept)", ".3f"),
              ("val/wm_semantic_acc", "wm names the fields", ".3f"),
              ("heldout/success/d1", "held-out d1", ".3f"), ("heldout/success/d2", "held-out d2", ".3f"))


def _fields(logs: dict, fields) -> str:
    return " · ".join(f"{label} {logs[key]:{fmt}}" for key, label, fmt in fields
                      if isinstance(logs.get(key), (int, float)))


def format_log(logs: dict, step: int, max_steps: int) -> str | None:
    """One line for a log row: validation, the run's end, or a training step; None for nothing to show."""
    if any(k.startswith("val/") for k in logs):
        return f"validation @ step {step}: " + _fields(logs, VAL_FIELDS)
    if "train_runtime" in logs:
        return f"trained {step} steps in {logs['train_runtime']:.0f} s"
    text = _fields(logs, STEP_FIELDS)
    return f"step {step}/{max_steps}: {text}" if text else None


class CompactProgress(ProgressCallback):
    """`ProgressCallback` whose log lines are :func:`format_log`'s instead of ``str(logs)``."""

    def on_log(self, args, state, control, logs=None, **kwargs):
        if state.is_world_process_zero and self.training_bar is not None and logs:
            line = format_log(logs, state.global_step, state.max_steps)
            if line:
                self.training_bar.write(line)
