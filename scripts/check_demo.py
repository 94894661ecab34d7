"""Check what `make demo` promises, on a clean clone: its wall time, how many lines it prints, and whether
its training run had a learning signal.

    python scripts/check_demo.py run                      # clone HEAD, `make demo` with an empty LFO_HOME
    python scripts/check_demo.py run --lfo-home DIR       # reuse DIR (a cached warm start: a shorter demo)
    python scripts/check_demo.py run --loaded             # with one CPU-bound process beside it (a busy laptop)
    python scripts/check_demo.py run --loaded --external-load  # the loaded bounds, beside a job already running
    python scripts/check_demo.py check LOG RUN_DIR        # only read a captured output and a training run

`run` clones this checkout's HEAD into a temporary directory and runs `make demo` there with this
checkout's venv (`--venv`, linked as the clone's `.venv`, the clone's code first on PYTHONPATH, so the venv
is neither rebuilt nor re-pointed). It prints, and with `--json` writes, the figures the demo is held to:

- wall time (bound: 20 min on 2 cores; 40 min with `--loaded`, one CPU-bound process beside it the whole time:
  the warm start's steps, not a clock, end it, so a loaded machine takes longer and builds the same model);
- lines printed, counting a progress bar that redraws itself with carriage returns as one line
  (bound: 120);
- training steps with reward variance (`frac_reward_zero_std` < 1: GRPO's only source of policy
  gradient; bound: most steps) and with a policy-adapter gradient (`grad_norm/policy` > 0).

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

MAX_MINUTES = 20.0
MAX_MINUTES_LOADED = 40.0  # beside one CPU-bound process on 2 cores: each of the demo's 2 threads gets ~2/3 of a core
MAX_LINES = 120
ANSI = re.compile(r"\x1b\[[0-9;?]*[A-Za-z]")


def printed_lines(text: str) -> int:
    """Lines a reader sees scroll by: a line rewritten in place with carriage returns (a progress bar's
    redraws) counts once; cursor-control escape sequences are ignored; a trailing newline adds no line."""
    lines = ANSI.sub("", text).split("\n")
    if lines and lines[-1] == "":
        lines.pop()
    return len(lines)


def training_signal(run_dir: Path) -> dict:
    """Per training step of RUN_DIR's metrics.jsonl: reward variance and a policy-adapter gradient (read the
    way `lfo report` reads them)."""
    from lfo_cli.report.index import learning_signal
    from lfo_cli.report.load import read_run

    steps, variance, gradient = learning_signal(read_run(Path(run_dir)))
    return {"steps": steps, "steps_with_reward_variance": variance, "steps_with_policy_gradient": gradient}


def verdict(minutes: float | None, lines: int, signal: dict, loaded: bool = False) -> dict:
    n = signal["steps"]
    bound = MAX_MINUTES_LOADED if loaded else MAX_MINUTES
    checks = {
        f"lines <= {MAX_LINES}": lines <= MAX_LINES,
        "reward variance in most steps": n > 0 and signal["steps_with_reward_variance"] > n / 2,
        "policy gradient > 0": n > 0 and signal["steps_with_policy_gradient"] > 0,
    }
    if minutes is not None:
        checks[f"wall time <= {bound:g} min" + (" (loaded)" if loaded else "")] = minutes <= bound
    return checks


def cpu_hog() -> subprocess.Popen:
    """One CPU-bound process (a busy loop on one core) until it is killed."""
    return subprocess.Popen([sys.executable, "-c", "while True: pass"], stdin=subprocess.DEVNULL)


def run_demo(venv: Path, lfo_home: Path | None, log: Path, loaded: bool = False,
             external_load: bool = False) -> tuple[float, Path]:
    repo = Path(subprocess.run(["git", "rev-parse", "--show-toplevel"], capture_output=True, text=True,
                               check=True).stdout.strip())
    if not (venv / "bin" / "python").is_file():
        raise SystemExit(f"error: {venv}: no venv there (run `make install` first)")
    clone = Path(tempfile.mkdtemp(prefix="lfo-demo-check-"))
    subprocess.run(["git", "clone", "-q", str(repo), str(clone)], check=True)
    (clone / ".venv").symlink_to(venv.resolve())
    os.utime(clone / "pyproject.toml", (0, 0))  # older than the venv's stamp: make leaves the venv as it is
    home = lfo_home or Path(tempfile.mkdtemp(prefix="lfo-demo-home-"))
    env = {**os.environ, "LFO_HOME": str(home), "PYTHONPATH": str(clone)}
    hog = cpu_hog() if loaded and not external_load else None
    start = time.monotonic()
    try:
        with log.open("wb") as fh:
            done = subprocess.run(["make", "demo"], cwd=clone, env=env, stdout=fh, stderr=subprocess.STDOUT)
    finally:
        if hog is not None:
            hog.kill()
            hog.wait()
    minutes = (time.monotonic() - start) / 60
    if done.returncode != 0:
        raise SystemExit(f"error: make demo failed (exit {done.returncode}); its output: {log}")
    return minutes, clone / "runs" / "demo" / "dual_lora_micro"


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    sub = ap.add_subparsers(dest="cmd", required=True)
    r = sub.add_parser("run", help="clone HEAD and run `make demo`, then check it")
    r.add_argument("--venv", type=Path, default=Path(".venv"))
    r.add_argument("--lfo-home", type=Path, default=None, help="LFO_HOME for the demo (default: a new empty one)")
    r.add_argument("--log", type=Path, default=Path("demo_check.log"), help="where make demo's output goes")
    r.add_argument("--loaded", action="store_true", help="run one CPU-bound process beside the demo (bound: "
                   f"{MAX_MINUTES_LOADED:g} min)")
    r.add_argument("--external-load", action="store_true", help="with --loaded: one CPU-bound job is already "
                   "running beside the demo (e.g. a one-thread training run), so start none")
    c = sub.add_parser("check", help="check a captured `make demo` output and its training run")
    c.add_argument("log", type=Path)
    c.add_argument("run_dir", type=Path)
    for p in (r, c):
        p.add_argument("--json", type=Path, default=None, help="also write the figures here")
    args = ap.parse_args(argv)
    if args.cmd == "run":
        minutes, run_dir = run_demo(args.venv, args.lfo_home, args.log, loaded=args.loaded,
                                    external_load=args.external_load)
        log = args.log
    else:
        minutes, run_dir, log = None, args.run_dir, args.log
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
    lines = printed_lines(text)
    checks = verdict(minutes, lines, signal, loaded=loaded)
    out = {"minutes": None if minutes is None else round(minutes, 2), "loaded": loaded, "lines": lines, **signal,
           "checks": checks}
    if minutes is not None:
        bound = MAX_MINUTES_LOADED if loaded else MAX_MINUTES
        print(f"wall time      {minutes:.1f} min (bound {bound:g}{', beside a CPU-bound process' if loaded else ''})")
    print(f"lines printed  {lines} (bound {MAX_LINES})")
    print(f"training steps {signal['steps']}: reward variance in {signal['steps_with_reward_variance']}, "
          f"policy gradient in {signal['steps_with_policy_gradient']}")
    for name, ok in checks.items():
        print(f"{'ok  ' if ok else 'FAIL'} {name}")
    if args.json:
        args.json.write_text(json.dumps(out, indent=2) + "\n")
    return 0 if all(checks.values()) else 1


if __name__ == "__main__":
    sys.exit(main())
