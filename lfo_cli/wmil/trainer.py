"""The WMIL training loop (CleanRL style): vectorised rollout -> one update -> log -> checkpoint.

One training step = one rollout of ``num_envs`` episodes of ``T`` env steps (a ``(B, T)`` batch of
tensors) followed by one REINFORCE update (or ``ppo_epochs x ppo_minibatches`` PPO updates).

Everything random flows from three sources that are checkpointed and restored: the global torch RNG
(init), ``gen_env`` (task instances) and ``gen_act`` (action sampling), so a run killed with
``kill -9`` and resumed ends with exactly the metrics of an uninterrupted run.
"""

from __future__ import annotations

import io
import math
import shutil
import time
from collections import defaultdict
from pathlib import Path

import torch
import torch.nn.functional as F

from lfo_cli import run_record as rr
from lfo_cli.errors import LfoError
from lfo_cli.io import (
    append_jsonl,
    atomic_dir,
    atomic_write_bytes,
    atomic_write_json,
    atomic_write_jsonl,
    atomic_write_text,
    read_json,
    run_metadata,
)
from lfo_cli.progress import ProgressLog
from lfo_cli.wmil import algos
from lfo_cli.wmil.config import WMILConfig
from lfo_cli.wmil.curriculum import CurriculumManager
from lfo_cli.wmil.envs import VecEnv, make_task
from lfo_cli.wmil.evaluate import evaluate_model, write_training_figures
from lfo_cli.wmil.parents import DeterministicParent, make_parent
from lfo_cli.wmil.rollout import Batch, build_model, initial_level, rollout
from lfo_cli.wmil.runs import latest_checkpoint, load_model_from_run
from lfo_cli.wmil.task_base import Task

TIME_KEYS = ("time/", "parent/")  # wall-clock and LLM-call counts: excluded from resume-equality checks


def intrinsic_rewards(task: Task, pred: torch.Tensor, target: torch.Tensor, raw: bool) -> tuple[torch.Tensor, torch.Tensor]:
    """Per-step ``pred = exp(-MSE)`` and ``cons`` = fraction of one-hot slots predicted exactly."""
    with torch.no_grad():
        r_pred = torch.exp(-((pred - target) ** 2).mean(-1))
        if not raw:
            return r_pred, torch.zeros_like(r_pred)
        hits, start = [], 0
        for card in task.obs_cards:
            hits.append(pred[..., start:start + card].argmax(-1) == target[..., start:start + card].argmax(-1))
            start += card
        return r_pred, torch.stack(hits, -1).float().mean(-1)


