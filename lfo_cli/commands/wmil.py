"""`lfo wmil`: a from-scratch baby model learns from a parent environment (issue #3).

Heavy imports (torch, pandas, matplotlib, scikit-learn) happen inside the command bodies so that
`lfo --help` stays fast.
"""

from __future__ import annotations

from pathlib import Path
from typing import Annotated

import typer

from lfo_cli import run_record as rr
from lfo_cli.commands._common import JsonOpt, handle_errors, print_json
from lfo_cli.errors import LfoError
from lfo_cli.io import read_json
from lfo_cli.recipes import read_yaml_mapping

app = typer.Typer(
    help=(
        "WMIL: a from-scratch baby model learning from a parent environment, with a world-model head.\n\n"
        "A training step is one policy update on --num-envs episodes rolled out together.\n\n"
        "Examples:\n\n"
        "  lfo wmil train --task pattern_echo --steps 10000 --seed 0 --out runs/wmil_echo\n\n"
        "  lfo wmil eval runs/wmil_echo\n\n"
        "  lfo wmil ablate --task sequence_next --seeds 6 --out runs/wmil_ablate_seq\n\n"
        "  lfo wmil probe runs/wmil_echo"
    ),
    no_args_is_help=True,
)

# ---- options shared by train and ablate (None = take the recipe / dataclass default) ----------
TaskOpt = Annotated[str | None, typer.Option("--task", help="pattern_echo, sequence_next, conditional, delayed_recall, key_door.")]
ActionsOpt = Annotated[int | None, typer.Option("--num-actions", help="Action symbols (>= 2; default 8).")]
HiddenOpt = Annotated[int | None, typer.Option("--hidden-dim", help="Transformer width (default 64).")]
LayersOpt = Annotated[int | None, typer.Option("--num-layers", help="Transformer blocks (default 2).")]
HeadsOpt = Annotated[int | None, typer.Option("--num-heads", help="Attention heads (default 4).")]
AlgoOpt = Annotated[str | None, typer.Option("--algorithm", help="reinforce (default) or ppo.")]
ParentOpt = Annotated[str | None, typer.Option("--parent", help="deterministic (default) or llm.")]
ParentUrlOpt = Annotated[str | None, typer.Option("--parent-url", help="OpenAI-compatible endpoint for --parent llm (else the local SmolLM2).")]
ParentModelOpt = Annotated[str | None, typer.Option("--parent-model", help="Model name for the endpoint / local model id.")]
ParentKeyOpt = Annotated[str | None, typer.Option(
    "--parent-api-key-env", help="Environment variable with the bearer token for --parent-url (default OPENAI_API_KEY; "
    "the key itself is never written anywhere).")]
StepsOpt = Annotated[int | None, typer.Option("--steps", help="Training steps = policy updates (default 10000).")]
EnvsOpt = Annotated[int | None, typer.Option("--num-envs", help="Episodes per training step (default 64).")]
LrOpt = Annotated[float | None, typer.Option("--lr", help="Adam learning rate (default 1e-3).")]
WmOpt = Annotated[float | None, typer.Option("--wm-coef", help="World-model loss weight; 0 = RL-only (default 1.0).")]
EntOpt = Annotated[float | None, typer.Option("--entropy-coef", help="Entropy bonus (default 0.01).")]
KlOpt = Annotated[float | None, typer.Option("--kl-coef", help="KL(parent||baby) weight; > 0 = KL-distill baseline.")]
LevelOpt = Annotated[int | None, typer.Option("--level", help="Fixed difficulty level (default: hardest; 0 with --curriculum).")]
CurrOpt = Annotated[bool | None, typer.Option("--curriculum/--no-curriculum", help="Advance levels on mastery.")]
CtxOpt = Annotated[int | None, typer.Option("--context-window", help="0 = whole episode (default); 1 = reactive policy.")]
WmTargetOpt = Annotated[str | None, typer.Option("--wm-target", help="raw (default, fix 2) or embedding.")]
ConfigOpt = Annotated[Path | None, typer.Option("--config", help="YAML file of WMILConfig fields (CLI options override it).")]


def _overrides(**kw) -> dict:
    return {k: v for k, v in kw.items() if v is not None}


