"""Recipes: small YAML deltas over a base (verl style), resolved into typed config dataclasses.

A recipe file ``recipes/NAME.yaml``: ``base: dual_lora_micro`` (optional: the recipe it is a delta over),
``kind: grpo`` (which config dataclass and runner it is for), then sections (``wm: {coef: 1.0}``).

Resolution: follow the ``base`` chain to its root, deep-merge each delta over it (mappings merge, everything else
replaces), apply ``--set a.b=value`` overrides (values parsed as YAML scalars), then build the dataclass registered
for ``kind``. The dataclass defaults are the root defaults (a nested section's are its field's default), so a recipe
only lists what differs. Unknown keys, wrong types and out-of-range values raise :class:`LfoError` with the recipe
name and the dotted key; the CLI prints that one line and exits 2.
"""

from __future__ import annotations

import copy
import dataclasses
import difflib
import functools
import importlib
import re
import types
import typing
from collections.abc import Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Literal, get_args, get_origin

import yaml

from lfo_cli.errors import LfoError

RECIPE_DIR = Path(__file__).resolve().parent.parent / "recipes"

@dataclass(frozen=True)
class Kind:
    """A recipe kind: the config dataclass its recipes resolve into and the runner `lfo train` hands them to,
    each a ``module:attribute`` path imported on first use (training imports TRL; a recipe listing must not).
    A runner is ``run(cfg, out_dir, *, resume=False, **prepared) -> dict``."""

    name: str
    config: str
    runner: str
    description: str = ""
    # Keys added after runs were recorded: the value a recipe that predates one ran with (before rollout_dropout:
    # dropout). A resume keeps it (:func:`fill_added_later`); `lfo report` pools such runs with those stating it.
    added_later: Mapping[str, Any] = field(default_factory=dict)
    steps_key: str | None = None  # how long a run trains, raised to continue a finished run (None: not continued)

    @staticmethod
    def _load(path: str) -> Any:
        module, _, attr = path.partition(":")
        return getattr(importlib.import_module(module), attr)

    def config_class(self) -> type:
        return self._load(self.config)

    def run_function(self) -> Any:
        return self._load(self.runner)


# Every recipe kind, in one place: recipes with ``kind: NAME`` resolve into its config class and run with its runner.
KINDS: dict[str, Kind] = {k.name: k for k in (
    Kind("grpo", "lfo_cli.train.recipe_config:TrainConfig", "lfo_cli.train.runner:run_training",
         "GRPO with the world-model loss (lfo_cli/train)", steps_key="trainer.max_steps",
         added_later={"trainer.rollout_dropout": True, "wm.targets": "world", "wm.tools": None}),
    Kind("warmstart", "lfo_cli.models.warmstart_config:WarmStartConfig", "lfo_cli.models.warmstart:run_warmstart",
         "a warm start: SFT on a world's teacher, then its evaluation (lfo_cli/models)"),
    Kind("wmil", "lfo_cli.wmil.config:WMILConfig", "lfo_cli.wmil.trainer:run_recipe", "WMIL (lfo_cli/wmil)"),
)}


@dataclass
class Recipe:
    name: str
    kind: str
    config: Any  # an instance of the kind's config dataclass
    resolved: dict = field(default_factory=dict)  # the fully merged mapping, as written to the run dir
    chain: list[str] = field(default_factory=list)  # files from root to leaf

    def check(self) -> None:
        """The checks a kind runs beyond its sections' own, where it has some (grpo: TRL's, through a
        machine-independent `DualLoRAConfig`). `lfo train --dry-run` and a grid's cells run them."""
        check = getattr(self.config, "check", None)
        if check is not None:
            check()


def available_recipes(recipe_dir: Path = RECIPE_DIR) -> list[str]:
    return sorted(p.stem for p in recipe_dir.glob("*.yaml"))


def recipe_descriptions(recipe_dir: Path = RECIPE_DIR) -> dict[str, str]:
    """Recipe name -> its file's one-line ``description`` ("" where it has none)."""
    return {name: str(read_yaml_mapping(recipe_dir / f"{name}.yaml").get("description") or "")
            for name in available_recipes(recipe_dir)}


