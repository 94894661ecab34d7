"""Check what `make demo` promises, on a clean clone: its wall time beside the machine's speed, how many lines it
prints, whether its training run had a learning signal, and whether its final line reports a gain.

    python scripts/check_demo.py run                      # clone HEAD, new venv, empty LFO_HOME: make install + make demo
    python scripts/check_demo.py run --seed 11            # the demo's training at another seed
    python scripts/check_demo.py run --loaded             # with one CPU-bound process beside it (a busy laptop)
    python scripts/check_demo.py run --loaded --external-load  # the loaded bound, beside a job already running
    python scripts/check_demo.py run --venv .venv         # reuse a venv: the time then excludes building it
    python scripts/check_demo.py check LOG RUN_DIR        # only read a captured output and a training run
    python scripts/check_demo.py reference                # only the machine's speed

`run` clones this checkout's HEAD into a temporary directory and times `make install` (the venv: pip's download
cache, if any, is used as on any machine) and `make demo` there with an empty LFO_HOME. First it times a fixed
micro-benchmark (:func:`machine_reference`: small matmuls and a Python loop, like the demo's generation), so a
wall time reads on any machine: the demo's time scales roughly with it. It prints, and with `--json` writes:

- wall time, venv included (bound: 10 min; 20 min with `--loaded`, one CPU-bound process beside it the whole
  time: the recipe's steps, not a clock, end the run, so a loaded machine takes longer and trains the same model);
- the machine reference in seconds (lower is faster);
- lines `make demo` prints once the venv exists, counting a progress bar that redraws itself with carriage returns
  as one line (bound: 120);
- training steps with reward variance (`frac_reward_zero_std` < 1: GRPO's only source of policy gradient; bound:
  most steps) and with a policy-adapter gradient (`grad_norm/policy` > 0);
- the demo's final line: a gain over the run's own start whose 95% interval lies above 0.

Exit status 0 when every bound holds, 1 when one does not, 2 on bad input.
"""

from __future__ import annotations

import argparse
import json
import os
import re
import subprocess
import sys
import tempfile
import time
from pathlib import Path

from lfo_cli.errors import LfoError

MAX_MINUTES = 10.0
MAX_MINUTES_LOADED = 20.0  # beside one CPU-bound process on 2 cores: each of the demo's 2 threads gets ~2/3 of a core
MAX_LINES = 120
ANSI = re.compile(r"\x1b\[[0-9;?]*[A-Za-z]")
GAIN = re.compile(r"better than at step 0 by (?P<diff>[\d.]+) points \[95% CI (?P<low>[+-][\d.]+), (?P<high>[+-][\d.]+)\]")

# The fixed workload of the machine reference: what one demo training step spends its time on, in miniature
# (batch-32 matmuls of the micro model's width, one at a time as in token-by-token generation, and Python between).
# One torch thread: a core's speed, which another process's load does not distort (two threads that must meet after
# every small matmul stall when one of them waits for a core: 15x slower beside one CPU-bound process).
REFERENCE_CODE = """
import sys, time, torch
torch.set_num_threads(1)
torch.manual_seed(0)
x0, w1, w2 = torch.randn(32, 256), torch.randn(256, 1024) / 16, torch.randn(1024, 256) / 32
best = float("inf")
for _ in range(int(sys.argv[1])):  # the fastest of three: what the machine can do, less what else ran then
    t, x = time.perf_counter(), x0
    with torch.no_grad():
        for _ in range(2000):
            x = torch.tanh(torch.relu(x @ w1) @ w2)
    s = 0
    for i in range(3_000_000):
        s += i % 7
    best = min(best, time.perf_counter() - t)
print(round(best, 2))
"""


def machine_reference(python: str = sys.executable, runs: int = 3) -> float:
    """Seconds for :data:`REFERENCE_CODE` (the fastest of ``runs`` runs) in a fresh process of ``python``."""
    done = subprocess.run([python, "-c", REFERENCE_CODE, str(runs)], capture_output=True, text=True, check=True)
    return float(done.stdout.strip().splitlines()[-1])


