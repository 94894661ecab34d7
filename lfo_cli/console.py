"""The training console (GRPO and the warm start's SFT): lfo's progress (a rich bar on a terminal, plain
lines with step/total, rate and ETA in a log) and one compact line per log row instead of the raw dict
of every metric (those are all in ``metrics.jsonl`` and any ``report_to`` tracker). No tqdm bar."""

from __future__ import annotations

from transformers import TrainerCallback

from lfo_cli import run_record as rr
from lfo_cli.progress import ProgressLog

# (metric, label, format) shown on a training step's line, when logged.
STEP_FIELDS = (("loss", "loss", ".4f"), ("mean_token_accuracy", "token acc", ".3f"), (rr.REWARD, "reward", ".3f"),
               (rr.FRAC_REWARD_ZERO_STD, "zero-var groups", ".2f"),
               (rr.LOSS_POLICY, "policy loss", ".4f"), (rr.LOSS_WM, "wm loss", ".3f"),
               (rr.WM_TOKEN_ACC, "wm acc", ".3f"), (rr.GRAD_POLICY, "|g| policy", ".3g"),
               ("step_time", "s/step", ".1f"))
VAL_FIELDS = ((rr.VAL_SUCCESS, "success", ".3f"), (rr.VAL_SUCCESS_D1, "d1", ".3f"), (rr.VAL_SUCCESS_D2, "d2", ".3f"),
              (rr.VAL_FIRST_CALL_RIGHT, "first call right", ".3f"),
              (rr.VAL_EXCEPTION_FIELD_OWN, "exception field (own dept)", ".3f"),
              (rr.VAL_WM_SEMANTIC_ACC, "wm names the fields", ".3f"),
              (rr.VAL_PROBE_RATE, "probes", ".3f"),
              (rr.HELDOUT_SUCCESS_D1, "held-out d1", ".3f"), (rr.HELDOUT_SUCCESS_D2, "held-out d2", ".3f"),
              (rr.HELDOUT_PROBE_RATE, "held-out probes", ".3f"))


def _fields(logs: dict, fields) -> str:
    return " · ".join(f"{label} {logs[key]:{fmt}}" for key, label, fmt in fields
                      if isinstance(logs.get(key), (int, float)))


def format_log(logs: dict, step: int, max_steps: int) -> str | None:
    """One line for a log row: validation, the run's end, or a training step; None for nothing to show."""
    if any(k.startswith(rr.VAL_PREFIX) for k in logs):
        return f"validation @ step {step}: " + _fields(logs, VAL_FIELDS)
    if "train_runtime" in logs:
        return f"trained {step} steps in {logs['train_runtime']:.0f} s"
    text = _fields(logs, STEP_FIELDS)
    return f"step {step}/{max_steps}: {text}" if text else None


class TrainerProgress(TrainerCallback):
    """lfo's progress for a transformers/TRL Trainer, in place of transformers' tqdm ``ProgressCallback``
    (and of ``PrinterCallback``'s raw metric dicts). :func:`use_lfo_progress` installs it on a trainer.

    On a terminal: a rich bar, and one compact line per log row (:func:`format_log`) above it. In a log:
    plain progress lines at :class:`~lfo_cli.progress.ProgressLog`'s cadence, each with step/total, rate,
    ETA and the last logged step's metrics (``GRPO: 30/90 steps (33%) · 16.3 s/step · ETA 16 min 18 s ·
    reward 0.412 · ...``), so a step's metrics and its progress are one line, not two; validation rows and
    the run's end print at once. Every row is in metrics.jsonl either way."""

    def __init__(self, label: str, **progress_kwargs):
        self.label, self.kwargs = label, progress_kwargs
        self.plog: ProgressLog | None = None
        self.pending: int | None = None

    def on_train_begin(self, args, state, control, **kwargs):
        self._start(state)
        self.pending = None

    def _start(self, state) -> None:
        # Callbacks registered before this one (the step-0 validation) can log first: start at whichever comes.
        if self.plog is None and state.is_world_process_zero:
            self.plog = ProgressLog(self.label, state.max_steps, unit="step", start=state.global_step, **self.kwargs)

    # The Trainer calls on_step_end before the step's on_log: a step's progress is counted at its log row
    # when it has one (so a line carries that step's metrics), else at the next step's start or the end,
    # where it prints only a heartbeat (without metrics: they would be an earlier step's).
    def _flush(self) -> None:
        if self.plog is not None and self.pending is not None:
            heartbeat = self.plog.heartbeat_due()
            self.plog.update(self.pending, note="" if heartbeat else None, quiet=not heartbeat)
        self.pending = None

    def on_step_begin(self, args, state, control, **kwargs):
        self._flush()

    def on_step_end(self, args, state, control, **kwargs):
        self.pending = state.global_step

    def on_log(self, args, state, control, logs=None, **kwargs):
        self._start(state)
        if self.plog is None or not logs:
            return
        line = format_log(logs, state.global_step, state.max_steps)
        if line is None:
            return
        self.pending = None
        if line.startswith("step "):
            if self.plog.terminal:
                self.plog.log(line)
                self.plog.update(state.global_step)
            else:
                self.plog.update(state.global_step, note=_fields(logs, STEP_FIELDS))
        elif "train_runtime" in logs:  # the run's end: this line, and no repeated last progress line
            self.plog.update(state.global_step, quiet=True)
            self.plog.log(line, counts_as_progress=True)
        else:
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