def recipe_path(name: str, recipe_dir: Path = RECIPE_DIR) -> Path:
    """A name (``dual_lora``, ``wmil/key_door_ppo``) resolves in ``recipes/``; a name with a suffix is a path, and
    one with a slash too when such a file exists."""
    path = Path(name)
    if not (name.endswith((".yaml", ".yml")) or ("/" in name and path.is_file())):
        path = recipe_dir / f"{name}.yaml"
    if not path.is_file():
        known = available_recipes(recipe_dir)
        hint = difflib.get_close_matches(name, known, n=1)
        extra = f" (did you mean '{hint[0]}'?)" if hint else f" (known: {', '.join(known) or 'none'})"
        raise LfoError(f"unknown recipe '{name}'{extra}")
    return path


class YamlLoader(getattr(yaml, "CSafeLoader", yaml.SafeLoader)):
    """SafeLoader that also reads `1e-3` as a float: PyYAML follows YAML 1.1, whose floats need a dot
    (`1.0e-3`), so an exponent without one was a string; YAML 1.2, and every researcher, reads a number.
    libyaml's parser where PyYAML has it (its wheels do), which a grid of hundreds of cells, each resolving its
    chain of recipes, notices: with the parse cache below, the shipped grids expand 5.7x faster [95% CI 5.4,
    6.1] than with the pure-Python parser reading every file per cell (benchmarks/grid_expand.py, 5 interleaved
    pairs, 2026-11-29, 2-core CPU beside a training run)."""


YamlLoader.add_implicit_resolver(
    "tag:yaml.org,2002:float", re.compile(r"^[-+]?[0-9][0-9_]*[eE][-+]?[0-9]+$"), list("-+0123456789")
)


# Parsed YAML by its text: a grid resolves each cell's chain of recipes, the same few files hundreds of times;
# reading a file is cheap, parsing it is what costs. Callers get a deep copy, so nothing they change reaches
# the next reader.
_PARSED: dict[str, Any] = {}
_PARSED_MAX = 512  # distinct texts kept (a report reads every run's recipe.yaml once)


def _parse_yaml(path: Path) -> Any:
    text = path.read_text(encoding="utf-8")
    if text not in _PARSED:
        if len(_PARSED) >= _PARSED_MAX:
            _PARSED.clear()
        _PARSED[text] = yaml.load(text, Loader=YamlLoader)
    return copy.deepcopy(_PARSED[text])


@functools.cache
def type_hints(cls: type) -> dict[str, Any]:
    """``typing.get_type_hints(cls)``, resolved once per class (read-only: the same dict for every caller)."""
    return typing.get_type_hints(cls)


def read_yaml_mapping(path: Path, what: str = "recipe", shape: str = "") -> dict:
    """A YAML file that must hold a mapping; malformed or unreadable files raise LfoError naming them."""
    try:
        data = _parse_yaml(Path(path))
    except yaml.YAMLError as exc:
        mark = getattr(exc, "problem_mark", None)
        where = f":{mark.line + 1}" if mark is not None else ""
        raise LfoError(f"{path}{where}: malformed YAML ({getattr(exc, 'problem', None) or exc})") from None
    except (OSError, UnicodeDecodeError) as exc:
        raise LfoError(f"{path}: cannot read {what} ({exc})") from None
    if data is None:
        return {}
    if not isinstance(data, dict):
        raise LfoError(f"{path}: a {what} must be a YAML mapping{shape}, got {type(data).__name__}")
    return data


def read_run_recipe(run_dir: str | Path) -> dict:
    """The resolved recipe a run recorded (``RUN/recipe.yaml``)."""
    path = Path(run_dir) / "recipe.yaml"
    if not path.is_file():
        raise LfoError(f"{run_dir}: not a run directory (no recipe.yaml)")
    return read_yaml_mapping(path)


def deep_merge(base: dict, delta: dict) -> dict:
    out = dict(base)
    for key, value in delta.items():
        if isinstance(value, dict) and isinstance(out.get(key), dict):
            out[key] = deep_merge(out[key], value)
        else:
            out[key] = value
    return out


