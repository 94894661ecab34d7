"""Evaluation: success rate, world-model MSE, policy entropy, per-difficulty success; the random
baseline; training-curve figures. Evaluation always uses the task's ground-truth rules
(``DeterministicParent``), whichever parent trained the model."""

from __future__ import annotations

from pathlib import Path

import torch
import torch.nn.functional as F

from lfo_cli import run_record as rr
from lfo_cli.errors import LfoError
from lfo_cli.io import atomic_write_json, atomic_write_text
from lfo_cli.wmil.envs import VecEnv
from lfo_cli.wmil.model import BabyModel
from lfo_cli.wmil.parents import DeterministicParent
from lfo_cli.wmil.rollout import rollout
from lfo_cli.wmil.runs import load_model_from_run
from lfo_cli.wmil.show import print_table
from lfo_cli.wmil.task_base import Task


@torch.no_grad()
def evaluate_level(model: BabyModel | None, task: Task, level: int, episodes: int, seed: int,
                   greedy: bool = False) -> dict:

    gen = torch.Generator().manual_seed(10_000 + seed)
    env = VecEnv(task, DeterministicParent(task), episodes, gen, level)
    batch = rollout(model, env, gen, greedy=greedy)
    out = {"level": level, "episodes": episodes, "success": batch.episode_success.float().mean().item(),
           "goal_return": batch.goal.sum(1).mean().item()}
    if model is not None:
        model.eval()
        logits, _, h = model(batch.obs[:, :-1])
        out["entropy"] = torch.distributions.Categorical(logits=logits).entropy().mean().item()
        pred = model.predict_next(h, batch.actions)
        out["wm_mse"] = F.mse_loss(pred, model.wm_target(batch.obs[:, 1:])).item()
    else:
        out["entropy"] = float(torch.log(torch.tensor(float(task.num_actions))))
    return out


def evaluate_model(model: BabyModel | None, task: Task, episodes: int = 1024, seed: int = 0) -> dict:
    """Per-level sampled and greedy success; ``overall`` = sampled policy at the hardest level."""
    per_level = [evaluate_level(model, task, lv, episodes, seed) for lv in range(task.num_levels)]
    # greedy = argmax action; undefined for the uniform random policy
    greedy = [evaluate_level(model, task, lv, episodes, seed, greedy=True)["success"] if model is not None else None
              for lv in range(task.num_levels)]
    for row, g in zip(per_level, greedy, strict=True):
        row["success_greedy"] = g
    return {"overall": dict(per_level[-1]), "per_level": per_level, "policy": "random" if model is None else "model"}


def write_training_figures(rows: list[dict], out_dir: Path) -> None:
    """metrics.csv (every logged metric) and training_curves.png (success, entropy, WM MSE, rewards)."""
    if not rows:
        return
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt
    import pandas as pd

    df = pd.DataFrame(rows)
    atomic_write_text(out_dir / "metrics.csv", df.to_csv(index=False))
    panels = [(rr.WMIL_SUCCESS, "success"), ("losses/entropy", "policy entropy"),
              ("losses/world_model", "world-model MSE"), (["reward/goal", "reward/pred", "reward/cons"], "reward components")]
    fig, axes = plt.subplots(1, 4, figsize=(16, 3.4))
    for ax, (keys, title) in zip(axes, panels, strict=True):
        for k in [keys] if isinstance(keys, str) else keys:
            if k in df:
                ax.plot(df[rr.STEP], df[k], label=k)
        ax.set_title(title)
        ax.set_xlabel("training step")
        if not isinstance(keys, str):
            ax.legend(fontsize=7)
    fig.tight_layout()
    fig.savefig(out_dir / "training_curves.png", dpi=110)
    plt.close(fig)


def write_eval_outputs(result: dict, out_dir: Path, stem: str = "eval") -> None:
    """``<stem>.csv`` (one row per level and policy) and ``<stem>.png`` (per-difficulty success)."""
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt
    import pandas as pd

    recs = []
    for policy, res in result["policies"].items():
        for row in res["per_level"]:
            recs.append({"policy": policy, **row})
    df = pd.DataFrame(recs)
    atomic_write_text(out_dir / f"{stem}.csv", df.to_csv(index=False))
    fig, ax = plt.subplots(figsize=(6, 3.5))
    policies = list(result["policies"])
    width = 0.8 / len(policies)
    for i, p in enumerate(policies):
        sub = df[df.policy == p]
        ax.bar(sub["level"] + i * width, sub["success"], width=width, label=p)
    ax.set_xlabel("difficulty level")
    ax.set_ylabel("success (sampled policy)")
    ax.set_ylim(0, 1.05)
    ax.set_title(f"{result['task']}: per-difficulty success")
    ax.legend(fontsize=8)
    fig.tight_layout()
    fig.savefig(out_dir / f"{stem}.png", dpi=110)
    plt.close(fig)


def run_eval(run_dir: Path, episodes: int = 1024, seed: int = 0, show: bool = True) -> dict:
    """`lfo wmil eval`: the trained model vs the random policy at every level; eval_report.{json,csv,png}."""
    if episodes < 1:
        raise LfoError("--episodes must be >= 1")
    run_dir = Path(run_dir)
    cfg, model, task = load_model_from_run(run_dir)
    result = {"task": cfg.task, "run_dir": str(run_dir), "episodes": episodes, "seed": seed,
              "policies": {"model": evaluate_model(model, task, episodes, seed),
                           "random": evaluate_model(None, task, episodes, seed)}}
    atomic_write_json(run_dir / "eval_report.json", result)
    write_eval_outputs(result, run_dir, stem="eval_report")
    if show:
        rows = []
        for policy, res in result["policies"].items():
            for row in res["per_level"]:
                wm = f"{row['wm_mse']:.4f}" if "wm_mse" in row else "-"
                greedy = "-" if row["success_greedy"] is None else f"{row['success_greedy']:.3f}"
                rows.append((policy, str(row["level"]), f"{row['success']:.3f}", greedy, wm, f"{row['entropy']:.3f}"))
        print_table(f"{cfg.task} ({run_dir})", ("policy", "level", "success", "greedy", "WM MSE", "entropy"), rows)
        print(f"wrote {run_dir / 'eval_report.json'}, eval_report.csv, eval_report.png")
    return result