class Trainer:
    def __init__(self, cfg: WMILConfig, out_dir: Path, *, parent=None):
        self.cfg, self.out = cfg, Path(out_dir)
        if cfg.threads:
            torch.set_num_threads(cfg.threads)
        # ---- seeding, in one block --------------------------------------------------------
        torch.manual_seed(cfg.seed)
        self.gen_env = torch.Generator().manual_seed(cfg.seed * 1_000_003 + 1)
        self.gen_act = torch.Generator().manual_seed(cfg.seed * 1_000_003 + 2)
        # ---------------------------------------------------------------------------------
        self.task = make_task(cfg.task, cfg.num_actions)
        self.parent = parent or make_parent(cfg.parent, self.task, url=cfg.parent_url, model=cfg.parent_model,
                                            max_retries=cfg.parent_max_retries, timeout=cfg.parent_timeout,
                                            api_key_env=cfg.parent_api_key_env)
        self.model = build_model(cfg, self.task)
        self.optimizer = torch.optim.Adam(self.model.parameters(), lr=cfg.lr, fused=True)  # fused: 3x faster step on CPU
        self.curriculum = CurriculumManager(initial_level(cfg, self.task), self.task.num_levels - 1,
                                            cfg.mastery_threshold, cfg.curriculum_window)
        self.env = VecEnv(self.task, self.parent, cfg.num_envs, self.gen_env, self.curriculum.level)
        self.baseline = torch.zeros(self.task.max_horizon)
        self.step = 0

    # ---- updates ---------------------------------------------------------------------------
    def _rewards(self, batch: Batch, pred: torch.Tensor, target: torch.Tensor):
        r_pred, r_cons = intrinsic_rewards(self.task, pred, target, self.cfg.wm_target == "raw")
        w = self.cfg.reward_weights
        return w[0] * batch.goal + w[1] * r_pred + w[2] * r_cons, r_pred, r_cons

    def update_reinforce(self, batch: Batch) -> dict[str, float]:
        cfg, model = self.cfg, self.model
        t_len = batch.actions.shape[1]
        logits, h = batch.logits, batch.h
        dist = model.dist(logits)
        logp = dist.log_prob(batch.actions)
        entropy = dist.entropy().mean()
        pred = model.predict_next(h, batch.actions)
        target = model.wm_target(batch.obs[:, 1:])
        wm_loss = algos.world_model_loss(pred, target)
        reward, r_pred, r_cons = self._rewards(batch, pred.detach(), target)
        returns = algos.discounted_returns(reward, cfg.gamma)
        # running baseline per time step (the design: EMA of the batch mean), updated before use
        self.baseline[:t_len] = cfg.baseline_decay * self.baseline[:t_len] + (1 - cfg.baseline_decay) * returns.mean(0)
        adv = returns - self.baseline[:t_len]
        policy_loss = algos.reinforce_loss(logp, adv)
        kl = algos.kl_to_parent(logits, batch.oracle) if cfg.kl_coef > 0 else torch.zeros(())
        loss = policy_loss - cfg.entropy_coef * entropy + cfg.wm_coef * wm_loss + cfg.kl_coef * kl
        self.optimizer.zero_grad(set_to_none=True)
        loss.backward()
        grad_norm = torch.nn.utils.clip_grad_norm_(model.parameters(), cfg.max_grad_norm)
        self.optimizer.step()
        return {"losses/policy": policy_loss.item(), "losses/entropy": entropy.item(), "losses/world_model": wm_loss.item(),
                "losses/kl_parent": kl.item(), "losses/total": loss.item(), "charts/grad_norm": grad_norm.item(),
                "charts/baseline": self.baseline[t_len - 1].item(), "reward/pred": r_pred.mean().item(),
                "reward/cons": r_cons.mean().item(), "reward/total": reward.sum(1).mean().item()}

    def update_ppo(self, batch: Batch) -> dict[str, float]:
        cfg, model = self.cfg, self.model
        b = batch.actions.shape[0]
        with torch.no_grad():
            _, _, h = model(batch.obs[:, :-1])
            pred = model.predict_next(h, batch.actions)
            target = model.wm_target(batch.obs[:, 1:])
            reward, r_pred, r_cons = self._rewards(batch, pred, target)
            dones = torch.zeros_like(reward)
            dones[:, -1] = 1.0  # time limit = end of episode (fix 1); nothing to bootstrap
            adv, returns = algos.gae(reward, batch.values, dones, torch.zeros(b), cfg.gamma, cfg.gae_lambda)
        stats = defaultdict(list)
        mb = b // cfg.ppo_minibatches
        for _ in range(cfg.ppo_epochs):
            perm = torch.randperm(b, generator=self.gen_act)
            for i in range(cfg.ppo_minibatches):
                idx = perm[i * mb:(i + 1) * mb]
                logits, values, h = model(batch.obs[idx, :-1])
                dist = model.dist(logits)
                logp = dist.log_prob(batch.actions[idx])
                a = adv[idx]
                a = (a - a.mean()) / (a.std() + 1e-8) if a.numel() > 1 else a
                pg_loss, approx_kl, clipfrac = algos.ppo_policy_loss(logp, batch.logp[idx], a, cfg.clip_eps)
                v_loss = 0.5 * F.mse_loss(values, returns[idx])
                entropy = dist.entropy().mean()
                wm_loss = algos.world_model_loss(model.predict_next(h, batch.actions[idx]),
                                                 model.wm_target(batch.obs[idx, 1:]))
                kl = algos.kl_to_parent(logits, batch.oracle[idx]) if cfg.kl_coef > 0 else torch.zeros(())
                loss = pg_loss - cfg.entropy_coef * entropy + cfg.value_coef * v_loss + cfg.wm_coef * wm_loss + cfg.kl_coef * kl
                self.optimizer.zero_grad(set_to_none=True)
                loss.backward()
                gn = torch.nn.utils.clip_grad_norm_(model.parameters(), cfg.max_grad_norm)
                self.optimizer.step()
                for k, v in (("losses/policy", pg_loss), ("losses/value", v_loss), ("losses/entropy", entropy),
                             ("losses/world_model", wm_loss), ("losses/kl_parent", kl), ("losses/total", loss),
                             ("losses/approx_kl", approx_kl), ("losses/clipfrac", clipfrac), ("charts/grad_norm", gn)):
                    stats[k].append(float(v.detach()) if isinstance(v, torch.Tensor) else float(v))
        out = {k: sum(v) / len(v) for k, v in stats.items()}
        out.update({"reward/pred": r_pred.mean().item(), "reward/cons": r_cons.mean().item(),
                    "reward/total": reward.sum(1).mean().item()})
        return out

    def train_step(self) -> dict[str, float]:
        cfg = self.cfg
        reinforce = cfg.algorithm == "reinforce"
        batch = rollout(self.model, self.env, self.gen_act, need_oracle=cfg.kl_coef > 0, keep_graph=reinforce)
        metrics = self.update_reinforce(batch) if reinforce else self.update_ppo(batch)
        self.step += 1
        success = batch.episode_success.float()
        metrics.update({rr.WMIL_SUCCESS: success.mean().item(), "reward/goal": batch.goal.sum(1).mean().item(),
                        "charts/level": float(self.env.level)})
        if cfg.curriculum and self.curriculum.update(success.tolist(), self.step):
            self.env.level = self.curriculum.level
        return metrics

    # ---- checkpoints -----------------------------------------------------------------------
    @property
    def ckpt_root(self) -> Path:
        return self.out / "checkpoints"

    def save_checkpoint(self) -> Path:
        from safetensors.torch import save as st_save

        name = f"step_{self.step:08d}"
        state = {
            "step": self.step,
            "optimizer": self.optimizer.state_dict(),
            "baseline": self.baseline.clone(),
            "curriculum": self.curriculum.state_dict(),
            "env_level": self.env.level,
            "rng": {"torch": torch.get_rng_state(), "env": self.gen_env.get_state(), "act": self.gen_act.get_state()},
            "parent": self.parent.state_dict() if hasattr(self.parent, "state_dict") else {},
        }
        buf = io.BytesIO()
        torch.save(state, buf)
        weights = {k: v.detach().contiguous().clone() for k, v in self.model.state_dict().items()}
        with atomic_dir(self.ckpt_root / name) as tmp:
            atomic_write_bytes(tmp / "model.safetensors", st_save(weights))
            atomic_write_bytes(tmp / "trainer_state.pt", buf.getvalue())
            atomic_write_json(tmp / rr.WMIL_CONFIG_FILE, self.cfg.to_dict())
        atomic_write_json(self.ckpt_root / "latest.json", {"step": self.step, "dir": name})
        for old in sorted(self.ckpt_root.glob("step_*"))[:-2]:  # keep the last two
            shutil.rmtree(old, ignore_errors=True)
        return self.ckpt_root / name

    def load_checkpoint(self, path: Path) -> None:
        from safetensors.torch import load_file

        self.model.load_state_dict(load_file(path / "model.safetensors"))
        state = torch.load(path / "trainer_state.pt", weights_only=True)
        self.optimizer.load_state_dict(state["optimizer"])
        self.baseline = state["baseline"].clone()
        self.curriculum.load_state_dict(state["curriculum"])
        self.env.level = int(state["env_level"])
        torch.set_rng_state(state["rng"]["torch"])
        self.gen_env.set_state(state["rng"]["env"])
        self.gen_act.set_state(state["rng"]["act"])
        if hasattr(self.parent, "load_state_dict"):
            self.parent.load_state_dict(state["parent"])
        self.step = int(state["step"])


