"""What the environment says: rep replies (templates x paraphrases x persona) and their parser.

Every observation the environment produces belongs to one *category*:

* phone calls: ``auth_failure``, ``success``, ``routing_violation``, ``unknown_number``;
* ``search_company``: ``directory`` or ``not_found`` (deterministic);
* ``auth_info_form``: ``form`` (a JSON object, deterministic);
* any invalid call of any tool: ``bad_request``.

Surface forms are drawn from the per-episode RNG: a persona (opener/closer style and agent
name) per call, a core template per category, a paraphrase per field name and a list style.
:func:`parse_reply` inverts every surface form back to its meaning (category, fields named,
alternative fields offered, reference codes, departments and phone numbers pointed to), so a
world model's *predicted* reply can be scored semantically against the real one. Templates are
compiled to regexes once at import; for free text that matches no template (a model's guess) the
parser falls back to keyword cues and marks ``template=None``.
"""

from __future__ import annotations

import json
import random
import re
from dataclasses import dataclass

from lfo_cli.env.catalogue import DEPARTMENT_SPECS, FIELDS, REFERENCE_KEY, sort_fields

PHONE_CATEGORIES = ("auth_failure", "success", "routing_violation", "unknown_number", "bad_request")
CATEGORIES = (*PHONE_CATEGORIES, "directory", "not_found", "form")

# Two paraphrases per field. Rendered lists use them; the parser maps each back to its field.
FIELD_PHRASES: dict[str, tuple[str, ...]] = {
    "account_number": ("account number", "full account number"),
    "last_4_ssn": ("last four of your Social Security number", "last 4 digits of your SSN"),
    "date_of_birth": ("date of birth", "birth date"),
    "zip_code": ("ZIP code", "billing ZIP"),
    "pin": ("PIN", "account PIN"),
    "policy_number": ("policy number", "policy ID"),
    "member_id": ("member ID", "member number"),
    "card_last_4": ("last four digits of your card", "card's last 4 digits"),
    "email": ("email address", "email on the account"),
    "phone_on_file": ("phone number on file", "registered phone number"),
    "order_number": ("order number", "order confirmation number"),
    "security_answer": ("security question answer", "answer to your security question"),
    REFERENCE_KEY: ("reference code",),
}
assert set(FIELD_PHRASES) == set(FIELDS) | {REFERENCE_KEY}

# ---- rep personas ------------------------------------------------------------------------------
AGENTS = ("Alex", "Jordan", "Sam", "Priya", "Marco", "Dana", "Kenji", "Fatima", "Luis", "Grace", "Omar", "Tess")
OPENERS = {
    "formal": ("Thank you for calling {company} {dept}, my name is {agent}.",
               "Good day, you've reached {company} {dept}. {agent} speaking."),
    "friendly": ("Hi there, {agent} from {dept} here!", "Hey, thanks for calling {company}! This is {agent}."),
    "terse": ("", "{dept}, {agent}."),
    "chatty": ("Oh hello! {agent} here in {dept} at {company}, lovely to hear from you.",
               "Well hi! You've got {agent} at {company} {dept}, how's your day going?"),
}
CLOSERS = {
    "formal": ("Is there anything else I can help you with today?", ""),
    "friendly": ("Have a great day!", "Happy to help!"),
    "terse": ("",),
    "chatty": ("Take care now, and thanks for your patience!", "Anything else on your mind?"),
}
STYLES = tuple(OPENERS)

