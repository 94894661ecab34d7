"""The training console (GRPO and the warm start's SFT): lfo's progress (a rich bar on a terminal, plain
lines with step/total, rate and ETA in a log) and one compact line per log row instead of the raw dict
of every metric (those are all in ``metrics.jsonl`` and any ``report_to`` tracker). No tqdm bar."""

from __future__ import annotations

from transformers import TrainerCallback

from lfo_cli.progress import ProgressLog

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


class TrainerProgress(TrainerCallback):
    """lfo's progress for a transformers/TRL Trainer, in place of transformers' tqdm ``ProgressCallback``
    (and of ``PrinterCallback``'s raw metric dicts): a rich bar on a terminal, plain lines with
    step/total, rate and ETA in a log (:class:`~lfo_cli.progress.ProgressLog`), and one compact line
    per log row (:func:`format_log`). :func:`use_lfo_progress` installs it on a trainer."""

    def __init__(self, label: str, **progress_kwargs):
        self.label, self.kwargs = label, progress_kwargs
        self.plog: ProgressLog | None = None

    def on_train_begin(self, args, state, control, **kwargs):
        if state.is_world_process_zero:
            self.plog = ProgressLog(self.label, state.max_steps, unit="step", start=state.global_step, **self.kwargs)
        self.pending: int | None = None

    # The Trainer calls on_step_end before the step's on_log: a step's progress is shown at its log line
    # when it has one (with rate and ETA), else at the next step's start or the end.
    def _flush(self) -> None:
        if self.plog is not None and self.pending is not None:
            self.plog.update(self.pending)
        self.pending = None

    def on_step_begin(self, args, state, control, **kwargs):
        self._flush()

    def on_step_end(self, args, state, control, **kwargs):
        self.pending = state.global_step

    def on_log(self, args, state, control, logs=None, **kwargs):
        if self.plog is not None and logs:
            line = format_log(logs, state.global_step, state.max_steps)
            if line and line.startswith("step "):
                self.plog.update(state.global_step, quiet=True)
                self.pending = None
                self.plog.log(line, with_status=True)
            elif line:
                self.plog.log(line)

    def on_train_end(self, args, state, control, **kwargs):
        self._flush()
        if self.plog is not None:
            self.plog.close()


def use_lfo_progress(trainer, label: str, **progress_kwargs) -> TrainerProgress:
    """Swap the Trainer's own console callbacks (tqdm bar, or the metric-dict printer when tqdm is
    disabled) for :class:`TrainerProgress`; the logs still reach metrics.jsonl and every tracker."""
    from transformers.trainer_callback import PrinterCallback, ProgressCallback

    trainer.remove_callback(ProgressCallback)
    trainer.remove_callback(PrinterCallback)
    callback = TrainerProgress(label, **progress_kwargs)
    trainer.add_callback(callback)
    return callback
