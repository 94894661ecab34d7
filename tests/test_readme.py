"""The README stays true to the repository: its layout block and recipe table list exactly what is on disk,
its tables stay short, and every link it makes resolves (file and section)."""

from __future__ import annotations

import re
from pathlib import Path

REPO = Path(__file__).resolve().parent.parent
README = REPO / "README.md"
# Top-level folders that are made locally, never shipped (the .gitignore's); everything else must be in the layout.
LOCAL_DIRS = {"runs", "build", "dist", "tmp", "__pycache__", "data_tw"}  # data_tw: `lfo gen-env --world textworld`


def _readme() -> str:
    return README.read_text()


def _section(title: str) -> str:
    text = _readme()
    start = text.index(f"\n## {title}\n")
    end = text.find("\n## ", start + 1)
    return text[start: end if end != -1 else len(text)]


def _layout() -> dict[str, str]:
    """The layout block as {path: description}: `name/` at column 0 is a top-level folder, indented `name/`
    a folder inside the last top-level one; a line starting with spaces only continues the previous entry."""
    block = re.search(r"```\n(.*?)```", _section("Layout"), re.S).group(1)
    entries: dict[str, str] = {}
    parent = key = None
    for line in block.splitlines():
        m = re.match(r"^( *)(\S+/)(?:\s+(.*))?$", line)
        if m and len(m.group(1)) <= 2:
            name = m.group(2).rstrip("/")
            if m.group(1):
                key = f"{parent}/{name}"
            else:
                key = parent = name
            entries[key] = m.group(3) or ""
        elif line.strip() and key is not None:
            entries[key] += " " + line.strip()
    return entries


def _table(section: str) -> list[list[str]]:
    rows = []
    for line in _section(section).splitlines():
        if line.startswith("|") and not re.match(r"^\|[\s|:-]+\|$", line):
            rows.append([c.strip() for c in line.strip().strip("|").split(" | ")])
    return rows[1:]  # without the header


def _subdirs(path: Path) -> set[str]:
    return {p.name for p in path.iterdir() if p.is_dir() and not p.name.startswith((".", "__"))}


def test_layout_lists_every_top_level_folder_and_nothing_else():
    on_disk = {n for n in _subdirs(REPO) if n not in LOCAL_DIRS and not n.endswith(".egg-info")}
    listed = {k for k in _layout() if "/" not in k}
    assert listed == on_disk, f"README layout: missing {sorted(on_disk - listed)}, stale {sorted(listed - on_disk)}"


def test_layout_lists_every_package_of_lfo_cli():
    packages = {p.parent.name for p in (REPO / "lfo_cli").glob("*/__init__.py")}
    listed = {k.split("/", 1)[1] for k in _layout() if k.startswith("lfo_cli/")}
    assert listed == packages, f"README layout: missing {sorted(packages - listed)}, stale {sorted(listed - packages)}"


def test_layout_lists_every_benchmark_script_and_recipe_folder():
    layout = _layout()
    for folder, pattern in (("benchmarks", r"[\w.]+\.py"), ("scripts", r"[\w.]+\.(?:py|sh)")):
        on_disk = {p.name for p in (REPO / folder).iterdir() if p.is_file() and re.fullmatch(pattern, p.name)}
        listed = set(re.findall(pattern, layout[folder]))
        assert listed == on_disk, f"README layout {folder}/: missing {sorted(on_disk - listed)}, stale {sorted(listed - on_disk)}"
    recipe_dirs = _subdirs(REPO / "recipes")
    listed = set(re.findall(r"(\w+)/", layout["recipes"]))
    assert listed == recipe_dirs, f"README layout recipes/: missing {sorted(recipe_dirs - listed)}, stale {sorted(listed - recipe_dirs)}"


def test_recipe_table_lists_every_recipe_and_nothing_else():
    listed = [name for row in _table("Recipes") for name in re.findall(r"`([\w.-]+)`", row[0])]
    on_disk = {p.stem for p in (REPO / "recipes").glob("*.yaml")}
    assert len(listed) == len(set(listed)), "a recipe is listed twice"
    assert set(listed) == on_disk, f"README recipes: missing {sorted(on_disk - set(listed))}, stale {sorted(set(listed) - on_disk)}"


def test_readme_is_a_front_page():
    text = _readme()
    assert len(text.splitlines()) <= 150
    for line in text.splitlines():
        if line.startswith("|") and not re.match(r"^\|[\s|:-]+\|$", line):
            for cell in line.strip().strip("|").split(" | "):
                assert len(cell.split()) <= 40, f"README table cell over 40 words: {cell[:80]}..."
    results = _table("Results")
    assert 1 <= len(results) <= 10
    assert all(re.search(r"\]\((?!https?:)[^)]+\)", row[-1]) for row in results), "every result links a file"
    assert not re.search(r"(?i)\bstops?[ _-]?\d", text)


def _slug(heading: str) -> str:
    """GitHub's anchor for a heading: lower case, punctuation other than - and _ dropped, spaces to -."""
    return re.sub(r"[^\w\- ]", "", heading.strip().lower()).replace(" ", "-")


def test_every_link_in_the_readme_resolves():
    for target in re.findall(r"\]\(([^)]+)\)", _readme()):
        if target.startswith(("http://", "https://")):
            continue
        path, _, anchor = target.partition("#")
        file = REPO / path
        assert file.exists(), f"README links a missing file: {target}"
        if anchor:
            headings = re.findall(r"^#+ (.+)$", file.read_text(), re.M)
            assert anchor in {_slug(h) for h in headings}, f"README links a missing section: {target}"
