"""The model cache is built atomically; the registry works offline."""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import textwrap
import time
from pathlib import Path

import pytest
from typer.testing import CliRunner

from lfo_cli.cli import app
from lfo_cli.errors import LfoError
from lfo_cli.models import cache, registry


def _env(lfo_home: Path) -> dict:
    return {**os.environ, "LFO_HOME": str(lfo_home), "HF_HUB_OFFLINE": "1", "TRANSFORMERS_OFFLINE": "1"}


def _list_here(lfo_home: Path, *extra: str):
    """`lfo models list [--json]` in this process (the one test that checks what a fresh process imports keeps
    its subprocess)."""
    return CliRunner(env={"LFO_HOME": str(lfo_home), "COLUMNS": "200"}).invoke(app, ["models", "list", *extra])


def _wait_for(predicate, timeout: float, what: str) -> None:
    t0 = time.time()
    while not predicate():
        if time.time() - t0 > timeout:
            raise AssertionError(f"timed out waiting for {what}")
        time.sleep(0.05)


def _kill_when(proc: subprocess.Popen, condition, timeout: float, what: str, settle: float = 0.0) -> None:
    """SIGKILL ``proc`` once ``condition()`` holds (``settle`` seconds later), as a crash would."""
    try:
        _wait_for(condition, timeout, what)
        time.sleep(settle)
        os.kill(proc.pid, signal.SIGKILL)
        proc.wait(10)
    finally:
        if proc.poll() is None:
            proc.kill()


def test_killed_build_leaves_nothing_loadable_and_is_swept(tmp_path, monkeypatch):
    """A real process is SIGKILLed after writing half a model; nothing appears at the final path."""
    target = tmp_path / "models" / "m"
    script = textwrap.dedent(
        f"""
        import time
        from pathlib import Path
        from lfo_cli.models import cache
        def build(tmp):
            (tmp / "config.json").write_text("{{}}")
            (tmp / "model.safetensors").write_bytes(b"half")
            Path({str(tmp_path / 'ready')!r}).write_text("1")
            time.sleep(60)
            return {{}}
        cache.build_once(Path({str(target)!r}), build)
        """
    )
    proc = subprocess.Popen([sys.executable, "-c", script])
    _kill_when(proc, lambda: (tmp_path / "ready").exists(), 60, "the builder to write files")
    assert not target.exists()
    leftovers = list(target.parent.glob(".m.*.tmp"))
    assert len(leftovers) == 1 and (leftovers[0] / "model.safetensors").exists()
    assert not cache.is_complete(target)
    # the next build sweeps the dead builder's temp dir and completes
    path = cache.build_once(target, lambda tmp: (tmp / "config.json").write_text("{}") and {"ok": True})
    assert cache.is_complete(path) and (path / "config.json").is_file()
    assert not list(target.parent.glob(".m.*.tmp"))
    # a complete entry is reused, not rebuilt
    assert cache.build_once(target, lambda tmp: pytest.fail("rebuilt a complete entry")) == path


def test_build_failure_leaves_nothing(tmp_path):
    target = tmp_path / "x"

    def boom(tmp):
        (tmp / "config.json").write_text("{}")
        raise RuntimeError("disk full")

    with pytest.raises(RuntimeError):
        cache.build_once(target, boom)
    assert not target.exists() and not list(tmp_path.glob(".x.*.tmp"))


def test_incomplete_entry_in_cache_is_refused(tmp_path, monkeypatch):
    monkeypatch.setenv("LFO_HOME", str(tmp_path))
    bad = cache.models_dir() / "half"
    bad.mkdir(parents=True)
    (bad / "config.json").write_text("{}")
    with pytest.raises(LfoError, match="incomplete cache entry"):
        registry.resolve(str(bad))


def test_models_list_offline_on_a_fresh_cache(tmp_path):
    out = _list_here(tmp_path, "--json")
    assert out.exit_code == 0, out.output
    listed = json.loads(out.stdout)
    rows = {r["name"]: r for r in listed["models"]}
    assert set(rows) == {"micro", "micro_textworld", "smollm2-135m"} and listed["warmstarts"] == []
    assert not any(row["cached"] for row in rows.values())
    assert 1e6 < rows["micro"]["num_parameters"] < 2e7 and 1e6 < rows["micro_textworld"]["num_parameters"] < 2e7
    assert rows["smollm2-135m"]["num_parameters"] == 134_515_008  # read from the GGUF tensor shapes


