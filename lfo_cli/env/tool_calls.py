"""The three tools' calling convention: names, parameters, argument checks and safe renderings.

:func:`validate_call` checks a call's arguments (types, sizes, required and unexpected names) and raises
:class:`InvalidCall` with the ``bad_request`` detail; :func:`json_safe` and :func:`render_action` give
bounded, JSON-safe copies of arbitrary arguments for logs and world-model inputs.
"""

from __future__ import annotations

import json
from collections.abc import Mapping
from typing import Any

from lfo_cli.env.world import normalize_name

TOOLS: tuple[str, ...] = ("search_company", "auth_info_form", "make_phone_call")
TOOL_PARAMS: dict[str, tuple[str, ...]] = {
    "search_company": ("company_name",),
    "auth_info_form": ("fields",),
    "make_phone_call": ("phone_number", "auth_info"),
}
MAX_NAME_CHARS = 200  # company_name
MAX_FIELDS = 32  # entries in a form or in auth_info
MAX_FIELD_CHARS = 64  # one field name
MAX_VALUE_CHARS = 200  # one auth value
MAX_PHONE_CHARS = 64


class InvalidCall(Exception):
    """An invalid call; the message becomes the bad_request detail."""


def short_repr(x: Any, n: int = 40) -> str:
    """A bounded, safe rendering of arbitrary user input for error messages."""
    if isinstance(x, str):
        return repr(x[:n]) + ("..." if len(x) > n else "")
    try:
        r = repr(x)
    except Exception:  # noqa: BLE001 - user objects with broken __repr__
        r = f"<{type(x).__name__}>"
    return r[:n] + ("..." if len(r) > n else "")


def json_safe(obj: Any, depth: int = 0) -> Any:
    """A JSON-serialisable, size-bounded copy of arbitrary tool arguments (for logs and WM inputs)."""
    if obj is None or isinstance(obj, bool | int):
        return obj
    if isinstance(obj, float):
        return obj if obj == obj and obj not in (float("inf"), float("-inf")) else str(obj)
    if isinstance(obj, str):
        return obj if len(obj) <= MAX_VALUE_CHARS else obj[:MAX_VALUE_CHARS] + "..."
    if depth >= 4:
        return "..."
    if isinstance(obj, Mapping):
        out = {}
        for i, (k, v) in enumerate(obj.items()):
            if i >= MAX_FIELDS:
                out["..."] = "..."
                break
            key = k if isinstance(k, str) else short_repr(k)
            out[key[:MAX_FIELD_CHARS]] = json_safe(v, depth + 1)
        return out
    if isinstance(obj, list | tuple | set | frozenset):
        items = list(obj)[: MAX_FIELDS + 1] if not isinstance(obj, set | frozenset) else sorted(map(short_repr, obj))[:MAX_FIELDS + 1]
        out_l = [json_safe(v, depth + 1) for v in items[:MAX_FIELDS]]
        if len(items) > MAX_FIELDS:
            out_l.append("...")
        return out_l
    return short_repr(obj, 80)


def render_action(tool: str, args: Any) -> str:
    """``search_company("Acme Bank")`` style, as in the design's Previous Actions list."""
    if isinstance(args, dict) and tool in TOOL_PARAMS and set(args) == set(TOOL_PARAMS[tool]):
        inner = ", ".join(json.dumps(args[p], ensure_ascii=False) for p in TOOL_PARAMS[tool])
    else:
        inner = json.dumps(args, ensure_ascii=False)
    return f"{tool}({inner})"


def validate_call(tool_name: Any, args: Any) -> tuple[str, dict]:
    """The tool name and its cleaned arguments; raises :class:`InvalidCall` when the call is malformed."""
    if not isinstance(tool_name, str) or tool_name not in TOOL_PARAMS:
        raise InvalidCall(f"unknown tool {short_repr(tool_name)}; the tools are search_company, auth_info_form "
                          "and make_phone_call")
    params = TOOL_PARAMS[tool_name]
    if args is None:
        args = {}
    if not isinstance(args, Mapping):
        raise InvalidCall(f"{tool_name} takes named arguments ({', '.join(params)}), got {type(args).__name__}")
    for k in args:
        if k not in params:
            raise InvalidCall(f"{tool_name} got an unexpected argument {short_repr(k)}")
    for p in params:
        if p not in args:
            raise InvalidCall(f"{tool_name} is missing the required argument '{p}'")
    if tool_name == "search_company":
        name = args["company_name"]
        if not isinstance(name, str):
            raise InvalidCall("'company_name' must be a string")
        if len(name) > MAX_NAME_CHARS:
            raise InvalidCall(f"'company_name' is too long (max {MAX_NAME_CHARS} characters)")
        if not normalize_name(name):
            raise InvalidCall("'company_name' is empty")
        return tool_name, {"company_name": name}
    if tool_name == "auth_info_form":
        fields = args["fields"]
        if not isinstance(fields, list | tuple) or not all(isinstance(f, str) for f in fields):
            raise InvalidCall("'fields' must be a list of field names (strings)")
        if not fields:
            raise InvalidCall("'fields' must list at least one field name")
        if len(fields) > MAX_FIELDS:
            raise InvalidCall(f"'fields' lists too many names (max {MAX_FIELDS})")
        if any(len(f) > MAX_FIELD_CHARS for f in fields):
            raise InvalidCall(f"a field name is too long (max {MAX_FIELD_CHARS} characters)")
        return tool_name, {"fields": list(fields)}
    phone, auth = args["phone_number"], args["auth_info"]
    if not isinstance(phone, str):
        raise InvalidCall("'phone_number' must be a string such as \"800-555-0100\"")
    if len(phone) > MAX_PHONE_CHARS:
        raise InvalidCall(f"'phone_number' is too long (max {MAX_PHONE_CHARS} characters)")
    if not isinstance(auth, Mapping):
        raise InvalidCall("'auth_info' must be an object mapping field names to values")
    if len(auth) > MAX_FIELDS:
        raise InvalidCall(f"'auth_info' has too many entries (max {MAX_FIELDS})")
    clean: dict[str, str | None] = {}
    for k, v in auth.items():
        if not isinstance(k, str) or len(k) > MAX_FIELD_CHARS:
            raise InvalidCall("'auth_info' keys must be field names (short strings)")
        if v is None:
            clean[k] = None
        elif isinstance(v, str):
            if len(v) > MAX_VALUE_CHARS:
                raise InvalidCall(f"the value for {short_repr(k)} is too long (max {MAX_VALUE_CHARS} characters)")
            clean[k] = v
        elif isinstance(v, int) and not isinstance(v, bool):
            clean[k] = str(v)
        else:
            raise InvalidCall(f"the value for {short_repr(k)} must be a string, got {type(v).__name__}")
    return tool_name, {"phone_number": phone, "auth_info": clean}