def resolve_chain(name: str, recipe_dir: Path = RECIPE_DIR) -> tuple[dict, list[str]]:
    chain: list[Path] = []
    path = recipe_path(name, recipe_dir)
    while True:
        if path.resolve() in [p.resolve() for p in chain]:
            raise LfoError(f"{path}: recipe 'base' chain has a cycle")
        chain.append(path)
        data = read_yaml_mapping(path)
        base = data.get("base")
        if base is None:
            break
        if not isinstance(base, str):
            raise LfoError(f"{path}: 'base' must be a recipe name")
        # A base name resolves beside the file naming it, else among lfo's recipes: a recipe file of one's
        # own can be a delta over `warmstart_micro` or `dual_lora_micro`.
        beside = path.parent / f"{base}.yaml"
        path = recipe_path(base, path.parent if "/" not in base and beside.is_file() else recipe_dir)
    merged: dict = {}
    for p in reversed(chain):
        data = read_yaml_mapping(p)
        merged = unset_keys(merged, data.get("unset", []), str(p))
        # `description` documents the file it is in (`lfo train --list`); it is not configuration.
        merged = deep_merge(merged, {k: v for k, v in data.items() if k not in ("base", "description", "unset")})
    return merged, [str(p) for p in reversed(chain)]


def _parent(mapping: dict, dotted: str) -> tuple[dict | None, str]:
    """The mapping that holds a dotted key's last part (None: no such section), and that part."""
    *path, last = dotted.split(".")
    node: Any = mapping
    for part in path:
        node = node.get(part) if isinstance(node, dict) else None
    return (node if isinstance(node, dict) else None), last


def drop_retired(mapping: dict, retired: dict[str, Any]) -> dict:
    """``mapping`` (a recorded recipe) without the dotted keys of ``retired`` that hold their retired value:
    keys a world's recipes once had at the one value they could take, before the world owned its settings
    (:attr:`lfo_cli.worlds.World.retired_keys`)."""
    out = copy.deepcopy(mapping)
    for dotted, value in retired.items():
        node, last = _parent(out, dotted)
        if node is not None and last in node and node[last] == value:
            del node[last]
    return out


def fill_added_later(mapping: dict) -> dict:
    """``mapping`` (a recorded recipe) with each key its kind added later (:attr:`Kind.added_later`) that it lacks
    set to the value its run had then, so a run recorded before a default changed resumes as it ran."""
    out = copy.deepcopy(mapping)
    kind = KINDS.get(str(out.get("kind")))
    for dotted, value in (kind.added_later if kind else {}).items():
        node, last = _parent(out, dotted)
        if node is not None and last not in node:
            node[last] = value
    return out


def unset_keys(merged: dict, keys: Any, where: str) -> dict:
    """``merged`` (what a recipe's base chain set) without the dotted ``keys`` of the recipe's ``unset`` list: a
    delta over a base of another world leaves out the base's settings of that world (``unset: [env.field_credit]``),
    whose own default then holds. A key the base chain does not set is an error (a typo would do nothing)."""
    if not isinstance(keys, list) or not all(isinstance(k, str) for k in keys):
        raise LfoError(f"{where}: 'unset' must be a list of dotted keys (e.g. [env.field_credit]), got {keys!r}")
    out = copy.deepcopy(merged)  # its sections may be the parse cache's own dicts
    for dotted in keys:
        node, last = _parent(out, dotted)
        if node is None or last not in node:
            raise LfoError(f"{where}: unset: its base chain sets no '{dotted}'")
        del node[last]
    return out


def parse_override(text: str) -> tuple[list[str], Any]:
    key, sep, raw = text.partition("=")
    if not sep or not key.strip():
        raise LfoError(f"--set expects KEY=VALUE (e.g. wm.coef=1.0), got '{text}'")
    try:
        value = yaml.load(raw, Loader=YamlLoader) if raw.strip() else ""
    except yaml.YAMLError:
        value = raw
    return key.strip().split("."), value


