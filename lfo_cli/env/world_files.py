"""A world on disk: companies and tasks as JSONL plus a manifest with sha256 checksums.

``write_world`` / ``load_world`` round-trip a :class:`~lfo_cli.env.world.WorldData`; anything corrupt,
truncated, missing or edited is reported as an :class:`~lfo_cli.errors.LfoError` naming the file.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

from lfo_cli.env import catalogue as cat
from lfo_cli.env.world import DIFFICULTIES, SPLITS, Company, Department, Task, TaskStep, WorldData
from lfo_cli.errors import LfoError
from lfo_cli.io import (
    atomic_write_json,
    atomic_write_text,
    dumps_canonical,
    iter_jsonl,
    read_json,
    sha256_file,
)

GENERATOR_VERSION = "1.0"
TASK_FILES = {"train": "tasks_train.jsonl", "val": "tasks_val.jsonl", "transfer": "tasks_transfer.jsonl"}
COMPANIES_FILE = "companies.jsonl"
MANIFEST_FILE = "manifest.json"
DATA_FILES: tuple[str, ...] = (COMPANIES_FILE, *TASK_FILES.values(), MANIFEST_FILE)


def write_world(world: WorldData, out_dir: str | Path, force: bool = False) -> dict:
    """Write companies/tasks JSONL and the manifest (last), each atomically. Returns the manifest."""
    out = Path(out_dir)
    if world.added_company_ids:
        raise LfoError("this world has companies added for one run (data.fresh_companies); write the world as "
                       "generated or loaded")
    if out.exists() and not out.is_dir():
        raise LfoError(f"{out}: exists and is not a directory")
    existing = [n for n in DATA_FILES if (out / n).exists()]
    if existing and not force:
        raise LfoError(f"{out / existing[0]} already exists; pass --force to overwrite")
    out.mkdir(parents=True, exist_ok=True)
    held = world.heldout_company_ids
    company_rows = [{**c.to_dict(), "heldout": c.id in held} for c in world.companies.values()]
    files = {COMPANIES_FILE: company_rows}
    for split, name in TASK_FILES.items():
        files[name] = [t.to_dict() for t in world.tasks[split]]
    manifest_files = {}
    for name, rows in files.items():
        atomic_write_text(out / name, "".join(dumps_canonical(r) + "\n" for r in rows))
        manifest_files[name] = {"rows": len(rows), "sha256": sha256_file(out / name)}
    manifest = {
        "generator": "lfo_cli.env",
        "generator_version": GENERATOR_VERSION,
        "seed": world.seed,
        "config": world.config,
        "counts": {
            "companies": len(world.companies),
            "heldout_companies": len(held),
            **{f"tasks_{s}": len(world.tasks[s]) for s in SPLITS},
        },
        "files": manifest_files,
    }
    atomic_write_json(out / MANIFEST_FILE, manifest)
    return manifest


def world_fingerprint(data_dir: str | Path) -> str | None:
    """A world's identity: the sha256 (first 12 hex digits) of its manifest, which holds the generator
    version, seed, config and every file's checksum. None when ``data_dir`` holds no manifest."""
    import hashlib

    path = Path(data_dir) / MANIFEST_FILE
    if not path.is_file():
        return None
    return hashlib.sha256(dumps_canonical(read_json(path)).encode()).hexdigest()[:12]


def _req(row: dict, key: str, typ, where: str):
    if key not in row:
        raise LfoError(f"{where}: missing key {key!r}")
    v = row[key]
    if typ is int and isinstance(v, bool) or not isinstance(v, typ):
        raise LfoError(f"{where}: key {key!r} has the wrong type ({type(v).__name__})")
    return v


def _typed(row: dict, where: str, **types) -> dict[str, Any]:
    """The keys ``types`` names, each checked by :func:`_req` in the order given."""
    return {key: _req(row, key, typ, where) for key, typ in types.items()}


def _str_list(v: Any, where: str, key: str) -> tuple[str, ...]:
    if not isinstance(v, list) or not all(isinstance(x, str) for x in v):
        raise LfoError(f"{where}: key {key!r} must be a list of strings")
    return tuple(v)


def _company_from_row(row: dict, where: str) -> tuple[Company, bool]:
    depts = []
    for i, d in enumerate(_req(row, "departments", list, where)):
        w = f"{where} department {i}"
        if not isinstance(d, dict):
            raise LfoError(f"{w}: expected an object")
        alts_raw = _req(d, "alternatives", dict, w)
        requires = _str_list(_req(d, "requires", list, w), w, "requires")
        bad = [f for f in requires if f not in cat.FIELD_SET]
        if bad:
            raise LfoError(f"{w}: unknown field {bad[0]!r}")
        depts.append(Department(**_typed(d, w, name=str, phone=str, purpose=str), requires=requires,
                                alternatives={k: _str_list(v, w, "alternatives") for k, v in alts_raw.items()},
                                exception=_req(d, "exception", bool, w)))
    if not depts:
        raise LfoError(f"{where}: company has no departments")
    c = Company(**_typed(row, where, id=str, name=str, industry=str), departments=tuple(depts))
    if c.industry not in cat.INDUSTRIES:
        raise LfoError(f"{where}: unknown industry {c.industry!r}")
    return c, bool(row.get("heldout", False))


