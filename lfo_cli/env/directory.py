"""The search tool's deterministic outputs: a company's directory, or "not found" with close names.

Cached per world (in :attr:`~lfo_cli.env.world.WorldData.derived`, which adding companies empties), since
every episode on a world asks for the same directories.
"""

from __future__ import annotations

import difflib

from lfo_cli.env.world import Company, WorldData


def directory(world: WorldData, company: Company) -> tuple[str, str]:
    cache = world.derived.setdefault("directory", {})
    hit = cache.get(company.id)
    if hit is None:
        lines = [f"Directory for {company.name} ({company.industry}):"]
        lines += [f"- {d.name}: {d.phone} ({d.purpose})" for d in company.departments]
        summary = f"Directory for {company.name}: " + "; ".join(f"{d.name} {d.phone}" for d in company.departments)
        hit = cache[company.id] = ("\n".join(lines), summary)
    return hit


def not_found(world: WorldData, raw: str, key: str) -> str:
    cache = world.derived.setdefault("not_found", {})
    matches = cache.get(key)
    if matches is None:
        matches = [world.name_index[k].name for k in close_names(world, key)]
        if len(cache) < 10000:
            cache[key] = matches
    shown = raw.strip().replace('"', "'")
    shown = shown if len(shown) <= 60 else shown[:60] + "..."
    text = f'No company named "{shown}" was found.'
    if matches:
        text += " Did you mean: " + ", ".join(matches) + "?"
    return text


def close_names(world: WorldData, key: str, n: int = 3) -> list[str]:
    """Up to ``n`` normalised names close to ``key``: names sharing a word, ranked by shared words then
    string similarity; if none shares a word (a typo), difflib over all names."""
    index = world.derived.get("name_tokens")
    if index is None:
        index = {}
        for name in world.name_index:
            for tok in set(name.split()):
                index.setdefault(tok, []).append(name)
        world.derived["name_tokens"] = index
    shared: dict[str, int] = {}
    for tok in set(key.split()):
        for name in index.get(tok, ()):
            shared[name] = shared.get(name, 0) + 1
    if not shared:
        return difflib.get_close_matches(key, list(world.name_index), n=n, cutoff=0.75)
    top = sorted(shared, key=lambda k: (-shared[k], k))[:100]
    return sorted(top, key=lambda k: (-shared[k], -difflib.SequenceMatcher(None, key, k).ratio(), k))[:n]