def apply_overrides(data: dict, overrides: list[str]) -> dict:
    """``data`` with ``--set KEY=VALUE`` overrides applied; ``~KEY`` (Hydra's spelling) removes a key the recipe
    sets, as a recipe's ``unset`` list does (e.g. another world's reward option inherited from a base)."""
    out = deep_merge({}, data)
    for text in overrides:
        if text.startswith("~"):
            out = unset_keys(out, [text[1:].strip()], f"--set {text}")
            continue
        keys, value = parse_override(text)
        node = out
        for k in keys[:-1]:
            nxt = node.get(k)
            if nxt is None:
                nxt = node[k] = {}
            elif not isinstance(nxt, dict):
                raise LfoError(f"--set {text}: '{k}' is not a section")
            node = nxt
        node[keys[-1]] = value
    return out


# ---- building typed configs -------------------------------------------------------------------


def _type_name(tp: Any) -> str:
    return getattr(tp, "__name__", None) or str(tp).replace("typing.", "")


def coerce(value: Any, tp: Any, where: str, default: Any = None) -> Any:
    """Check/convert one value against a type hint; complex hints are passed through unchanged. ``default``:
    a section's default (a dataclass instance), whose values fill the keys the mapping leaves out."""
    origin = get_origin(tp)
    if tp is Any:
        return value
    if origin in (typing.Union, types.UnionType):
        args = get_args(tp)
        if value is None and type(None) in args:
            return None
        errors = []
        for arg in args:
            if arg is type(None):
                continue
            try:
                return coerce(value, arg, where)
            except LfoError as exc:
                errors.append(str(exc))
        raise LfoError(errors[0] if errors else f"{where}: invalid value {value!r}")
    if origin is Literal:
        choices = get_args(tp)
        if value not in choices:
            raise LfoError(f"{where}: must be one of {', '.join(map(repr, choices))}, got {value!r}")
        return value
    if dataclasses.is_dataclass(tp):
        if not isinstance(value, dict):
            raise LfoError(f"{where}: expected a mapping (section), got {value!r}")
        return build_config(tp, value, prefix=where, default=default)
    if tp is bool:
        if not isinstance(value, bool):
            raise LfoError(f"{where}: expected true/false, got {value!r}")
        return value
    if tp is int:
        if isinstance(value, bool) or not isinstance(value, int):
            raise LfoError(f"{where}: expected an integer, got {value!r}")
        return value
    if tp is float:
        if isinstance(value, bool) or not isinstance(value, (int, float)):
            raise LfoError(f"{where}: expected a number, got {value!r}")
        return float(value)
    if tp is str:
        if not isinstance(value, str):
            raise LfoError(f"{where}: expected a string, got {value!r}")
        return value
    if tp is Path:
        if not isinstance(value, str):
            raise LfoError(f"{where}: expected a path string, got {value!r}")
        return Path(value)
    if origin in (list, tuple) or tp in (list, tuple):
        if not isinstance(value, list):
            raise LfoError(f"{where}: expected a list, got {value!r}")
        args = get_args(tp)
        item_tp = args[0] if args else Any
        items = [coerce(v, item_tp, f"{where}[{i}]") for i, v in enumerate(value)]
        return tuple(items) if (origin is tuple or tp is tuple) else items
    if origin is dict or tp is dict:
        if not isinstance(value, dict):
            raise LfoError(f"{where}: expected a mapping, got {value!r}")
        return value
    return value  # enums, callables and other library types: the dataclass itself validates


