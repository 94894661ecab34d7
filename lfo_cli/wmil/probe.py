"""Representation analysis (the design's phase 6.2): linear probes and t-SNE of the baby's embeddings.

Embeddings are the core's hidden state ``h_t`` at the last step of each episode (the query step of
DelayedRecall, so probing the cue there measures memory). Each named state attribute is probed with
a logistic regression (scikit-learn) on a held-out split, for the trained model and for an untrained
model with the same architecture and seed (the control), next to the majority-class rate.
Outputs in the run dir: ``probe.json``, ``probe.csv``, ``tsne.csv``, ``tsne.png``.
"""

from __future__ import annotations

from pathlib import Path

import torch

from lfo_cli.errors import LfoError
from lfo_cli.io import atomic_write_json, atomic_write_text
from lfo_cli.wmil.envs import VecEnv
from lfo_cli.wmil.model import BabyModel
from lfo_cli.wmil.parents import DeterministicParent
from lfo_cli.wmil.show import print_table
from lfo_cli.wmil.task_base import Task
from lfo_cli.wmil.trainer import build_model, initial_level, load_model_from_run


@torch.no_grad()
def collect_embeddings(model: BabyModel, task: Task, level: int, episodes: int, seed: int):
    """Greedy rollouts; returns ``(h_last (N, H), attributes {name: (N,)}, label (N,))``."""
    gen = torch.Generator().manual_seed(20_000 + seed)
    env = VecEnv(task, DeterministicParent(task), episodes, gen, level)
    obs = [env.reset()]
    for t in range(env.horizon):
        last_state = env.state
        logits, _, _ = model(torch.stack(obs, 1))
        action = logits[:, -1].argmax(-1)
        attrs = task.attributes(last_state, t)
        label = task.oracle_action(last_state, t)
        obs.append(env.step(action).obs)
    h = model.embed(torch.stack(obs[:-1], 1))[:, -1]
    if (label < 0).all():
        label = next(iter(attrs.values()))
    return h, {k: v.clone() for k, v in attrs.items()}, label


def probe_accuracy(x, y, seed: int) -> float | None:
    """Held-out accuracy of a multinomial logistic regression; None when y has one class only."""
    import numpy as np
    from sklearn.linear_model import LogisticRegression
    from sklearn.model_selection import train_test_split
    from sklearn.preprocessing import StandardScaler

    y = np.asarray(y)
    if len(np.unique(y)) < 2:
        return None
    strat = y if np.bincount(y).min() >= 2 else None
    xtr, xte, ytr, yte = train_test_split(x, y, test_size=0.3, random_state=seed, stratify=strat)
    scaler = StandardScaler().fit(xtr)
    clf = LogisticRegression(max_iter=2000).fit(scaler.transform(xtr), ytr)
    return float(clf.score(scaler.transform(xte), yte))


def run_probe(run_dir: Path, samples: int = 1024, seed: int = 0, show: bool = True) -> dict:
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt
    import numpy as np
    import pandas as pd
    from sklearn.manifold import TSNE

    if samples < 20:
        raise LfoError("--samples must be >= 20")
    run_dir = Path(run_dir)
    cfg, model, task = load_model_from_run(run_dir)
    level = initial_level(cfg, task) if not cfg.curriculum else task.num_levels - 1
    torch.manual_seed(cfg.seed)
    untrained = build_model(cfg, task).eval()
    h, attrs, label = collect_embeddings(model, task, level, samples, seed)
    h0, attrs0, _ = collect_embeddings(untrained, task, level, samples, seed)
    rows = []
    for name, y in attrs.items():
        yv = y.numpy()
        if len(np.unique(yv)) < 2:
            continue
        majority = float(np.bincount(yv).max() / len(yv))
        rows.append({"attribute": name, "classes": int(len(np.unique(yv))), "majority": majority,
                     "trained_acc": probe_accuracy(h.numpy(), yv, seed),
                     "untrained_acc": probe_accuracy(h0.numpy(), attrs0[name].numpy(), seed)})
    df = pd.DataFrame(rows)
    atomic_write_text(run_dir / "probe.csv", df.to_csv(index=False))
    n_tsne = min(len(h), 800)
    emb = TSNE(n_components=2, init="pca", random_state=seed, perplexity=min(30, n_tsne // 4)).fit_transform(h[:n_tsne].numpy())
    lab = label[:n_tsne].numpy()
    atomic_write_text(run_dir / "tsne.csv", pd.DataFrame({"x": emb[:, 0], "y": emb[:, 1], "label": lab}).to_csv(index=False))
    fig, ax = plt.subplots(figsize=(5.5, 5))
    sc = ax.scatter(emb[:, 0], emb[:, 1], c=lab, cmap="tab20", s=8)
    ax.set_title(f"t-SNE of embeddings ({cfg.task}, level {level}); colour = correct action")
    fig.colorbar(sc, ax=ax, fraction=0.046)
    fig.tight_layout()
    fig.savefig(run_dir / "tsne.png", dpi=110)
    plt.close(fig)
    result = {"task": cfg.task, "level": level, "samples": samples, "probes": rows,
              "outputs": ["probe.csv", "probe.json", "tsne.csv", "tsne.png"]}
    atomic_write_json(run_dir / "probe.json", result)
    if show:
        fmt = lambda v: "-" if v is None else f"{v:.3f}"  # noqa: E731
        print_table(f"linear probes of h at the last step ({cfg.task}, level {level})",
                    ("attribute", "classes", "majority", "trained", "untrained"),
                    [(r["attribute"], str(r["classes"]), fmt(r["majority"]), fmt(r["trained_acc"]),
                      fmt(r["untrained_acc"])) for r in rows])
        print(f"wrote {run_dir}/probe.csv, probe.json, tsne.csv, tsne.png")
    return result