# ---- core templates (id -> text). Slots: {fields} {alts} {field} {ref_dept} {service} {ref}
# {here} {target} {phone} {here_company} {target_company} {detail}. ----------------------------
AUTH_CORE = {
    "auth.verify_identity": "Before I can help, I need to verify your identity: please provide your {fields}.",
    "auth.security": "For security purposes, I'll need your {fields}.",
    "auth.still_need": "I wasn't able to verify you yet. I still need your {fields}.",
    "auth.pull_up": "To pull up the account I have to confirm your {fields}.",
    "auth.cannot_go": "Unfortunately I can't go any further without your {fields}.",
    "auth.requires": "I'm sorry, but our verification requires your {fields}.",
    "auth.lets_verify": "Let's get you verified first. I'll need your {fields}.",
    "auth.could_you": "I can't verify you with what I have. Could you give me your {fields}?",
}
AUTH_ALT = {
    "alt.if_not": "If you don't have your {field}, I can accept your {alts} instead.",
    "alt.without": "Without your {field}, we can verify you with your {alts}.",
    "alt.no_field": "No {field}? Your {alts} will work instead.",
    "alt.in_place": "In place of your {field}, you can give me your {alts}.",
}
AUTH_REF_EXTRA = {
    "ref.also_need": "I'll also need the reference code from your call with {ref_dept}.",
    "ref.have_ready": "Please also have the reference code from {ref_dept} ready.",
    "ref.requires": "This request also requires the reference code issued by {ref_dept}.",
}
AUTH_REF_ONLY = {
    "auth_ref.verified_but": "Thanks, you're verified, but I need the reference code from your call with {ref_dept} to continue.",
    "auth_ref.to_proceed": "You're verified. To proceed, please give me the reference code that {ref_dept} issued.",
    "auth_ref.checks_out": "Your identity checks out, but without the {ref_dept} reference code I can't continue.",
    "auth_ref.just_need": "I have you verified; I just need a valid reference code from {ref_dept}.",
}
SUCCESS = {
    "success.all_done": "All done! I've taken care of your request to {service}. Your reference code is {ref}.",
    "success.all_set": "You're all set, I've processed that for you. Reference code: {ref}.",
    "success.great_news": "Great news, that's been completed. Please note reference code {ref}.",
    "success.completed": "I've completed your request to {service}. Keep this reference code: {ref}.",
    "success.done": "Done. Your confirmation reference code is {ref}.",
    "success.records": "That's taken care of. For your records, the reference code is {ref}.",
    "success.processed": "Everything is processed on my end; your reference code is {ref}.",
}
ROUTING_WRONG_DEPT = {
    "route.dept_sorry": "I'm sorry, {here} doesn't handle that. Please call {target} at {phone}.",
    "route.dept_not_here": "That's not something we handle in {here}. You'll want {target} at {phone}.",
    "route.dept_wrong": "You've reached the wrong department for that; {target} can help, and their number is {phone}.",
    "route.dept_cant": "I can't help with that here. {target} handles it at {phone}.",
    "route.dept_point": "We don't handle that request in {here}. Let me point you to {target}: {phone}.",
}
ROUTING_ORDER = {
    "route.order_finish": "Before we can do this, you need to finish the step with {target} first ({phone}).",
    "route.order_through": "That has to go through {target} before I can help. Please call them first at {phone}.",
    "route.order_early": "It's too early for this step: {target} needs to handle your request first, at {phone}.",
    "route.order_until": "I can't process this until {target} completes their part. Reach them at {phone}.",
}
ROUTING_DONE = {
    "route.done_already": "That's already been taken care of. Next, contact {target} at {phone}.",
    "route.done_completed": "We've already completed this part; the next step is with {target} at {phone}.",
    "route.done_handled": "This was handled already. Please continue with {target} at {phone}.",
}
ROUTING_COMPANY = {
    "route.company_no_account": "This is {here_company}, and I don't see an account for you with us. You may be looking for {target_company}.",
    "route.company_reached": "I'm afraid you've reached {here_company}; your account is with {target_company}.",
    "route.company_mistake": "You've called {here_company} by mistake. Please look up {target_company} instead.",
}
UNKNOWN = {
    "unknown.not_in_service": "We're sorry, the number {phone} is not in service.",
    "unknown.cannot_complete": "The number you have dialed, {phone}, cannot be completed as dialed.",
    "unknown.not_assigned": "The number {phone} is not assigned to any customer service line.",
    "unknown.call_failed": "Call failed: {phone} is not a working number.",
    "unknown.disconnected": "No answer at {phone}; the line appears to be disconnected.",
    "unknown.does_not_exist": "The number {phone} does not exist. Please check the number and try again.",
}
BAD_REQUEST = {
    "bad.error": "Error: {detail}",
    "bad.invalid": "Invalid request: {detail}",
    "bad.rejected": "Request rejected: {detail}",
    "bad.tool_error": "Tool error: {detail}",
    "bad.could_not": "Could not process the call: {detail}",
    "bad.bad_request": "Bad request: {detail}",
}
DIRECTORY_HEAD = "Directory for {company} ({industry}):"
NOT_FOUND_HEAD = 'No company named "{query}" was found.'

_JOIN_STYLES = ("and", "oxford", "plus")


