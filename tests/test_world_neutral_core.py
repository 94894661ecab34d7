"""lfo's core names no world's concepts: training, warm starts, evaluation, the report and the run record talk to
worlds only through `lfo_cli.worlds.World` and the settings each world declares.

Every Python token of those packages (names, strings, comments) is checked against the customer-service world's
own vocabulary, most of it read from the world itself: its tools, its identity fields, the keys of its recipe
settings and of its teacher's noise, and the words of its story (companies, departments, phones, the rep). A
file that still names them is listed below with the reason; a listed file that no longer does fails too, so the
list only shrinks.
"""

from __future__ import annotations

import dataclasses
import io
import re
import tokenize
from pathlib import Path

from lfo_cli.env import catalogue as cat
from lfo_cli.env.noise import NoiseConfig
from lfo_cli.env.plugin import CustomerServiceWorld
from lfo_cli.models.prompts import tool_methods
from lfo_cli.worlds.noise import TeacherNoise

ROOT = Path(__file__).resolve().parent.parent / "lfo_cli"
CORE = ("train", "models", "report", "eval", "run_record.py")

# file -> why it may still name the customer-service world
ALLOWED = {
    "run_record.py": "it spells every key a run holds once, the customer-service world's measures too (first call, "
                     "auth before call, department order, probes, form specificity): the world and the report both "
                     "read them through it (tests/test_run_record.py)",
    "report/declared.py": "its docstring's example declaration is the reading study's (env.probe_bonus, departments)",
    "models/warmstart_config.py": "train.reply_loss_tools defaults to make_phone_call: cached warm starts' keys hold "
                                  "that default",
    "models/warmstart_cache.py": "the same default, left out of cached warm starts' keys at that value",
    "models/micro.py": "TokenizerSpec.corpus_companies (the customer-service corpus's size) is a field of every micro "
                       "model's cache key",
}


def _vocabulary() -> re.Pattern:
    fields = [f for f in (*cat.FIELDS, cat.REFERENCE_KEY) if "_" in f]  # the unambiguous ones
    tools = [m.__name__ for m in tool_methods(CustomerServiceWorld.tools)]
    settings = [f.name for cls in (CustomerServiceWorld.train_data, CustomerServiceWorld.rewards,
                                   CustomerServiceWorld.teacher_data) for f in dataclasses.fields(cls)
                if f.name != "noise"]
    # (`slip` is also the interface's word for a teacher's turn not to imitate: `info["slipped_steps"]`)
    noise = sorted({f.name for f in dataclasses.fields(NoiseConfig)} - {f.name for f in dataclasses.fields(TeacherNoise)}
                   - {"slip"})
    episode = [f for f in (*CustomerServiceWorld.episode_fields, *CustomerServiceWorld.episode_categories)
               if f != "invalid_tool_calls"]  # what the world records per episode (invalid calls: every world's)
    names = "|".join(re.escape(n) for n in sorted({*fields, *tools, *settings, *noise, *episode}))
    words = r"compan(y|ies)|department|phone|auth_info|auth_before|order_correct|first_call|support agent|the rep\b|rep's"
    return re.compile(rf"\b({names})\b|{words}", re.IGNORECASE)


def _offending_lines(path: Path, pattern: re.Pattern) -> list[int]:
    lines = set()
    for tok in tokenize.generate_tokens(io.StringIO(path.read_text(encoding="utf-8")).readline):
        if tok.type in (tokenize.NAME, tokenize.STRING, tokenize.COMMENT):
            lines.update(tok.start[0] + tok.string[:m.start()].count("\n") for m in pattern.finditer(tok.string))
    return sorted(lines)


def _core_files() -> list[Path]:
    out = []
    for part in CORE:
        target = ROOT / part
        out += [target] if target.is_file() else sorted(target.rglob("*.py"))
    return out


def test_the_core_names_no_worlds_concepts_outside_its_listed_exceptions():
    pattern = _vocabulary()
    found = {str(p.relative_to(ROOT)): _offending_lines(p, pattern) for p in _core_files()}
    found = {k: v for k, v in found.items() if v}
    unlisted = {k: v for k, v in found.items() if k not in ALLOWED}
    assert not unlisted, f"the customer-service world named outside lfo_cli/env: {unlisted} (move it into the world)"
    gone = sorted(set(ALLOWED) - set(found))
    assert not gone, f"no longer name the world: {gone}; remove them from ALLOWED"


def test_the_vocabulary_is_read_from_the_world():
    pattern = _vocabulary()
    for text in ("data.fresh_company_share", "env.probe_bonus", "make_phone_call", "zip_code", "noise.field_extra",
                 "the rep's reply", "Department"):
        assert pattern.search(text), text
    for text in ("data.fresh_tasks", "noise.epsilon", "wm.predict", "reply tokens", "representation"):
        assert not pattern.search(text), text
