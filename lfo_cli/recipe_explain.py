"""`lfo train --explain KEY`: a recipe key's type, default and help text, read from the config class itself."""

from __future__ import annotations

import dataclasses

from lfo_cli.errors import LfoError
from lfo_cli.recipes import KINDS, _did_you_mean, _type_name, config_to_dict, type_hints


def explain(kind: str, key: str, resolved: dict | None = None) -> dict:
    """A config field of a recipe kind by its dotted key: its type, default and help text (its
    ``metadata={"help": ...}``); a section (a nested dataclass) lists its fields. A config class documents a
    free-form mapping section by another dataclass in its ``explain_sections`` (grpo's ``trainer``: TRL's
    GRPOConfig through DualLoRAConfig). A world's own keys are those of the world ``resolved`` (a recipe's mapping)
    names, else of the default world. An unknown key is one error naming the closest field."""
    if kind not in KINDS:
        raise LfoError(f"'kind' must be one of {', '.join(sorted(KINDS))}, got {kind!r}")
    cls, default, prefix, f = KINDS[kind].config_class(), None, "", None
    for part in key.split("."):
        if not dataclasses.is_dataclass(cls):
            raise LfoError(f"{prefix} is a {_type_name(cls)}, not a section: '{key}' names nothing")
        hints = {**type_hints(cls), **(cls.section_types(resolved or {}) if hasattr(cls, "section_types") else {})}
        resolved = None  # the top level's alone chooses sections
        fields = {x.name: x for x in dataclasses.fields(cls) if x.init}
        if part not in fields:
            raise LfoError(f"{kind} recipes have no key '{prefix + '.' if prefix else ''}{part}'"
                           + _did_you_mean(cls, hints, part, prefix))
        # a free-form section documented by another dataclass (grpo's `trainer`: TRL's GRPOConfig fields)
        f, cls = fields[part], getattr(cls, "explain_sections", {}).get(part, hints[part])
        prefix = f"{prefix}.{part}" if prefix else part
    default = f.default if f.default is not dataclasses.MISSING else (
        f.default_factory() if f.default_factory is not dataclasses.MISSING else None)
    out = {"kind": kind, "key": key, "type": _type_name(cls), "help": " ".join(str(f.metadata.get("help", "")).split())}
    if dataclasses.is_dataclass(cls):
        out["fields"] = [x.name for x in dataclasses.fields(cls) if x.init]
    else:
        out["default"] = config_to_dict(default)
    return out