def join_phrases(items: list[str], style: str) -> str:
    if len(items) == 1:
        return items[0]
    if style == "plus":
        return " plus ".join(items)
    if len(items) == 2:
        return f"{items[0]} and {items[1]}"
    head = ", ".join(items[:-1])
    return f"{head}, and {items[-1]}" if style == "oxford" else f"{head} and {items[-1]}"


class ReplyWriter:
    """Renders observations from a per-episode ``random.Random``; one instance per episode."""

    __slots__ = ("rng", "company", "dept")

    def __init__(self, rng: random.Random) -> None:
        self.rng = rng

    # -- helpers --
    def _fields(self, fields) -> str:
        rng = self.rng
        phrases = [rng.choice(FIELD_PHRASES[f]) for f in sort_fields(fields)]
        return join_phrases(phrases, rng.choice(_JOIN_STYLES))

    def _wrap(self, core: str, company: str, dept: str) -> str:
        rng = self.rng
        style = rng.choice(STYLES)
        agent = rng.choice(AGENTS)
        opener = rng.choice(OPENERS[style])
        closer = rng.choice(CLOSERS[style])
        parts = []
        if opener:
            parts.append(opener.format(company=company, dept=dept, agent=agent))
        parts.append(core)
        if closer:
            parts.append(closer)
        return " ".join(parts)

    def _pick(self, table: dict[str, str]) -> tuple[str, str]:
        tid = self.rng.choice(tuple(table))
        return tid, table[tid]

    # -- phone replies --
    def auth_failure(self, company: str, dept: str, missing, alternatives: dict, ref_dept: str | None) -> str:
        """``missing`` identity fields (may be empty when only the reference code is missing)."""
        if missing:
            _, core = self._pick(AUTH_CORE)
            text = core.format(fields=self._fields(missing))
            for f in sort_fields(missing):
                alts = alternatives.get(f)
                if alts:
                    _, alt = self._pick(AUTH_ALT)
                    field_phrase = self.rng.choice(FIELD_PHRASES[f])
                    text += " " + alt.format(field=field_phrase, alts=self._fields(alts))
            if ref_dept:
                _, extra = self._pick(AUTH_REF_EXTRA)
                text += " " + extra.format(ref_dept=ref_dept)
        else:
            _, core = self._pick(AUTH_REF_ONLY)
            text = core.format(ref_dept=ref_dept)
        return self._wrap(text, company, dept)

    def success(self, company: str, dept: str, service: str, ref: str) -> str:
        _, core = self._pick(SUCCESS)
        return self._wrap(core.format(service=service, ref=ref), company, dept)

    def routing(self, kind: str, company: str, dept: str, target: str = "", phone: str = "",
                target_company: str = "") -> str:
        table = {"wrong_department": ROUTING_WRONG_DEPT, "out_of_order": ROUTING_ORDER,
                 "already_done": ROUTING_DONE, "wrong_company": ROUTING_COMPANY}[kind]
        _, core = self._pick(table)
        text = core.format(here=dept, target=target, phone=phone, here_company=company, target_company=target_company)
        return self._wrap(text, company, dept)

    def unknown_number(self, phone: str) -> str:
        _, core = self._pick(UNKNOWN)
        return core.format(phone=phone)

    def bad_request(self, detail: str) -> str:
        _, core = self._pick(BAD_REQUEST)
        return core.format(detail=detail)

    def reference_code(self) -> str:
        rng = self.rng
        return "REF-" + "".join(rng.choice("ABCDEFGHJKLMNPQRSTUVWXYZ23456789") for _ in range(6))


# ------------------------------------------------------------------------------------------------
# parsing
# ------------------------------------------------------------------------------------------------
@dataclass(frozen=True)
class ParsedReply:
    """The meaning of one observation, independent of its surface form."""

    category: str | None  # one of CATEGORIES, or None when nothing is recognisable
    fields: frozenset[str] = frozenset()  # fields named as needed (auth_failure) or returned (form)
    alternatives: frozenset[str] = frozenset()  # fields offered as an alternative route
    detail: str | None = None  # routing kind (wrong_department/out_of_order/...) or error detail
    departments: tuple[str, ...] = ()  # departments pointed to (routing) or whose reference is needed
    phones: tuple[str, ...] = ()  # phone numbers mentioned (routing, directory, unknown_number)
    reference_codes: tuple[str, ...] = ()  # codes issued (success)
    unavailable: frozenset[str] = frozenset()  # form: fields the user lacks
    template: str | None = None  # id of the core template that matched; None for free text

    def key(self) -> tuple:
        """What a world model must get right to be *semantically* correct (codes and agent names aside)."""
        return (self.category, self.fields, self.alternatives, self.detail if self.category != "bad_request" else None,
                self.departments)