def printed_lines(text: str) -> int:
    """Lines a reader sees scroll by: a line rewritten in place with carriage returns (a progress bar's
    redraws) counts once; cursor-control escape sequences are ignored; a trailing newline adds no line."""
    lines = ANSI.sub("", text).split("\n")
    if lines and lines[-1] == "":
        lines.pop()
    return len(lines)


def final_gain(text: str) -> dict | None:
    """The gain the output's last non-empty line reports ("... better than at step 0 by X points [95% CI +a, +b]"),
    in points; None when the last line reports none."""
    lines = [line for line in ANSI.sub("", text).replace("\r", "\n").split("\n") if line.strip()]
    match = GAIN.search(lines[-1]) if lines else None
    return {k: float(v) for k, v in match.groupdict().items()} if match else None


def training_signal(run_dir: Path) -> dict:
    """Per training step of RUN_DIR's metrics.jsonl: reward variance and a policy-adapter gradient (read the
    way `lfo report` reads them)."""
    from lfo_cli.report.index import learning_signal
    from lfo_cli.report.load import read_run

    steps, variance, gradient = learning_signal(read_run(Path(run_dir)))
    return {"steps": steps, "steps_with_reward_variance": variance, "steps_with_policy_gradient": gradient}


def verdict(minutes: float | None, lines: int, signal: dict, loaded: bool = False, gain: dict | None = None) -> dict:
    n = signal["steps"]
    bound = MAX_MINUTES_LOADED if loaded else MAX_MINUTES
    checks = {
        f"lines <= {MAX_LINES}": lines <= MAX_LINES,
        "reward variance in most steps": n > 0 and signal["steps_with_reward_variance"] > n / 2,
        "policy gradient > 0": n > 0 and signal["steps_with_policy_gradient"] > 0,
        "final line: a gain whose 95% CI lies above 0": gain is not None and gain["low"] > 0,
    }
    if minutes is not None:
        checks[f"wall time <= {bound:g} min" + (" (loaded)" if loaded else "")] = minutes <= bound
    return checks


def cpu_hog() -> subprocess.Popen:
    """One CPU-bound process (a busy loop on one core) until it is killed."""
    return subprocess.Popen([sys.executable, "-c", "while True: pass"], stdin=subprocess.DEVNULL)