def _load_yaml(path: Path | None) -> dict:
    """A WMIL config file: the recipes' YAML reader (one-line errors; `1e-3` is a float, as in recipes)."""
    if path is None:
        return {}
    if not path.is_file():
        raise LfoError(f"{path}: config file not found")
    return read_yaml_mapping(path, what="WMIL config", shape=" of WMILConfig fields")


def _parse_weights(text: str | None):
    if text is None:
        return None
    try:
        parts = tuple(float(x) for x in text.split(","))
    except ValueError:
        raise LfoError(f"--reward-weights expects three numbers like 1,0.1,0 (got {text!r})") from None
    if len(parts) != 3:
        raise LfoError(f"--reward-weights expects three numbers goal,pred,cons (got {text!r})")
    return parts


@app.command("train")
@handle_errors
def train_cmd(
    task: TaskOpt = None, num_actions: ActionsOpt = None, hidden_dim: HiddenOpt = None, num_layers: LayersOpt = None,
    num_heads: HeadsOpt = None, algorithm: AlgoOpt = None, parent: ParentOpt = None, parent_url: ParentUrlOpt = None,
    parent_model: ParentModelOpt = None, steps: StepsOpt = None, num_envs: EnvsOpt = None, lr: LrOpt = None,
    wm_coef: WmOpt = None, entropy_coef: EntOpt = None, kl_coef: KlOpt = None, level: LevelOpt = None,
    curriculum: CurrOpt = None, context_window: CtxOpt = None, wm_target: WmTargetOpt = None,
    parent_api_key_env: ParentKeyOpt = None,
    parent_max_retries: Annotated[int | None, typer.Option("--parent-max-retries", help="Retries per invalid LLM reply (default 2).")] = None,
    parent_timeout: Annotated[float | None, typer.Option("--parent-timeout", help="Seconds per LLM request (default 30).")] = None,
    mastery_threshold: Annotated[float | None, typer.Option("--mastery-threshold", help="Curriculum threshold (default 0.8).")] = None,
    curriculum_window: Annotated[int | None, typer.Option("--curriculum-window", help="Curriculum window in episodes (default 100).")] = None,
    reward_weights: Annotated[str | None, typer.Option("--reward-weights", help="goal,pred,cons weights of the policy reward (default 1,0,0).")] = None,
    seed: Annotated[int | None, typer.Option("--seed", help="Seed for every random number generator (default 0).")] = None,
    log_every: Annotated[int | None, typer.Option("--log-every", help="Steps per metrics row (default 50).")] = None,
    save_every: Annotated[int | None, typer.Option("--save-every", help="Steps per checkpoint (default 1000).")] = None,
    eval_episodes: Annotated[int | None, typer.Option("--eval-episodes", help="Final-evaluation episodes per level.")] = None,
    threads: Annotated[int | None, typer.Option("--threads", help="torch CPU threads (default 1).")] = None,
    config: ConfigOpt = None,
    out: Annotated[Path, typer.Option("--out", help="Run directory.")] = Path("runs/wmil"),
    resume: Annotated[bool, typer.Option("--resume", help="Continue the run in --out from its last checkpoint.")] = False,
    force: Annotated[bool, typer.Option("--force", help="Overwrite a non-empty --out.")] = False,
    progress: Annotated[bool, typer.Option("--progress/--no-progress", help="Show the rich progress bar.")] = True,
    json_out: JsonOpt = False,
) -> None:
    """Train a baby model; writes metrics.jsonl/csv, checkpoints, figures, eval.json and summary.json."""
    from lfo_cli.wmil.config import WMILConfig
    from lfo_cli.wmil.trainer import train

    over = _overrides(task=task, num_actions=num_actions, hidden_dim=hidden_dim, num_layers=num_layers,
                      num_heads=num_heads, algorithm=algorithm, parent=parent, parent_url=parent_url,
                      parent_model=parent_model, parent_api_key_env=parent_api_key_env,
                      parent_max_retries=parent_max_retries, parent_timeout=parent_timeout, steps=steps, num_envs=num_envs, lr=lr, wm_coef=wm_coef,
                      entropy_coef=entropy_coef, kl_coef=kl_coef, level=level, curriculum=curriculum,
                      context_window=context_window, wm_target=wm_target, mastery_threshold=mastery_threshold,
                      curriculum_window=curriculum_window, reward_weights=_parse_weights(reward_weights), seed=seed,
                      log_every=log_every, save_every=save_every, eval_episodes=eval_episodes, threads=threads)
    base = _load_yaml(config)
    if resume and (out / rr.WMIL_CONFIG_FILE).is_file():
        base = {**read_json(out / rr.WMIL_CONFIG_FILE), **base}
    cfg = WMILConfig.from_dict({**base, **over})
    summary = train(cfg, out, resume=resume, force=force, progress=progress and not json_out, quiet=json_out)
    if json_out:
        print_json({k: summary[k] for k in ("task", "steps", "final", "checks", "eval", "num_parameters")})