_DEPT_NAMES = sorted({name for (_, name) in DEPARTMENT_SPECS}, key=len, reverse=True)
_DEPT_RE = "(?:" + "|".join(re.escape(n) for n in _DEPT_NAMES) + ")"
_PHONE_RE = r"\d{3}-\d{3}-\d{4}"
_REF_RE = r"REF-[A-Z0-9]{6}"
_SLOT_RE = {
    "fields": r"(?P<fields>[^.?!]+?)",
    "alts": r"(?P<alts>[^.?!]+?)",
    "field": r"(?P<field>[^.?!,]+?)",
    "ref_dept": rf"(?P<ref_dept>{_DEPT_RE})",
    "service": r"(?P<service>[^.!?]+?)",
    "ref": rf"(?P<ref>{_REF_RE})",
    "here": rf"(?P<here>{_DEPT_RE})",
    "target": rf"(?P<target>{_DEPT_RE})",
    "phone": rf"(?P<phone>{_PHONE_RE}|[^\s,;()]+?)",
    "here_company": r"(?P<here_company>[^;.]+?)",
    "target_company": r"(?P<target_company>[^;]+?)",
    "detail": r"(?P<detail>.*)",
}
_SLOT = re.compile(r"\{(\w+)\}")


def _compile(template: str, anchored: bool = False) -> re.Pattern:
    out, pos = [], 0
    for m in _SLOT.finditer(template):
        out.append(re.escape(template[pos:m.start()]))
        out.append(_SLOT_RE[m.group(1)])
        pos = m.end()
    out.append(re.escape(template[pos:]))
    return re.compile(("^" if anchored else "") + "".join(out), re.DOTALL)


_ROUTING_KIND = {}
for _kind, _table in (("wrong_department", ROUTING_WRONG_DEPT), ("out_of_order", ROUTING_ORDER),
                      ("already_done", ROUTING_DONE), ("wrong_company", ROUTING_COMPANY)):
    for _tid in _table:
        _ROUTING_KIND[_tid] = _kind

_CORE_PATTERNS: list[tuple[str, str, re.Pattern]] = []
for _cat, _table in (("auth_failure", AUTH_CORE), ("auth_failure", AUTH_REF_ONLY), ("success", SUCCESS),
                     ("routing_violation", ROUTING_WRONG_DEPT), ("routing_violation", ROUTING_ORDER),
                     ("routing_violation", ROUTING_DONE), ("routing_violation", ROUTING_COMPANY),
                     ("unknown_number", UNKNOWN)):
    for _tid, _tpl in _table.items():
        _CORE_PATTERNS.append((_cat, _tid, _compile(_tpl)))
_BAD_PATTERNS = [(tid, _compile(t, anchored=True)) for tid, t in BAD_REQUEST.items()]
_ALT_PATTERNS = [(tid, _compile(t)) for tid, t in AUTH_ALT.items()]
_REF_EXTRA_PATTERNS = [(tid, _compile(t)) for tid, t in AUTH_REF_EXTRA.items()]

_PHRASE_LIST = sorted(((p.casefold(), f) for f, ps in FIELD_PHRASES.items() for p in ps), key=lambda x: -len(x[0]))
_PHRASE_RE = re.compile("|".join(re.escape(p) for p, _ in _PHRASE_LIST), re.IGNORECASE)
_PHRASE_TO_FIELD = dict(_PHRASE_LIST)
_FIELD_NAME_RE = re.compile(r"\b(" + "|".join(re.escape(f) for f in (*FIELDS, REFERENCE_KEY)) + r")\b")


def fields_in(text: str) -> frozenset[str]:
    """Fields named in ``text`` (paraphrases or raw field names), longest phrase first."""
    found = {_PHRASE_TO_FIELD[m.group(0).casefold()] for m in _PHRASE_RE.finditer(text)}
    found.update(m.group(1) for m in _FIELD_NAME_RE.finditer(text))
    return frozenset(found)