def run_demo(venv: Path | None, log: Path, seed: int | None = None, loaded: bool = False,
             external_load: bool = False) -> tuple[dict, Path]:
    """Clone HEAD, then time `make install` (unless ``venv`` is reused) and `make demo` with an empty LFO_HOME;
    the times in minutes and the training run's dir."""
    repo = Path(subprocess.run(["git", "rev-parse", "--show-toplevel"], capture_output=True, text=True,
                               check=True).stdout.strip())
    clone = Path(tempfile.mkdtemp(prefix="lfo-demo-check-"))
    subprocess.run(["git", "clone", "-q", str(repo), str(clone)], check=True)
    env = {**os.environ, "LFO_HOME": tempfile.mkdtemp(prefix="lfo-demo-home-")}
    env.pop("VIRTUAL_ENV", None)
    if venv is not None:
        if not (venv / "bin" / "python").is_file():
            raise SystemExit(f"error: {venv}: no venv there (run `make install` first)")
        (clone / ".venv").symlink_to(venv.resolve())
        os.utime(clone / "pyproject.toml", (0, 0))  # older than the venv's stamp: make leaves the venv as it is
        env["PYTHONPATH"] = str(clone)
    hog = cpu_hog() if loaded and not external_load else None
    times = {}
    log.parent.mkdir(parents=True, exist_ok=True)
    try:
        for target in ("install", "demo"):  # the venv's output apart: pip's lines depend on the machine's pip config
            path = log if target == "demo" else log.with_name(log.name + ".install")
            start = time.monotonic()
            cmd = ["make", target] + ([f"DEMO_SEED={seed}"] if seed is not None and target == "demo" else [])
            with path.open("wb") as fh:
                done = subprocess.run(cmd, cwd=clone, env=env, stdout=fh, stderr=subprocess.STDOUT)
            times[target] = (time.monotonic() - start) / 60
            if done.returncode != 0:
                raise SystemExit(f"error: make {target} failed (exit {done.returncode}); its output: {path}")
    finally:
        if hog is not None:
            hog.kill()
            hog.wait()
    return times, clone / "runs" / "demo" / "dual_lora_micro"


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    sub = ap.add_subparsers(dest="cmd", required=True)
    r = sub.add_parser("run", help="clone HEAD, build its venv and run `make demo`, then check it")
    r.add_argument("--venv", type=Path, default=None, help="reuse this venv (default: the clone builds its own)")
    r.add_argument("--seed", type=int, default=None, help="the demo's training seed (default: its recipe's)")
    r.add_argument("--log", type=Path, default=Path("reports/demo_check.log"),
                   help="where make demo's output goes (make install's: LOG.install); reports/ is not tracked")
    r.add_argument("--loaded", action="store_true", help="run one CPU-bound process beside the demo (bound: "
                   f"{MAX_MINUTES_LOADED:g} min)")
    r.add_argument("--external-load", action="store_true", help="with --loaded: one CPU-bound job is already "
                   "running beside the demo (e.g. a one-thread training run), so start none")
    c = sub.add_parser("check", help="check a captured `make demo` output and its training run")
    c.add_argument("log", type=Path)
    c.add_argument("run_dir", type=Path)
    sub.add_parser("reference", help="time the machine reference alone")
    for p in (r, c):
        p.add_argument("--json", type=Path, default=None, help="also write the figures here")
    args = ap.parse_args(argv)
    if args.cmd == "reference":
        print(f"machine reference {machine_reference():.2f} s (fixed torch + Python micro-benchmark; lower is faster)")
        return 0
    reference, times = None, {}
    if args.cmd == "run":
        reference = machine_reference()  # before any load: the machine's own speed
        times, run_dir = run_demo(args.venv, args.log, seed=args.seed, loaded=args.loaded,
                                  external_load=args.external_load)
        log = args.log
    else:
        run_dir, log = args.run_dir, args.log
    minutes = sum(times.values()) if times else None
    loaded = getattr(args, "loaded", False)
    try:
        text = log.read_bytes().decode("utf-8", errors="replace")
    except OSError as exc:
        print(f"error: {log}: unreadable ({exc})", file=sys.stderr)
        return 2
    try:
        signal = training_signal(run_dir)
    except LfoError as exc:
        print(f"error: {exc}", file=sys.stderr)
        return 2
    lines, gain = printed_lines(text), final_gain(text)
    checks = verdict(minutes, lines, signal, loaded=loaded, gain=gain)
    out = {"minutes": None if minutes is None else round(minutes, 2),
           "minutes_by_target": {k: round(v, 2) for k, v in times.items()}, "venv_reused": args.cmd == "run" and
           args.venv is not None, "machine_reference_s": reference, "seed": getattr(args, "seed", None),
           "loaded": loaded, "lines": lines, "gain_points": gain, **signal, "checks": checks}
    if reference is not None:
        print(f"machine ref.   {reference:.2f} s (fixed torch + Python micro-benchmark; lower is faster)")
    if minutes is not None:
        bound = MAX_MINUTES_LOADED if loaded else MAX_MINUTES
        parts = " + ".join(f"{k} {v:.1f}" for k, v in times.items())
        print(f"wall time      {minutes:.1f} min ({parts}; bound {bound:g}"
              f"{', beside a CPU-bound process' if loaded else ''})")
    print(f"lines printed  {lines} (bound {MAX_LINES})")
    print(f"training steps {signal['steps']}: reward variance in {signal['steps_with_reward_variance']}, "
          f"policy gradient in {signal['steps_with_policy_gradient']}")
    print("final line     " + (f"gain {gain['diff']:.1f} points [95% CI {gain['low']:+.1f}, {gain['high']:+.1f}]"
                               if gain else "reports no gain"))
    for name, ok in checks.items():
        print(f"{'ok  ' if ok else 'FAIL'} {name}")
    if args.json:
        args.json.write_text(json.dumps(out, indent=2) + "\n")
    return 0 if all(checks.values()) else 1


if __name__ == "__main__":
    sys.exit(main())