def build_config(cls: type, data: dict, prefix: str = "", default: Any = None) -> Any:
    """Build dataclass ``cls`` from a nested mapping, rejecting unknown keys and bad types. A nested section
    left partly unset keeps its field's default for the rest (``data.noise: {slip: 0.2}`` keeps the warm
    start's epsilon 0.1, not NoiseConfig's 0); ``default`` is that instance for ``cls`` itself. A config class
    whose sections depend on the recipe (a world's own settings, chosen by ``env.kind``) names them in a
    classmethod ``section_types(data) -> {field: section class}``; those sections are built from their class's
    defaults when the recipe leaves them out."""
    chosen = cls.section_types(data) if hasattr(cls, "section_types") else {}
    hints = {**type_hints(cls), **chosen}
    fields = {f.name: f for f in dataclasses.fields(cls) if f.init}
    kwargs = {}
    for key, value in data.items():
        where = f"{prefix}.{key}" if prefix else str(key)
        if key not in fields:
            hint = _did_you_mean(cls, hints, str(key), prefix)
            if not hint and getattr(cls, "world_settings", False):  # a section a world adds keys to
                hint = (f" (a setting of another world, from a base recipe? leave it out with `unset: [{where}]` in "
                        f"the recipe or --set '~{where}')")
            raise LfoError(f"unknown key '{where}'{hint}")
        f, tp = fields[key], hints.get(key, Any)
        section_default = None
        if dataclasses.is_dataclass(tp) and f.default_factory is not dataclasses.MISSING and key not in chosen:
            section_default = f.default_factory()
        kwargs[key] = coerce(value, tp, where, section_default)
    for key, tp in chosen.items():
        if key not in kwargs:
            kwargs[key] = build_config(tp, {}, prefix=f"{prefix}.{key}" if prefix else key)
    if default is not None:
        kwargs = {name: getattr(default, name) for name in fields if name not in kwargs} | kwargs
    try:
        return cls(**kwargs)
    except (LfoError, ValueError, TypeError) as exc:
        raise LfoError(_at_key(str(exc), cls, prefix)) from None


def _did_you_mean(cls: type, hints: dict, key: str, prefix: str) -> str:
    """A hint for an unknown key: the nested section that has it (``data.epsilon`` -> ``data.noise.epsilon``),
    else a close field name."""
    names = [f.name for f in dataclasses.fields(cls) if f.init]
    for name in names:
        tp = hints.get(name)
        if dataclasses.is_dataclass(tp) and key in {f.name for f in dataclasses.fields(tp) if f.init}:
            return f" (did you mean '{prefix + '.' if prefix else ''}{name}.{key}'?)"
    hint = difflib.get_close_matches(key, names, n=1)
    return f" (did you mean '{hint[0]}'?)" if hint else ""


def _at_key(message: str, cls: type, prefix: str) -> str:
    """A section's own error, said with the recipe key: ``NoiseConfig.epsilon must ...`` (a dataclass that names
    itself, being used outside recipes too) becomes ``data.noise.epsilon must ...``; a message that already
    names its section (``data.max_tasks must ...``) stays; any other gets the section path in front."""
    if not prefix:
        return message
    if message.startswith(f"{cls.__name__}."):
        return f"{prefix}.{message[len(cls.__name__) + 1:]}"
    if re.match(rf"{re.escape(prefix)}[.: ]", message):
        return message
    return f"{prefix}: {message}"


def config_to_dict(cfg: Any) -> Any:
    """A config dataclass as plain YAML-able data (Paths as strings, tuples as lists)."""
    if dataclasses.is_dataclass(cfg):
        return {f.name: config_to_dict(getattr(cfg, f.name)) for f in dataclasses.fields(cfg) if f.init}
    if isinstance(cfg, dict):
        return {k: config_to_dict(v) for k, v in cfg.items()}
    if isinstance(cfg, (list, tuple)):
        return [config_to_dict(v) for v in cfg]
    if isinstance(cfg, Path):
        return str(cfg)
    if hasattr(cfg, "value") and type(cfg).__module__ != "builtins":  # enums
        return cfg.value
    return cfg


def load_recipe(name: str, overrides: list[str] | None = None, recipe_dir: Path = RECIPE_DIR) -> Recipe:
    merged, chain = resolve_chain(name, recipe_dir)
    merged = apply_overrides(merged, list(overrides or []))
    return recipe_from_mapping(merged, name=name, chain=chain)


def recipe_from_mapping(merged: dict, name: str, chain: list[str] | None = None) -> Recipe:
    kind = merged.get("kind")
    if kind not in KINDS:
        raise LfoError(f"recipe '{name}': 'kind' must be one of {', '.join(sorted(KINDS))}, got {kind!r}")
    config_cls = KINDS[kind].config_class()
    body = {k: v for k, v in merged.items() if k != "kind"}
    try:
        cfg = build_config(config_cls, body)
    except LfoError as exc:
        raise LfoError(f"recipe '{name}': {exc}") from None
    resolved = {"kind": kind, **config_to_dict(cfg)}
    return Recipe(name=name, kind=kind, config=cfg, resolved=resolved, chain=list(chain or []))