def _read_metrics_upto(path: Path, step: int) -> list[dict]:
    """Rows of metrics.jsonl up to ``step``; a torn last line (kill -9 mid-write) is dropped."""
    import json

    if not path.is_file():
        return []
    rows = []
    for line in path.read_text(encoding="utf-8").splitlines(keepends=True):
        if not line.endswith("\n"):
            break
        try:
            row = json.loads(line)
        except json.JSONDecodeError:
            break
        if row.get("step", 0) <= step:
            rows.append(row)
    return rows


def _finite(d: dict) -> dict:
    return {k: v for k, v in d.items() if not (isinstance(v, float) and not math.isfinite(v))}


# ---------------------------------------------------------------------------------------------
# The run
# ---------------------------------------------------------------------------------------------
def train(cfg: WMILConfig, out_dir: str | Path, *, resume: bool = False, force: bool = False,
          progress: bool = True, parent=None, stop_at_success: float | None = None,
          quiet: bool = False) -> dict:
    """Train, checkpoint, evaluate; write metrics.jsonl/csv, figures and summary.json into ``out_dir``.

    ``stop_at_success`` (benchmarks only) ends training at the first metrics row at or above it.
    """
    out = Path(out_dir)
    metrics_path = out / rr.METRICS_FILE
    if resume:
        if not (out / rr.WMIL_CONFIG_FILE).is_file():
            raise LfoError(f"--resume: {out} has no config.json (nothing to resume)")
        saved = read_json(out / rr.WMIL_CONFIG_FILE)
        if saved != cfg.to_dict():
            diff = sorted(k for k in saved if saved.get(k) != cfg.to_dict().get(k))
            raise LfoError(f"--resume: options differ from the run in {out} ({', '.join(diff)}); resume with the same options")
    elif out.exists() and any(p.name not in _RUN_RECORD for p in out.iterdir()):
        if not force:
            raise LfoError(f"{out} is not empty (use --resume to continue it or --force to overwrite)")
        shutil.rmtree(out)
    out.mkdir(parents=True, exist_ok=True)

    trainer = Trainer(cfg, out, parent=parent)
    log = (lambda *a: None) if quiet else print
    log(trainer.model.summary())
    rows: list[dict] = []
    if resume and (ckpt := latest_checkpoint(out)) is not None:
        trainer.load_checkpoint(ckpt)
        rows = _read_metrics_upto(metrics_path, trainer.step)
        atomic_write_jsonl(metrics_path, rows)
        log(f"resumed from {ckpt} at step {trainer.step}")
    else:
        atomic_write_json(out / rr.WMIL_CONFIG_FILE, cfg.to_dict())
        atomic_write_jsonl(metrics_path, [])
    atomic_write_json(out / rr.RUN_METADATA_FILE, run_metadata(cfg.seed, cfg.to_dict()))

    acc: dict[str, list[float]] = defaultdict(list)
    t0 = time.perf_counter()
    wall_before = rows[-1]["time/wall_s"] if rows else 0.0
    env_steps = sum(r.get("charts/env_steps_delta", 0) for r in rows)
    env_steps_at_t0 = env_steps
    stopped_early = False

    with ProgressLog(f"wmil {cfg.task}", cfg.steps, start=trainer.step, enabled=progress) as bar:
        while trainer.step < cfg.steps:
            m = trainer.train_step()
            for k, v in m.items():
                acc[k].append(v)
            if trainer.step % cfg.log_every == 0 or trainer.step == cfg.steps:
                row = {rr.STEP: trainer.step, **{k: sum(v) / len(v) for k, v in sorted(acc.items())}}
                # env steps of this window (horizon can change with the curriculum level)
                row["charts/env_steps_delta"] = int(sum(cfg.num_envs * trainer.task.horizon(int(lv)) for lv in acc["charts/level"]))
                env_steps += row["charts/env_steps_delta"]
                row[rr.WMIL_ENV_STEPS] = env_steps
                row["curriculum/level"] = trainer.curriculum.level
                elapsed = time.perf_counter() - t0
                row["time/wall_s"] = wall_before + elapsed
                row["time/env_steps_per_s"] = (env_steps - env_steps_at_t0) / max(elapsed, 1e-9)
                row.update(trainer.parent.stats())
                row = _finite(row)
                append_jsonl(metrics_path, row)
                rows.append(row)
                acc.clear()
                bar.update(trainer.step, note=f"success {row[rr.WMIL_SUCCESS]:.2f} · entropy "
                           f"{row['losses/entropy']:.2f} · level {trainer.env.level}")
                if stop_at_success is not None and row[rr.WMIL_SUCCESS] >= stop_at_success:
                    stopped_early = True
                    break
            if trainer.step % cfg.save_every == 0:
                trainer.save_checkpoint()
    if not stopped_early:
        trainer.save_checkpoint()
    return finish_run(trainer, rows, quiet=quiet, stopped_early=stopped_early)


