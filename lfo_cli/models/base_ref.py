"""Where a run's base model lives, recorded so that the run dir still loads after it moves.

A run's adapters name their base by the absolute path it had when the run trained (PEFT's
``base_model_name_or_path``), usually a warm start under ``$LFO_HOME``. Copied to another machine, or
with ``$LFO_HOME`` elsewhere, that path is gone. So a run also records a portable reference
(``run.json`` / ``summary.json`` key ``base_model_ref``):

* ``{"lfo_home": "warmstart/micro-<key>/model", "warmstart": "<recipe>"}`` for a model under ``$LFO_HOME``,
  resolved against the ``$LFO_HOME`` of the machine that loads it (rebuilt by ``lfo train --recipe
  <recipe>`` when missing: the cache key makes it the same model);
* ``{"name": "<registry name or hub id>"}`` otherwise (`load_model` resolves names itself);
* ``{"path": "<absolute path>"}`` for a local directory outside ``$LFO_HOME`` (not portable; said so).
"""

from __future__ import annotations

from pathlib import Path

from lfo_cli.errors import LfoError
from lfo_cli.models import cache


def portable_ref(base: str | Path, warmstart: str | None = None, overrides: list[str] | None = None) -> dict:
    """The reference to record for ``base`` (what `load_model` was given): the warm start's recipe and the
    overrides it was built with (the run's seed, for a warm start drawn per seed)."""
    path = Path(base).expanduser()
    if not path.exists():
        return {"name": str(base)}
    home = cache.lfo_home().resolve()
    try:
        rel = path.resolve().relative_to(home)
    except ValueError:
        return {"path": str(path.resolve())}
    ref = {"lfo_home": rel.as_posix()}
    if warmstart:
        ref["warmstart"] = warmstart
        if overrides:
            ref["warmstart_set"] = list(overrides)
    return ref


def resolve_ref(ref: dict, recorded: str | None = None) -> str:
    """What to pass `load_model`: the recorded path when it still exists, else the reference resolved here."""
    if recorded and Path(recorded).exists():
        return recorded
    if "lfo_home" in ref:
        path = cache.lfo_home() / ref["lfo_home"]
        if path.exists():
            return str(path)
        how = (f"`{cache.build_command(ref['warmstart'], overrides=ref.get('warmstart_set'))}` builds it"
               if ref.get("warmstart") else "it is not there")
        raise LfoError(f"the run's base model $LFO_HOME/{ref['lfo_home']} is not on this machine "
                       f"({cache.lfo_home()}): {how}")
    if "name" in ref:
        return ref["name"]
    if "path" in ref:
        raise LfoError(f"the run's base model {ref['path']} is gone (a local directory outside $LFO_HOME is not "
                       "portable: pass the base explicitly)")
    raise LfoError(f"unreadable base model reference {ref!r}")
