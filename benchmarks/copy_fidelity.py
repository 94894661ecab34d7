"""Does a warm-started model copy values from its context, or recall them? Teacher-forced log-probs by token class.

Plays the reference ``prior`` policy (no noise) on the first ``--tasks`` tasks of each split, renders
each trajectory with the model's own chat template, and scores every assistant token under the model
(one forward per trajectory, no sampling). Tokens of ``make_phone_call`` turns are split into classes:

- ``number_first``: the first token of the phone number -- which department to call (a decision);
- ``number_rest``: the rest of it -- a copy from the directory the search returned;
- ``auth/key``: the field names sent -- which authentication to present (a decision);
- ``auth/value_first`` and ``auth/value_rest``: the values -- copies of what the form returned;
- ``call/structure``: everything else in the call (JSON punctuation, markup, end of turn);

and the other turns are ``search``, ``form`` and ``final``. For each class it prints the number of
tokens, the mean negative log-likelihood (nats per token), the share of tokens with probability < 0.5,
and for phone-call turns the mean probability of producing the whole turn exactly. Comparing
``train`` (the customers the warm start imitated on) with ``val`` (same companies, new customers)
separates recall from copying: a model that recalls values has a low ``auth/value_rest`` NLL on train
and a high one on val.

    python benchmarks/copy_fidelity.py runs/ws_micro/model
    python benchmarks/copy_fidelity.py A/model B/model --splits val --tasks 100 --json
"""

from __future__ import annotations

import argparse
import json
import math
import re

CLASSES = ("search", "form", "number_first", "number_rest", "auth/key", "auth/value_first", "auth/value_rest",
           "call/structure", "final")
_PAIR = re.compile(r'"(\w+)": "([^"]*)"')


def phone_call_spans(text: str) -> list[tuple[int, int, str]]:
    """Character spans ``(start, end, class)`` of the phone number, auth keys and auth values in ``text``."""
    spans: list[tuple[int, int, str]] = []
    m = re.search(r'"phone_number": "([^"]*)"', text)
    if m:
        spans.append((m.start(1), m.end(1), "number"))
    at = text.find('"auth_info"')
    if at >= 0:
        for p in _PAIR.finditer(text, at):
            spans.append((p.start(1), p.end(1), "auth/key"))
            spans.append((p.start(2), p.end(2), "auth/value"))
    return spans


def token_classes(pieces: list[str]) -> tuple[str, list[str]]:
    """The turn's kind and one class per token (``pieces``: the decoded tokens of one assistant turn)."""
    text = "".join(pieces)
    if "make_phone_call" not in text:
        kind = "search" if "search_company" in text else "form" if "auth_info_form" in text else "final"
        return kind, [kind] * len(pieces)
    spans = phone_call_spans(text)
    out, pos, started = [], 0, set()
    for piece in pieces:
        cls = "call/structure"
        for a, b, name in spans:
            if pos < b and a < pos + len(piece):  # overlaps: a key token carries its quotes, e.g. '"pin": "'
                if name == "auth/key":
                    cls = name
                else:
                    cls = f"{name}_{'rest' if (a, b) in started else 'first'}"
                    started.add((a, b))
                break
        out.append(cls)
        pos += len(piece)
    return "phone", out


def score(model, tokenizer, trajectories: list[dict], tools: list[dict]) -> dict:
    import torch
    import torch.nn.functional as F

    from lfo_cli.models.sft_data import assistant_spans, tokenize_trajectories

    rows, _ = tokenize_trajectories(tokenizer, trajectories, tools, max_length=10**9)  # the SFT tokenization
    nll: dict[str, list[float]] = {c: [] for c in CLASSES}
    exact_phone: list[float] = []
    for r in rows:
        ids = torch.tensor(r["input_ids"])
        with torch.no_grad():
            logits = model(ids[None]).logits[0, :-1].float()
        token_nll = [0.0, *F.cross_entropy(logits, ids[1:], reduction="none").tolist()]  # token_nll[t]: token t
        for i, j in assistant_spans(r["assistant_masks"]):
            kind, classes = token_classes([tokenizer.decode([t]) for t in r["input_ids"][i:j]])
            for cls, x in zip(classes, token_nll[i:j], strict=True):
                nll[cls].append(x)
            if kind == "phone":
                exact_phone.append(math.exp(-sum(token_nll[i:j])))
    row: dict = {}
    for cls, xs in nll.items():
        if xs:
            row[f"{cls}/tokens"] = len(xs)
            row[f"{cls}/nll"] = round(sum(xs) / len(xs), 4)
            row[f"{cls}/p_below_half"] = round(sum(x > math.log(2) for x in xs) / len(xs), 4)
    row["phone_turns"] = len(exact_phone)
    row["phone_turn_exact_p"] = round(sum(exact_phone) / max(len(exact_phone), 1), 4)
    return row


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("models", nargs="+", help="model directories (a warm start's model/)")
    parser.add_argument("--data-dir", default="data")
    parser.add_argument("--splits", nargs="+", default=["train", "val"], choices=["train", "val", "transfer"])
    parser.add_argument("--tasks", type=int, default=100, help="tasks per split (the first N)")
    parser.add_argument("--seed", type=int, default=1, help="rollout seed of the reference policy")
    parser.add_argument("--json", action="store_true")
    a = parser.parse_args()

    import torch

    from lfo_cli.env import load_world
    from lfo_cli.env.plugin import CustomerServiceWorld
    from lfo_cli.env.trl_env import CustomerServiceEnv
    from lfo_cli.models import prompts
    from lfo_cli.models.registry import load_model
    from lfo_cli.models.trajectories import collect_trajectories

    torch.manual_seed(a.seed)
    world = load_world(a.data_dir)
    tools = prompts.tool_schemas(CustomerServiceEnv)
    trajs = {s: collect_trajectories(CustomerServiceWorld(world), list(world.tasks.get(s, []))[: a.tasks], policy="prior", seed=a.seed)
             for s in a.splits}
    rows = []
    for path in a.models:
        model, tokenizer = load_model(path)
        model.eval()
        for split in a.splits:
            rows.append({"model": path, "split": split, **score(model, tokenizer, trajs[split], tools)})
    if a.json:
        print(json.dumps(rows, indent=2))
        return
    from rich.console import Console
    from rich.table import Table

    table = Table(title="teacher-forced NLL per token (nats) by class; in brackets: share of tokens with p < 0.5")
    table.add_column("model")
    table.add_column("split")
    shown = [c for c in CLASSES if any(f"{c}/nll" in r for r in rows)]
    for c in shown:
        table.add_column(c, justify="right")
    table.add_column("P(phone turn exact)", justify="right")
    for r in rows:
        table.add_row(r["model"], r["split"],
                      *[f"{r[f'{c}/nll']:.3f} [{r[f'{c}/p_below_half']:.2f}]" if f"{c}/nll" in r else "-" for c in shown],
                      f"{r['phone_turn_exact_p']:.3f} (n={r['phone_turns']})")
    Console(width=250).print(table)


if __name__ == "__main__":
    main()
