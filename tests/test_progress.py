"""Progress that reads in a log: plain lines at the stated cadence, with step/total, rate and ETA, off a terminal."""

from __future__ import annotations

import io
import re
from types import SimpleNamespace

import pytest

from lfo_cli.progress import Cadence, ProgressLog, episode_progress, format_duration

TQDM = re.compile(r"it/s\]|\d+%\|")  # what a tqdm bar line looks like


class FakeClock:
    def __init__(self) -> None:
        self.t = 1000.0

    def __call__(self) -> float:
        return self.t


def lines(stream: io.StringIO) -> list[str]:
    return stream.getvalue().splitlines()


def test_durations_read_as_a_person_writes_them():
    assert [format_duration(s) for s in (4.2, 187, 3900)] == ["4 s", "3 min 07 s", "1 h 05 min"]


def test_a_line_per_5_percent_with_rate_and_eta():
    out, clock = io.StringIO(), FakeClock()
    plog = ProgressLog("warm start SFT", 200, stream=out, terminal=False, clock=clock)
    for step in range(1, 201):
        clock.t += 2.0  # 2 s a step: 5% (10 steps) takes 20 s, past the 10-s floor
        plog.update(step)
    plog.close()
    got = lines(out)
    assert len(got) == 20  # 10, 20, ..., 200: one per 5%, and the last at the end (not repeated by close)
    assert got[0] == "warm start SFT: 10/200 steps (5%) · 2.0 s/step · ETA 6 min 20 s"
    assert got[-1] == "warm start SFT: 200/200 steps (100%) · 2.0 s/step · done in 6 min 40 s"
    assert not any(TQDM.search(line) or "\r" in line for line in got)


def test_a_fast_job_prints_at_most_one_line_per_10_s():
    out, clock = io.StringIO(), FakeClock()
    plog = ProgressLog("evaluation", 1000, unit="episode", stream=out, terminal=False, clock=clock)
    for done in range(1, 1001):
        clock.t += 0.0625  # 62.5 s in all: every 5% is only 3.1 s apart
        plog.update(done)
    plog.close()
    got = lines(out)
    assert len(got) == 7  # at 10, 20, ..., 60 s and the end
    assert got[0] == "evaluation: 160/1000 episodes (16%) · 16.00 episodes/s · ETA 52 s"


def test_a_slow_job_prints_at_least_once_a_minute():
    out, clock = io.StringIO(), FakeClock()
    plog = ProgressLog("GRPO", 1000, stream=out, terminal=False, clock=clock)
    for step in range(1, 6):
        clock.t += 90.0  # 5% would take 75 minutes: the heartbeat speaks
        plog.update(step)
    assert len(lines(out)) == 5 and lines(out)[1].startswith("GRPO: 2/1000 steps (0%) · 90.0 s/step · ETA 24 h")


def test_a_heartbeat_only_log_stays_silent_when_it_is_quick():
    out, clock = io.StringIO(), FakeClock()
    with ProgressLog("validation @ step 10", 300, unit="episode", stream=out, terminal=False, clock=clock,
                     cadence=Cadence(fraction=None)) as plog:
        for done in (50, 150, 300):
            clock.t += 10.0
            plog.update(done)
    assert out.getvalue() == ""
    with ProgressLog("validation @ step 20", 300, unit="episode", stream=out, terminal=False, clock=clock,
                     cadence=Cadence(fraction=None)) as plog:
        for done in (100, 200, 300):
            clock.t += 40.0
            plog.update(done)
    assert lines(out) == ["validation @ step 20: 200/300 episodes (67%) · 2.50 episodes/s · ETA 40 s",
                          "validation @ step 20: 300/300 episodes (100%) · 2.50 episodes/s · done in 2 min 00 s"]


def test_a_resumed_job_counts_only_the_work_done_here_and_disabled_prints_nothing():
    out, clock = io.StringIO(), FakeClock()
    plog = ProgressLog("GRPO", 100, start=50, stream=out, terminal=False, clock=clock)
    clock.t += 50.0
    plog.update(55)
    assert lines(out) == ["GRPO: 55/100 steps (55%) · 10.0 s/step · ETA 7 min 30 s"]
    quiet = io.StringIO()
    with ProgressLog("x", 10, stream=quiet, terminal=False, clock=clock, enabled=False) as off:
        off.update(10)
        off.log("step 10/10")
    assert quiet.getvalue() == ""


def _state(step: int, max_steps: int) -> SimpleNamespace:
    return SimpleNamespace(global_step=step, max_steps=max_steps, is_world_process_zero=True)