def test_models_list_with_a_warm_memo_imports_no_torch_and_shows_warm_starts(tmp_path):
    """Both parameter counts are memoised (micro: keyed by its cache key; SmolLM2: by the wheel's recorded
    hash of the GGUF), so a second listing reads markers and memos only; cached warm starts show their SFT
    steps of those planned and whether each is complete."""
    env = _env(tmp_path)
    first = _list_here(tmp_path, "--json")
    assert first.exit_code == 0, first.output
    memo = json.loads((tmp_path / "models" / registry.PARAM_MEMO).read_text())
    assert sorted(k.split("|")[0] for k in memo) == ["micro", "micro_textworld", "smollm2-135m"]
    assert any(k.startswith("smollm2-135m|sha256:") for k in memo)  # the wheel's RECORD hash, not a file hash
    for key, info in (("micro-aaaaaaaaaaaa", {"train/steps": 909, "train/planned_steps": 909, "train/threads": 2}),
                      ("micro-bbbbbbbbbbbb", {"train/steps": 331, "train/stopped_by_budget": True})):
        entry = tmp_path / "warmstart" / key
        (entry / "model").mkdir(parents=True)
        (entry / cache.MARKER).write_text(json.dumps({**info, "recipe": "warmstart_demo", "key": key,
                                                       "total_seconds": 600.0}))
    code = ("import sys\nfrom lfo_cli.cli import main\nsys.argv = ['lfo', 'models', 'list']\n"
            "try:\n    main()\nexcept SystemExit:\n    pass\n"
            "print('torch imported:', 'torch' in sys.modules, 'transformers imported:', 'transformers' in sys.modules)")
    out = subprocess.run([sys.executable, "-c", code], env={**env, "COLUMNS": "200"}, capture_output=True,
                         text=True, timeout=120)
    assert out.returncode == 0, out.stderr
    assert "torch imported: False transformers imported: False" in out.stdout
    rows = [line for line in out.stdout.splitlines() if "micro-aaaaaaaaaaaa" in line or "micro-bbbbbbbbbbbb" in line]
    assert "909/909" in rows[0] and "complete" in rows[0]
    assert "331 (plan not recorded)" in rows[1] and "budget-stopped" in rows[1]
    assert "lfo models build RECIPE --force" in out.stdout
    listed = json.loads(_list_here(tmp_path, "--json").stdout)
    assert [(r["key"], r["state"], r["steps"]) for r in listed["warmstarts"]] == [
        ("micro-aaaaaaaaaaaa", "complete", 909), ("micro-bbbbbbbbbbbb", "budget-stopped", 331)]


def test_models_list_shows_running_and_interrupted_builds_with_their_last_checkpoint(tmp_path):
    """A build's temp dir is listed with the SFT step of its last whole checkpoint: running (its process
    alive) or interrupted (the next build of the recipe continues it)."""
    dead = subprocess.run([sys.executable, "-c", "import os; print(os.getpid())"], capture_output=True, text=True)
    for name, pid in ((".micro-cccccccccccc.ab12cd34.tmp", int(dead.stdout)), (".micro-dddddddddddd.ef56gh78.tmp", os.getpid())):
        tmp = tmp_path / "warmstart" / name
        for step in (200, 300):
            (tmp / "checkpoints" / f"checkpoint-{step}").mkdir(parents=True)
            (tmp / "checkpoints" / f"checkpoint-{step}" / "trainer_state.json").write_text(
                json.dumps({"global_step": step, "max_steps": 900}))
        (tmp / "checkpoints" / "checkpoint-400").mkdir()  # cut while being written: no trainer state
        (tmp / ".lfo_build.pid").write_text(str(pid))
    listed = json.loads(_list_here(tmp_path, "--json").stdout)
    assert [(r["key"], r["state"], r["steps"], r["planned_steps"]) for r in listed["warmstarts"]] == [
        ("micro-cccccccccccc", "interrupted (the next build continues it)", 300, 900),
        ("micro-dddddddddddd", "building", 300, 900)]
    out = _list_here(tmp_path).stdout
    assert "300/900" in out and "lfo models build RECIPE" in out and "--force" not in out


def test_pass_through_local_path_and_unknown_hub_id_offline(tiny_model_dir, monkeypatch):
    model, tok = registry.load_model(str(tiny_model_dir))
    assert model.config.model_type == "qwen3" and tok.padding_side == "left"
    monkeypatch.setenv("HF_HUB_OFFLINE", "1")
    with pytest.raises(LfoError, match="cannot load"):
        registry.load_model("no-such-org/no-such-model-xyz")


