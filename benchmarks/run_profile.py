"""Where the wall time of a real `lfo train` run goes, phase by phase.

Runs the first ``--steps`` optimizer steps of a named recipe exactly as `lfo train` would (the runner,
its callbacks, validation, checkpoints), in this process on ``--threads`` torch threads, with a timer
around each phase's function. Timers nest: each phase's time is its own, without the phases inside it,
so the phases add up to the run's wall time.

    python benchmarks/run_profile.py --recipe observation_micro --steps 10
    python benchmarks/run_profile.py --recipe observation_micro --steps 10 --set wm.coef=0 --tag baseline

Phases: generation (a rollout turn: lfo's sampler or TRL's model.generate), generation other (the tool loop's own Python: parsing
calls, building the next turn's prompt), environment (the tools), reward, old log-probs (TRL's forward
over the rollouts during generation), world-model record (the objective's collect), policy loss and
world-model loss (their forwards), backward, optimizer, evaluation (validation and held-out), checkpoint,
logging, and the rest (the Trainer's loop, data collation). Writes a table and
``reports/benchmarks/run_profile_<recipe>[_<tag>]_<date>_<commit>.json``.
"""

from __future__ import annotations

import argparse
import functools
import sys
import tempfile
import time
from collections import defaultdict
from pathlib import Path

from lfo_cli.io import short_commit, write_measurement

REPO = Path(__file__).resolve().parents[1]


class PhaseTimer:
    """Exclusive wall time per phase: a phase entered inside another is subtracted from the outer one."""

    def __init__(self, clock=time.perf_counter):
        self.clock = clock
        self.seconds: dict[str, float] = defaultdict(float)
        self.calls: dict[str, int] = defaultdict(int)
        self._stack: list[list] = []  # [phase, start, children's time]

    def wrap(self, owner, name: str, phase) -> None:
        """Time every call of ``owner.name`` as ``phase`` (a name, or a function of the phases it runs inside)."""
        original = getattr(owner, name)
        timer = self

        @functools.wraps(original)
        def timed(*args, **kwargs):
            ph = phase([p for p, _, _ in timer._stack]) if callable(phase) else phase
            timer._stack.append([ph, timer.clock(), 0.0])
            try:
                return original(*args, **kwargs)
            finally:
                ph, start, children = timer._stack.pop()
                spent = timer.clock() - start
                timer.seconds[ph] += spent - children
                timer.calls[ph] += 1
                if timer._stack:
                    timer._stack[-1][2] += spent

        setattr(owner, name, timed)


def instrument(timer: PhaseTimer) -> None:
    """Wrap the functions of each phase (classes, so every instance the runner makes is timed)."""
    import accelerate
    import torch
    from trl import GRPOTrainer

    from lfo_cli.env.trl_env import CustomerServiceEnv
    from lfo_cli.train import callbacks, objectives, trainer

    T = trainer.DualLoRAGRPOTrainer
    timer.wrap(GRPOTrainer, "_generate_and_score_completions", "generation other")
    timer.wrap(GRPOTrainer, "_generate_single_turn", "generation")
    timer.wrap(T, "_generate_single_turn", "generation")  # lfo's sampler (trainer.sampler: lfo)
    for tool in ("search_company", "auth_info_form", "make_phone_call", "reset"):
        timer.wrap(CustomerServiceEnv, tool, "environment")
    timer.wrap(GRPOTrainer, "_calculate_rewards", "reward")
    # The same forward is the policy loss's inside compute_loss, and old log-probs during generation.
    timer.wrap(GRPOTrainer, "_get_per_token_logps_and_entropies",
               lambda outer: "policy loss" if "policy loss" in outer else "old log-probs")
    timer.wrap(GRPOTrainer, "compute_loss", "policy loss")
    timer.wrap(T, "_probe_policy_from_wm", "world-model loss")  # the probe is the world model's overhead
    for cls in (objectives._ExampleObjective, objectives.Shared):
        timer.wrap(cls, "collect", "world-model record")
        timer.wrap(cls, "loss", "world-model loss")
    timer.wrap(accelerate.Accelerator, "backward", "backward")
    timer.wrap(torch.optim.AdamW, "step", "optimizer")
    timer.wrap(T, "_clip_grad_norm", "optimizer")
    timer.wrap(callbacks.Validation, "evaluate", "evaluation")
    timer.wrap(GRPOTrainer, "_save_checkpoint", "checkpoint")
    timer.wrap(GRPOTrainer, "log", "logging")


def profile(recipe: str, steps: int, overrides: list[str], threads: int) -> dict:
    import torch

    from lfo_cli.models.warmstart import ensure_warmstart
    from lfo_cli.perf import tune_malloc
    from lfo_cli.recipes import load_recipe
    from lfo_cli.train.runner import run_training

    commit = short_commit(REPO)  # the code measured: taken before the run, which may outlast later commits
    tune_malloc()  # as the `lfo` command does
    torch.set_num_threads(threads)
    rec = load_recipe(recipe, [*overrides, f"trainer.max_steps={steps}"])
    timer = PhaseTimer()
    instrument(timer)
    with tempfile.TemporaryDirectory(prefix="lfo-profile-") as out:
        start = time.perf_counter()
        cfg = rec.config
        # The run's base as `lfo train` gives it (the warm start is built beforehand: it is not part of the profile).
        base = str(ensure_warmstart(cfg.model.warmstart, data_dir=cfg.data.dir, build=False)) if cfg.model.warmstart \
            else cfg.model.name
        run_training(cfg, Path(out), args=cfg.training_args(out), base=base)
        wall = time.perf_counter() - start
    phases = dict(timer.seconds)
    phases["rest"] = wall - sum(phases.values())
    return {"recipe": recipe, "overrides": overrides, "steps": steps, "threads": threads, "wall_s": round(wall, 2),
            "phases": {k: round(v, 2) for k, v in sorted(phases.items(), key=lambda kv: -kv[1])},
            "calls": dict(timer.calls), "commit": commit, "date": time.strftime("%Y-%m-%d")}


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--recipe", default="observation_micro")
    ap.add_argument("--steps", type=int, default=10)
    ap.add_argument("--set", dest="overrides", action="append", default=[], metavar="KEY=VALUE")
    ap.add_argument("--threads", type=int, default=1)
    ap.add_argument("--tag", default="", help="a name for this arm in the file name (e.g. baseline)")
    ap.add_argument("--out-dir", type=Path, default=REPO / "reports" / "benchmarks")
    a = ap.parse_args(argv)
    result = profile(a.recipe, a.steps, a.overrides, a.threads)
    path = write_measurement(a.out_dir, f"run_profile_{a.recipe}{'_' + a.tag if a.tag else ''}", result)
    wall = result["wall_s"]
    print(f"{a.recipe}, {a.steps} steps on {a.threads} thread(s): {wall:.1f} s ({wall / a.steps:.1f} s per step)")
    width = max(map(len, result["phases"]))
    for phase, s in result["phases"].items():
        print(f"  {phase:<{width}}  {s:8.2f} s  {100 * s / wall:5.1f}%  {result['calls'].get(phase, '')}")
    print(f"wrote {path}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