# What `lfo train` (lfo_cli.train.run.Run) writes into a run dir before the kind's runner starts.
_RUN_RECORD = (rr.RECIPE_FILE, rr.RUN_FILE)


def run_recipe(cfg: WMILConfig, out_dir: str | Path, *, resume: bool = False) -> dict:
    """The ``wmil`` recipe kind's runner (`lfo train --recipe wmil/NAME`): :func:`train`, then the run marked
    complete (a finished run is never modified: resuming it is refused); the figures `lfo wmil train --json` prints."""
    summary = train(cfg, out_dir, resume=resume)
    atomic_write_text(Path(out_dir) / rr.COMPLETE_MARKER, "")
    return brief(summary)


def brief(summary: dict) -> dict:
    """The figures of a finished run's summary that `lfo wmil train --json` and `lfo train --json` print."""
    return {k: summary[k] for k in ("task", "steps", "final", "checks", "eval", "num_parameters")}


def training_checks(rows: list[dict]) -> dict:
    """The design's MVP criteria, computed from the metrics rows."""
    if not rows:
        return {}

    def first_step(threshold: float):
        return next((r[rr.STEP] for r in rows if r[rr.WMIL_SUCCESS] > threshold), None)

    k = max(1, len(rows) // 10)
    first, last = rows[:k], rows[-k:]

    def mean(rs, key):
        vals = [r[key] for r in rs if key in r]
        return sum(vals) / len(vals) if vals else None

    out = {"first_step_success_gt_0.5": first_step(0.5), "first_step_success_gt_0.9": first_step(0.9),
           "entropy_first10": mean(first, "losses/entropy"), "entropy_last10": mean(last, "losses/entropy"),
           "wm_mse_first10": mean(first, "losses/world_model"), "wm_mse_last10": mean(last, "losses/world_model"),
           "success_at_5000": next((r[rr.WMIL_SUCCESS] for r in rows if r[rr.STEP] == 5000), None),
           "final_success": rows[-1][rr.WMIL_SUCCESS], "best_success": max(r[rr.WMIL_SUCCESS] for r in rows)}
    out["entropy_falls"] = out["entropy_last10"] < out["entropy_first10"]
    out["wm_mse_falls"] = out["wm_mse_last10"] < out["wm_mse_first10"]
    return out


def finish_run(trainer: Trainer, rows: list[dict], *, quiet: bool = False, stopped_early: bool = False) -> dict:
    cfg, out = trainer.cfg, trainer.out
    write_training_figures(rows, out)
    evaluation = evaluate_model(trainer.model, trainer.task, episodes=cfg.eval_episodes, seed=cfg.seed)
    atomic_write_json(out / "eval.json", evaluation)
    final = {k: v for k, v in rows[-1].items() if not k.startswith(TIME_KEYS)} if rows else {}
    summary = {
        "task": cfg.task, "algorithm": cfg.algorithm, "parent": cfg.parent, "seed": cfg.seed,
        "steps": trainer.step, "step_definition": "one policy update on num_envs episodes "
        f"({cfg.num_envs} x episode length env steps)", "stopped_early": stopped_early,
        "num_parameters": trainer.model.num_parameters(), "final": final, "checks": training_checks(rows),
        rr.WMIL_EVAL: evaluation, "curriculum_history": trainer.curriculum.history,
        "parent_stats": trainer.parent.stats(),
        "wall_s": rows[-1]["time/wall_s"] if rows else 0.0,
        "run_metadata": run_metadata(cfg.seed, cfg.to_dict()),
    }
    atomic_write_json(out / rr.SUMMARY_FILE, summary)
    if not quiet:
        c = summary["checks"]
        print(f"done: step {trainer.step}, final success {final.get(rr.WMIL_SUCCESS, float('nan')):.3f}, "
              f"eval success {evaluation['overall']['success']:.3f}, entropy {c.get('entropy_first10', 0):.3f}->"
              f"{c.get('entropy_last10', 0):.3f}, WM MSE {c.get('wm_mse_first10', 0):.4f}->{c.get('wm_mse_last10', 0):.4f}; "
              f"wrote {out}")
    return summary


__all__ = ["Trainer", "train", "rollout", "build_model", "load_model_from_run", "latest_checkpoint",
           "DeterministicParent", "training_checks", "TIME_KEYS"]