def test_models_cli_errors_are_one_line(tmp_path, monkeypatch):
    monkeypatch.setenv("LFO_HOME", str(tmp_path))
    result = CliRunner().invoke(app, ["models", "build", "gpt-17"])
    assert result.exit_code == 2
    assert "unknown embedded model or warm-start recipe 'gpt-17'" in result.output and "Traceback" not in result.output


def test_micro_builds_offline_and_loads(tmp_path, monkeypatch, tiny_specs, tiny_corpus):
    """The micro tier builds from environment text alone (tokenizer + seeded init)."""
    from lfo_cli.models import micro

    TINY_TOKENIZER, TINY_ARCH = tiny_specs
    monkeypatch.setattr(micro, "environment_corpus", lambda spec=None, world=None: iter(tiny_corpus))  # same text, built once
    monkeypatch.setenv("LFO_HOME", str(tmp_path))
    monkeypatch.setenv("HF_HUB_OFFLINE", "1")
    monkeypatch.setattr(micro, "TOKENIZER", TINY_TOKENIZER)
    monkeypatch.setattr(micro, "ARCH", TINY_ARCH)
    model, tok = registry.load_model("micro")
    info = cache.entry_info(micro.cache_path())
    assert info["num_parameters"] == sum(p.numel() for p in model.parameters())
    assert info["vocab_size"] == len(tok) == model.config.vocab_size
    assert info["key"] == micro.cache_path().name  # the entry's own name, not the temporary folder it was built in
    assert tok.chat_template == __import__("trl").chat_template_utils.qwen2_5_chat_template
    rows = {r["name"]: r for r in registry.list_models(count_parameters=False)}
    assert rows["micro"]["cached"] and rows["micro"]["size_bytes"] > 0


@pytest.mark.slow
@pytest.mark.long
def test_smollm2_conversion_is_atomic_under_kill_then_reloads_fast(tmp_path, monkeypatch):
    """Kill the real GGUF -> safetensors conversion mid-way: nothing loads; then convert; a reload is >5x faster."""
    env = _env(tmp_path)
    final = tmp_path / "models" / "smollm2-135m"
    proc = subprocess.Popen([sys.executable, "-m", "lfo_cli", "models", "build", "smollm2-135m"], env=env,
                            stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    _kill_when(proc, lambda: list(final.parent.glob(".smollm2-135m.*.tmp")), 120, "the conversion to start",
               settle=3.0)  # mid-conversion: dequantising / writing
    assert not final.exists()
    listed = _list_here(tmp_path, "--json")
    assert {r["name"]: r["cached"] for r in json.loads(listed.stdout)["models"]}["smollm2-135m"] is False

    # The conversion and the reloads in this process (the one that was killed had a process of its own).
    import trl

    from lfo_cli.models import ensure_model, load_model

    monkeypatch.setenv("LFO_HOME", str(tmp_path))
    t0 = time.perf_counter()
    load_model("smollm2-135m")  # converts
    convert_s = time.perf_counter() - t0
    weights = ensure_model("smollm2-135m") / "model.safetensors"  # cached: returns its path
    converted_at = os.stat(weights).st_mtime_ns
    reloads = []
    for _ in range(2):  # the best of two reloads: other processes share the 2 cores
        t0 = time.perf_counter()
        model, tok = load_model("smollm2-135m")
        reloads.append(time.perf_counter() - t0)
    res = {"reload_s": min(reloads), "convert_s": convert_s, "rewritten": os.stat(weights).st_mtime_ns != converted_at,
           "quantized": bool(getattr(model, "is_quantized", False)),
           "qc": hasattr(model.config, "quantization_config"), "dtype": str(model.dtype),
           "template": tok.chat_template == trl.chat_template_utils.qwen2_5_chat_template,
           "params": sum(p.numel() for p in model.parameters())}
    # A reload reads the cached safetensors instead of converting again: it leaves them untouched and is
    # several times faster than the conversion timed in the same process (a ratio: a busy machine passes).
    assert not res["rewritten"] and res["reload_s"] < res["convert_s"] / 5, res
    assert not res["quantized"] and not res["qc"] and res["dtype"] == "torch.float32" and res["template"]
    assert res["params"] == 134_515_008
    assert not list(final.parent.glob(".smollm2-135m.*.tmp"))
    assert (final / "model.safetensors").is_file()
