"""`lfo gen-env` through Typer's CliRunner: files, refusal, one-line errors, --check outputs."""

from __future__ import annotations

import json

import pytest
from typer.testing import CliRunner

from lfo_cli.cli import app

SMALL = ["--num-companies", "14", "--num-train-tasks", "40", "--num-val-tasks", "10", "--heldout-fraction", "0.3"]


def _run(*args):
    return CliRunner().invoke(app, ["gen-env", *map(str, args)])


@pytest.fixture(scope="module")
def data_dir(tmp_path_factory):
    d = tmp_path_factory.mktemp("world")
    r = _run(*SMALL, "--seed", 13, "--output-dir", d)
    assert r.exit_code == 0, r.output
    return d


def test_writes_world_and_manifest(data_dir):
    names = sorted(p.name for p in data_dir.iterdir())
    assert names == ["companies.jsonl", "manifest.json", "tasks_train.jsonl", "tasks_transfer.jsonl", "tasks_val.jsonl"]
    m = json.loads((data_dir / "manifest.json").read_text())
    assert m["seed"] == 13 and m["generator_version"]
    assert m["counts"] == {"companies": 14, "heldout_companies": 4, "tasks_train": 40, "tasks_val": 10,
                           "tasks_transfer": 10}
    assert set(m["files"]) == {"companies.jsonl", "tasks_train.jsonl", "tasks_val.jsonl", "tasks_transfer.jsonl"}


def test_refuses_to_overwrite_without_force(data_dir):
    before = (data_dir / "companies.jsonl").read_bytes()
    r = _run(*SMALL, "--seed", 99, "--output-dir", data_dir)
    assert r.exit_code == 2
    assert r.output.strip().count("\n") == 0 and "--force" in r.output
    assert (data_dir / "companies.jsonl").read_bytes() == before


def test_force_overwrites(tmp_path):
    assert _run(*SMALL, "--seed", 1, "--output-dir", tmp_path).exit_code == 0
    first = (tmp_path / "tasks_train.jsonl").read_bytes()
    r = _run(*SMALL, "--seed", 2, "--output-dir", tmp_path, "--force", "--json")
    assert r.exit_code == 0 and json.loads(r.output)["seed"] == 2
    assert (tmp_path / "tasks_train.jsonl").read_bytes() != first


@pytest.mark.parametrize(
    "args,needle",
    [
        (["--num-companies", "0"], "num-companies"),
        (["--num-companies", "-3"], "num-companies"),
        (["--num-train-tasks", "-1"], "num-train-tasks"),
        (["--num-val-tasks", "-1"], "num-val-tasks"),
        (["--num-transfer-tasks", "-2"], "num-transfer-tasks"),
        (["--heldout-fraction", "1.5"], "heldout-fraction"),
        (["--heldout-fraction", "-0.5"], "heldout-fraction"),
        (["--exception-rate", "1"], "exception-rate"),
        (["--num-companies", "1", "--heldout-fraction", "0.5"], "holds out no company"),
        (["--heldout-fraction", "0", "--num-transfer-tasks", "5"], "held-out"),
        (["--seed", "-1"], "seed"),
    ],
)
def test_invalid_values_exit_2_with_one_line(tmp_path, args, needle):
    r = _run(*args, "--output-dir", tmp_path / "out")
    assert r.exit_code == 2, r.output
    assert r.output.strip().startswith("error:") and r.output.strip().count("\n") == 0, r.output
    assert needle in r.output
    assert not (tmp_path / "out").exists()