def _parse_directory(text: str) -> ParsedReply:
    phones = tuple(re.findall(_PHONE_RE, text))
    depts = tuple(m.group(1) for m in re.finditer(r"^- (.+?): " + _PHONE_RE, text, re.MULTILINE))
    return ParsedReply("directory", departments=depts, phones=phones, template="directory")


def parse_directory(text: str) -> dict[str, str]:
    """Department name -> phone number from a ``search_company`` directory observation."""
    return {m.group(1): m.group(2) for m in re.finditer(r"^- (.+?): (" + _PHONE_RE + ")", text, re.MULTILINE)}


def _parse_form(text: str) -> ParsedReply | None:
    try:
        obj = json.loads(text)
    except (json.JSONDecodeError, ValueError):
        return None
    if not isinstance(obj, dict):
        return None
    unavailable = obj.get("unavailable", [])
    invalid = obj.get("invalid_fields", [])
    fields = frozenset(k for k in obj if k not in ("unavailable", "invalid_fields"))
    return ParsedReply(
        "form",
        fields=fields,
        unavailable=frozenset(x for x in unavailable if isinstance(x, str)) if isinstance(unavailable, list) else frozenset(),
        detail=("invalid_fields" if invalid else None),
        template="form",
    )


_CUES = (
    ("unknown_number", re.compile(r"not in service|cannot be completed|not assigned|not a working number|disconnected|does not exist", re.I)),
    ("success", re.compile(r"REF-[A-Z0-9]+|reference code is|all set|taken care of|completed", re.I)),
    ("routing_violation", re.compile(r"wrong department|doesn't handle|don't handle|handles it|first|already|by mistake|looking for", re.I)),
    ("auth_failure", re.compile(r"verif|need your|security|provide|reference code", re.I)),
)


def parse_reply(text: str) -> ParsedReply:
    """Recover the meaning of any observation the environment produces (and a best guess for free text)."""
    if not isinstance(text, str):
        return ParsedReply(None)
    s = text.strip()
    if s.startswith("<|csr|>"):
        s = s[len("<|csr|>"):]
    if s.endswith("<|/csr|>"):
        s = s[: -len("<|/csr|>")]
    s = s.strip()
    if s.startswith("Directory for "):
        return _parse_directory(s)
    if s.startswith("No company named "):
        return ParsedReply("not_found", phones=(), departments=(), template="not_found")
    if s.startswith("{"):
        form = _parse_form(s)
        if form is not None:
            return form
    for tid, pat in _BAD_PATTERNS:
        m = pat.match(s)
        if m:
            return ParsedReply("bad_request", detail=m.group("detail"), template=tid)
    for category, tid, pat in _CORE_PATTERNS:
        m = pat.search(s)
        if not m:
            continue
        g = m.groupdict()
        if category == "unknown_number":
            return ParsedReply(category, phones=(g["phone"],), template=tid)
        if category == "success":
            return ParsedReply(category, reference_codes=(g["ref"],), template=tid)
        if category == "routing_violation":
            kind = _ROUTING_KIND[tid]
            if kind == "wrong_company":
                return ParsedReply(category, detail=kind, template=tid)
            return ParsedReply(category, detail=kind, departments=(g["target"],), phones=(g["phone"],), template=tid)
        # auth_failure: the core names missing fields; alternative and reference sentences follow
        fields = set(fields_in(g["fields"])) if "fields" in g else set()
        alternatives: set[str] = set()
        for _, ap in _ALT_PATTERNS:
            for am in ap.finditer(s, m.end()):
                fields |= fields_in(am.group("field"))
                alternatives |= fields_in(am.group("alts"))
        departments: tuple[str, ...] = ()
        if "ref_dept" in g:
            departments = (g["ref_dept"],)
        else:
            for _, rp in _REF_EXTRA_PATTERNS:
                rm = rp.search(s, m.end())
                if rm:
                    departments = (rm.group("ref_dept"),)
                    break
        if departments:
            fields.add(REFERENCE_KEY)
        return ParsedReply(category, fields=frozenset(fields), alternatives=frozenset(alternatives - fields),
                           departments=departments, template=tid)
    # free text (e.g. a world model's prediction): keyword cues
    for category, cue in _CUES:
        if cue.search(s):
            return ParsedReply(
                category,
                fields=fields_in(s) if category == "auth_failure" else frozenset(),
                reference_codes=tuple(re.findall(_REF_RE, s)),
                phones=tuple(re.findall(_PHONE_RE, s)),
                template=None,
            )
    return ParsedReply(None)