@app.command("eval")
@handle_errors
def eval_cmd(
    run_dir: Annotated[Path, typer.Argument(help="A run directory written by `lfo wmil train`.")],
    episodes: Annotated[int, typer.Option("--episodes", help="Episodes per difficulty level and policy.")] = 1024,
    seed: Annotated[int, typer.Option("--seed", help="Seed of the evaluation episodes.")] = 0,
    json_out: JsonOpt = False,
) -> None:
    """Success, world-model MSE, entropy and per-difficulty success of a run vs the random policy."""
    from lfo_cli.wmil.evaluate import run_eval

    result = run_eval(run_dir, episodes=episodes, seed=seed, show=not json_out)
    if json_out:
        print_json(result)


@app.command("probe")
@handle_errors
def probe_cmd(
    run_dir: Annotated[Path, typer.Argument(help="A run directory written by `lfo wmil train`.")],
    samples: Annotated[int, typer.Option("--samples", help="Episodes whose embeddings are probed.")] = 1024,
    seed: Annotated[int, typer.Option("--seed", help="Seed of the probe episodes and the t-SNE.")] = 0,
    json_out: JsonOpt = False,
) -> None:
    """Linear-probe accuracy of state attributes from embeddings (trained vs untrained) + t-SNE plot."""
    from lfo_cli.wmil.probe import run_probe

    result = run_probe(run_dir, samples=samples, seed=seed, show=not json_out)
    if json_out:
        print_json(result)


@app.command("ablate")
@handle_errors
def ablate_cmd(
    task: TaskOpt = None, num_actions: ActionsOpt = None, hidden_dim: HiddenOpt = None, num_layers: LayersOpt = None,
    algorithm: AlgoOpt = None, steps: StepsOpt = None, num_envs: EnvsOpt = None, lr: LrOpt = None, level: LevelOpt = None,
    seeds: Annotated[int, typer.Option("--seeds", help="Seeds per condition (paired across conditions).")] = 8,
    first_seed: Annotated[int, typer.Option("--first-seed", help="Seeds are first-seed .. first-seed+seeds-1.")] = 0,
    conditions: Annotated[str, typer.Option("--conditions", help="Comma list of wm, no_wm, kl_distill, random, reactive.")] = "wm,no_wm,kl_distill,random",
    config: ConfigOpt = None,
    out: Annotated[Path, typer.Option("--out", help="Study directory (one run dir per condition and seed).")] = Path("runs/wmil_ablate"),
    force: Annotated[bool, typer.Option("--force", help="Recompute runs that already finished.")] = False,
    json_out: JsonOpt = False,
) -> None:
    """WM vs no-WM and the baselines over paired seeds: mean, std, bootstrap 95% CI, paired tests."""
    from lfo_cli.wmil.ablate import run_ablation
    from lfo_cli.wmil.config import WMILConfig

    base = {**_load_yaml(config), **_overrides(task=task, num_actions=num_actions, hidden_dim=hidden_dim,
                                               num_layers=num_layers, algorithm=algorithm, steps=steps,
                                               num_envs=num_envs, lr=lr, level=level)}
    WMILConfig.from_dict(base)  # validate once, before any run starts
    result = run_ablation(base, out, seeds=seeds, first_seed=first_seed,
                          conditions=[c.strip() for c in conditions.split(",") if c.strip()], force=force,
                          show=not json_out)
    if json_out:
        print_json(result)


@app.command("tasks")
@handle_errors
def tasks_cmd(json_out: JsonOpt = False) -> None:
    """List the tasks, their difficulty levels and whether a reactive policy can solve them."""
    from lfo_cli.wmil.envs import describe_tasks

    rows = describe_tasks()
    if json_out:
        print_json(rows)
        return
    for r in rows:
        typer.echo(f"{r['task']:15s} levels {r['levels']}  reactive-solvable {str(r['reactive_solvable']):5s}  {r['difficulty']}")