@pytest.mark.parametrize("name", ["companies.jsonl", "tasks_val.jsonl", "tasks_transfer.jsonl", "manifest.json"])
@pytest.mark.parametrize("damage", ["truncate", "corrupt"])
def test_check_reports_corrupt_files_with_exit_2(tmp_path, name, damage):
    d = tmp_path / "w"
    assert _run(*SMALL, "--output-dir", d).exit_code == 0
    p = d / name
    data = p.read_bytes()
    p.write_bytes(data[: len(data) // 2] if damage == "truncate" else data.replace(b"{", b"[", 3))
    r = _run("--check", "--data-dir", d, "--episodes-per-difficulty", 2)
    assert r.exit_code == 2, r.output
    assert name in r.output and r.output.strip().count("\n") == 0 and "Traceback" not in r.output


def test_check_missing_dir(tmp_path):
    r = _run("--check", "--data-dir", tmp_path / "nothing")
    assert r.exit_code == 2 and "nothing" in r.output


def test_check_json_and_report(data_dir, tmp_path):
    rep = tmp_path / "rep"
    r = _run("--check", "--data-dir", data_dir, "--episodes-per-difficulty", 10, "--report-dir", rep, "--json")
    assert r.exit_code == 0, r.output
    doc = json.loads(r.stdout)
    assert all(doc["checks"].values())
    rows = {(x["policy"], x["difficulty"]): x for x in doc["rows"]}
    assert all(rows[("oracle", str(d))]["success_rate"] == 1.0 for d in range(1, 6))
    assert rows[("random", "all")]["success_rate"] < 0.05
    assert rows[("random", "all")]["success_rate"] < rows[("prior", "all")]["success_rate"] < 1.0
    assert rows[("oracle", "all")]["episodes"] == 50
    assert {p.name for p in rep.iterdir()} == {"env_check.csv", "env_check.png", "env_check.json"}
    assert (rep / "env_check.png").read_bytes()[:8] == b"\x89PNG\r\n\x1a\n"
    csv = (rep / "env_check.csv").read_text().splitlines()
    assert csv[0].startswith("policy,difficulty,episodes,success_rate") and len(csv) == 1 + 4 * 6
    meta = json.loads((rep / "env_check.json").read_text())
    assert meta["seed"] == 0 and "versions" in meta and meta["checks"] == doc["checks"]


def test_check_table_output(data_dir):
    r = _run("--check", "--data-dir", data_dir, "--episodes-per-difficulty", 5)
    assert r.exit_code == 0, r.output
    for word in ("Success rate by difficulty", "oracle", "probe", "prior", "random", "PASS"):
        assert word in r.output


def test_gen_env_asks_the_world_and_names_none():
    """No per-world branch: the command imports no world's package and compares no value with a world's kind;
    each built-in world's options come from its `World.generation` dataclass."""
    import ast
    from pathlib import Path

    import lfo_cli.commands.gen_env as command
    from lfo_cli.worlds.registry import BUILTIN

    tree = ast.parse(Path(command.__file__).read_text())
    imported = {n.module for n in ast.walk(tree) if isinstance(n, ast.ImportFrom)}
    assert not {m for m in imported if m and m.startswith(("lfo_cli.env", "lfo_cli.textworld_env"))}, imported
    compared = {c.value for n in ast.walk(tree) if isinstance(n, ast.Compare)
                for c in ast.walk(n) if isinstance(c, ast.Constant)}
    assert not compared & set(BUILTIN)


def test_an_option_of_another_world_or_an_unknown_one_is_one_line(tmp_path):
    r = _run("--games", 3, "--output-dir", tmp_path / "o")
    assert r.exit_code == 2 and r.output.strip().count("\n") == 0 and not (tmp_path / "o").exists()
    assert "--games is an option of the textworld world (--world textworld), not of customer_service" in r.output
    r = _run("--set", "num_compnies=12", "--output-dir", tmp_path / "o")
    assert r.exit_code == 2 and "the customer_service world has no option 'num_compnies' (did you mean " \
                                 "'num_companies'?)" in r.output
    r = _run(*SMALL[2:], "--set", "num_companies=12", "--output-dir", tmp_path / "s", "--json")  # a plugin's way
    assert r.exit_code == 0, r.output
    assert json.loads(r.output)["counts"]["companies"] == 12