def _task_from_row(row: dict, where: str, split: str, companies: dict[str, Company]) -> Task:
    steps_raw = _req(row, "steps", list, where)
    steps = []
    for s in steps_raw:
        if not isinstance(s, dict):
            raise LfoError(f"{where}: each step must be an object")
        steps.append(TaskStep(**_typed(s, where, department=str, service=str, requires_reference=bool)))
    user = _req(row, "user", dict, where)
    values = _req(user, "values", dict, where)
    if not all(isinstance(k, str) and isinstance(v, str) for k, v in values.items()):
        raise LfoError(f"{where}: user values must map field names to strings")
    t = Task(
        **_typed(row, where, task_id=str, split=str, company_id=str, company_name=str, industry=str,
                 difficulty=int, goal=str),
        steps=tuple(steps),
        user_name=_req(user, "name", str, where),
        user_values=dict(values),
        unavailable=_str_list(_req(row, "unavailable", list, where), where, "unavailable"),
    )
    if t.split != split:
        raise LfoError(f"{where}: task {t.task_id} says split {t.split!r} but is in the {split} file")
    if t.company_id not in companies:
        raise LfoError(f"{where}: task {t.task_id} refers to unknown company {t.company_id!r}")
    if t.difficulty not in DIFFICULTIES or not steps:
        raise LfoError(f"{where}: task {t.task_id} has an invalid difficulty or no steps")
    company = companies[t.company_id]
    for s in steps:
        try:
            company.department(s.department)
        except KeyError:
            raise LfoError(f"{where}: task {t.task_id} uses department {s.department!r} "
                           f"that {company.name} does not have") from None
    return t


def load_world(data_dir: str | Path) -> WorldData:
    """Load and validate a world written by :func:`write_world` (checksums, schema, references)."""
    d = Path(data_dir)
    if not d.is_dir():
        raise LfoError(f"{d}: data directory not found (run `lfo gen-env --output-dir {d}` first)")
    manifest_path = d / MANIFEST_FILE
    manifest = read_json(manifest_path)
    if not isinstance(manifest, dict) or not isinstance(manifest.get("files"), dict):
        raise LfoError(f"{manifest_path}: not an lfo world manifest (no 'files' table)")
    if manifest.get("generator_version") != GENERATOR_VERSION:
        raise LfoError(
            f"{manifest_path}: generator version {manifest.get('generator_version')!r} is not "
            f"{GENERATOR_VERSION!r}; regenerate with `lfo gen-env --force`"
        )
    for name in (COMPANIES_FILE, *TASK_FILES.values()):
        path = d / name
        if not path.is_file():
            raise LfoError(f"{path}: file not found")
        entry = manifest["files"].get(name)
        if not isinstance(entry, dict) or "sha256" not in entry:
            raise LfoError(f"{manifest_path}: no checksum for {name}")
    companies: dict[str, Company] = {}
    heldout = set()
    path = d / COMPANIES_FILE
    for i, row in enumerate(iter_jsonl(path), start=1):
        c, held = _company_from_row(row, f"{path}:{i}")
        if c.id in companies:
            raise LfoError(f"{path}:{i}: duplicate company id {c.id!r}")
        companies[c.id] = c
        if held:
            heldout.add(c.id)

    def verify(path: Path) -> None:
        # After parsing: a parse error names the line; a clean parse of edited or line-truncated data fails here.
        if sha256_file(path) != manifest["files"][path.name]["sha256"]:
            raise LfoError(f"{path}: checksum mismatch with {MANIFEST_FILE} (file modified or truncated)")

    verify(d / COMPANIES_FILE)
    tasks: dict[str, list[Task]] = {}
    for split, name in TASK_FILES.items():
        path = d / name
        tasks[split] = [_task_from_row(r, f"{path}:{i}", split, companies) for i, r in enumerate(iter_jsonl(path), 1)]
        verify(path)
    seed = manifest.get("seed")
    world = WorldData(
        companies=companies,
        tasks=tasks,
        seed=seed if isinstance(seed, int) else 0,
        config=manifest.get("config") if isinstance(manifest.get("config"), dict) else {},
        heldout_company_ids=frozenset(heldout),
    )
    if len(world.task_by_id) != sum(len(v) for v in tasks.values()):
        raise LfoError(f"{d}: duplicate task ids across task files")
    if len(world.phone_index) != sum(len(c.departments) for c in companies.values()):
        raise LfoError(f"{d / COMPANIES_FILE}: phone numbers are not unique")
    return world