def _train(label: str, steps: int, max_steps: int, logs, end: dict | None = None) -> list[str]:
    """Drive lfo's TrainerProgress through the Trainer's callback order (on_step_begin, on_step_end, then on_log
    for each row ``logs(step)`` gives), 3 s a step on a fake clock and no terminal; the lines it printed."""
    from lfo_cli.console import TrainerProgress

    out, clock = io.StringIO(), FakeClock()
    cb = TrainerProgress(label, stream=out, terminal=False, clock=clock)
    args, control = SimpleNamespace(), SimpleNamespace()
    cb.on_train_begin(args, _state(0, max_steps), control)
    for step in range(1, steps + 1):
        cb.on_step_begin(args, _state(step - 1, max_steps), control)
        clock.t += 3.0
        cb.on_step_end(args, _state(step, max_steps), control)
        for row in logs(step):
            cb.on_log(args, _state(step, max_steps), control, logs=row)
    if end is not None:
        cb.on_log(args, _state(steps, max_steps), control, logs=end)
        cb.on_train_end(args, _state(steps, max_steps), control)
    return lines(out)


@pytest.mark.parametrize("label", ["GRPO", "warm start SFT"])
def test_trainer_progress_prints_step_lines_with_eta_at_the_cadence_and_no_tqdm(label):
    """Training and the warm start's SFT both use lfo's TrainerProgress: driven here through the Trainer's
    callback order (on_step_begin, on_step_end, on_log) with a fake clock and no terminal. A logged step's
    metrics ride on the progress line; the cadence, not the logging interval, decides when a line comes."""
    def logs(step):
        rows = [{"loss": step / 100, "reward": 0.25}] if step % 2 == 0 else []  # logging_steps = 2
        return rows + ([{"val/success": 0.125}] if step == 50 else [])

    got = _train(label, 100, 100, logs, end={"train_runtime": 300.0})
    progress = [g for g in got if g.startswith(f"{label}: ")]
    # a line once 5 steps (5%) passed since the last one, at the first logged step from there
    assert progress[0] == f"{label}: 6/100 steps (6%) · 3.0 s/step · ETA 4 min 42 s · loss 0.0600 · reward 0.250"
    assert len(progress) == 17 and all(int(p.split(": ")[1].split("/")[0]) % 2 == 0 for p in progress)
    assert "validation @ step 50: success 0.125" in got
    assert got[-1] == "trained 100 steps in 300 s"  # the end, said once
    assert not any(TQDM.search(line) for line in got)


def test_evaluation_reports_episodes_done_across_batches(tiny_world):
    """evaluate_agent's progress hook counts episodes over the whole call, not per batch."""
    from lfo_cli.env.plugin import CustomerServiceWorld
    from lfo_cli.models.agent_eval import evaluate_agent

    world, tokenizer = tiny_world
    tasks = [t for t in world.tasks["val"] for _ in range(3)][:24]
    out, clock = io.StringIO(), FakeClock()

    def generate(prompt_ids, temperature, max_new_tokens, seed):
        clock.t += 4.0
        return [tokenizer("Done.<|im_end|>", add_special_tokens=False)["input_ids"] for _ in prompt_ids]

    with ProgressLog("transfer-eval", None, unit="episode", stream=out, terminal=False, clock=clock) as plog:
        evaluate_agent(None, tokenizer, CustomerServiceWorld(world), tasks, generate_fn=generate, batch_size=4, seed=0,
                       progress=episode_progress(plog))
    got = lines(out)
    assert got[0] == "transfer-eval: 12/24 episodes (50%) · 1.00 episodes/s · ETA 12 s"
    assert got[-1] == "transfer-eval: 24/24 episodes (100%) · 1.00 episodes/s · done in 24 s"
    assert len(got) == 2  # 4 s a batch of 4: the 10-s floor keeps batches 1-2 and 4-5 quiet


@pytest.fixture(scope="module")
def tiny_world(tmp_path_factory):
    import sys
    from pathlib import Path

    sys.path.insert(0, str(Path(__file__).parent / "train"))
    from tiny import tiny_tokenizer

    from lfo_cli.env import generate_world

    return generate_world(num_companies=8, num_train_tasks=8, num_val_tasks=12, heldout_fraction=0.25, seed=2), \
        tiny_tokenizer()


def test_sparse_logging_still_gets_a_heartbeat_without_stale_metrics():
    """Log rows 120 s apart (40 steps of 3 s): a heartbeat line each minute in between, without the metrics
    of an earlier step; the logged steps' lines carry their own."""
    got = _train("warm start SFT", 120, 400, lambda step: [{"loss": 1.0 / step}] if step % 40 == 0 else [])
    assert [g.split(":")[1].split()[0] for g in got] == ["20/400", "40/400", "60/400", "80/400", "100/400", "120/400"]
    assert [("loss" in g) for g in got] == [False, True, False, True, False, True]


def test_a_row_logged_before_training_begins_is_printed():
    """The step-0 validation logs from a callback that runs before the progress callback's on_train_begin."""
    from lfo_cli.console import TrainerProgress

    out, clock = io.StringIO(), FakeClock()
    cb = TrainerProgress("GRPO", stream=out, terminal=False, clock=clock)
    args, control = SimpleNamespace(), SimpleNamespace()
    cb.on_log(args, _state(0, 10), control, logs={"val/success": 0.25})
    cb.on_train_begin(args, _state(0, 10), control)
    assert lines(out) == ["validation @ step 0: success 0.250"]
