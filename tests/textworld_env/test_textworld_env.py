"""The TextWorld world on tiny generated games: deterministic game sets, the global RNGs untouched, the gold
policy wins and a random one does not through lfo's episode runner, one-line errors for bad input."""

from __future__ import annotations

import json
import os
import random
import shutil
import subprocess
import sys
from pathlib import Path

import numpy as np
import pytest
import torch

from lfo_cli.errors import LfoError
from lfo_cli.textworld_env.environment import TextWorldEnv, TextWorldFactory
from lfo_cli.textworld_env.episodes import gold_policy, noisy_gold_policy, play_all, random_policy, record
from lfo_cli.textworld_env.games import GameSpec, generate_games
from lfo_cli.textworld_env.text import clean

pytest.importorskip("textworld")
pytestmark = pytest.mark.slow
COOKING = GameSpec(kind="cooking", recipe=1, take=1, go=6)  # one ingredient to find in one of six rooms


@pytest.fixture(scope="module")
def games(tmp_path_factory):
    return generate_games(COOKING, range(4), root=tmp_path_factory.mktemp("tw"))


def test_the_same_seeds_give_the_same_games_and_other_seeds_other_ones(games, tmp_path):
    again = generate_games(COOKING, range(2), root=tmp_path)
    assert [g.sha256 for g in again] == [g.sha256 for g in games[:2]] and len({g.sha256 for g in games}) == 4
    manifest = json.loads((again[0].path.parent / "manifest.json").read_text())
    assert manifest["spec"]["go"] == 6 and sorted(manifest["games"], key=int) == ["0", "1"]
    other = generate_games(GameSpec(kind="cooking", recipe=1, take=1, go=6, split="valid"), [0], root=tmp_path)
    assert other[0].sha256 != games[0].sha256  # the valid split: other foods for the same seed


FRESH = """
import json, sys
import numpy as np
np.random.seed(2)
before = np.random.get_state()[1].copy()
from lfo_cli.textworld_env.games import GameSpec, generate_games
made = generate_games(GameSpec(kind="cooking", recipe=1, take=1, go=6), [0, 1], root=sys.argv[1])
print(json.dumps({"sha": [g.sha256 for g in made], "rng": bool((np.random.get_state()[1] == before).all()),
                  "imported": "textworld" in sys.modules}))
"""


def test_another_process_makes_the_same_games_and_importing_textworld_moves_no_rng(games, tmp_path):
    """TextWorld's generator iterates over sets (their order follows the process's string hashing): a process
    with another hash seed must still make the same descriptions. That process imports textworld for the first
    time, which draws from numpy's global generator unless guarded."""
    env = {**os.environ, "PYTHONHASHSEED": "12345", "OMP_NUM_THREADS": "1"}
    out = subprocess.run([sys.executable, "-c", FRESH, str(tmp_path)], capture_output=True, text=True, env=env,
                         timeout=300, check=True)
    got = json.loads(out.stdout.strip().splitlines()[-1])
    assert got["sha"] == [g.sha256 for g in games[:2]]
    assert got["imported"] and got["rng"]


def test_a_child_that_stops_or_hashes_at_random_is_one_error(tmp_path, monkeypatch):
    """The child refuses to make games under random string hashing; a child that dies is one LfoError too."""
    from lfo_cli.textworld_env import games as games_mod

    env = {**os.environ, "PYTHONHASHSEED": "random"}
    done = subprocess.run([sys.executable, "-m", "lfo_cli.textworld_env.games", json.dumps({"kind": "cooking"}),
                           str(tmp_path), "3"], capture_output=True, text=True, env=env, timeout=120)
    assert done.returncode == 2 and done.stderr.startswith("error: textworld: games must be made with PYTHONHASHSEED=0")
    monkeypatch.setattr(games_mod.sys, "executable", "/bin/false")  # a child that exits at once, having made nothing
    with pytest.raises(LfoError, match=r"the process making games stopped \(exit code 1\)"):
        generate_games(COOKING, [31], root=tmp_path)


def test_seeds_are_checked_before_any_game_and_a_broken_cached_game_is_made_again(games, tmp_path):
    with pytest.raises(LfoError, match=r"integer in \[0, 4294967295\], got 4294967296"):
        generate_games(COOKING, [5, 2**32], root=tmp_path)
    assert not list(tmp_path.rglob("seed-5.*"))  # refused before seed 5 was made
    root = tmp_path / "copy"
    shutil.copytree(games[0].path.parent, root / games[0].path.parent.name)
    desc = root / games[0].path.parent.name / "seed-0.json"
    desc.write_text(desc.read_text()[:100])  # truncated: made again, never recorded as it is
    assert generate_games(COOKING, [0], root=root)[0].sha256 == games[0].sha256


def test_reset_and_act_leave_every_global_rng_as_it_was(games, tmp_path):
    random.seed(1)
    np.random.seed(2)
    torch.manual_seed(3)
    before = (random.getstate(), np.random.get_state()[1].copy(), torch.get_rng_state().clone())
    generate_games(COOKING, [9], root=tmp_path)  # generation too
    env = TextWorldEnv(games)
    env.reset(game=games[0].seed)
    env.act("look")
    env.act(env.admissible_commands[0])
    after = (random.getstate(), np.random.get_state()[1], torch.get_rng_state())
    assert after[0] == before[0] and (after[1] == before[1]).all() and torch.equal(after[2], before[2])


def test_gold_wins_every_game_and_random_none_through_the_episode_runner(games):
    gold = play_all(games, gold_policy())
    assert all(e.won and e.reward == 1.0 for e in gold)
    assert all(e.steps == len(e.commands) <= 50 for e in gold)
    rand = play_all(games, random_policy(0), max_steps=50)
    assert sum(e.won for e in rand) / len(rand) < 0.1
    assert all(e.won or e.lost or e.steps == 50 for e in rand)
    # a teacher with detours: the re-planned walkthrough recovers from most of them, in more steps
    noisy = play_all(games, noisy_gold_policy(0.3, seed=1))
    assert sum(e.won for e in noisy) >= 2 and sum(e.steps for e in noisy) > sum(e.steps for e in gold)


def test_the_agent_reads_no_banner_and_one_tool_is_exposed(games):
    from transformers.utils import get_json_schema

    env = TextWorldFactory(games, max_steps=5)()
    first = env.reset(game=games[1].seed)
    assert "$$" not in first and "cookbook" in first and first == first.strip()
    public = [n for n in dir(TextWorldEnv) if not n.startswith("_") and callable(getattr(TextWorldEnv, n))]
    assert sorted(public) == ["act", "get_reward", "reset"]  # TRL's tools: every public method but these two
    assert get_json_schema(env.act)["function"]["parameters"]["required"] == ["command"]
    for _ in range(5):
        env.act("look")
    assert env.done and env.act("look") == "The game is over."


def test_clean_strips_the_status_line_and_blank_runs():
    assert clean("\n\n  ___|$$\\\n-= Kitchen =-   0/3\nYou see a fridge.\n\n\n\nA table.\n") == \
        "-= Kitchen =-\nYou see a fridge.\n\nA table."
    # the prompt and the status bar the interpreter prints after every reply
    assert clean("\nThat's not a verb I recognise.\n\n>" + " " * 100 + "-= Livingroom =-0/2") == \
        "That's not a verb I recognise."
    assert clean("You see a fridge.\n\n>") == "You see a fridge."


def test_bad_input_is_one_clear_error(games, tmp_path, monkeypatch):
    with pytest.raises(LfoError, match="unknown game type 'zork'"):
        generate_games(GameSpec(kind="zork"), [0], root=tmp_path)
    with pytest.raises(LfoError, match="go must be 1, 6, 9 or 12"):
        GameSpec(go=3).check()
    with pytest.raises(LfoError, match="'game' must be one of"):
        TextWorldEnv(games).reset(game=99)
    # the interpreter would exit the whole process on these: each is refused before it reads them
    story = games[0].path.read_bytes()
    for name, data, says in (("garbage", b"not a story file" * 8, "not a Z-machine story file"),
                             ("truncated", story[: len(story) // 2], "truncated or corrupt"),
                             ("flipped", story[:5000] + bytes([story[5000] ^ 0xFF]) + story[5001:], "truncated or corrupt")):
        broken = tmp_path / f"{name}.z8"
        broken.write_bytes(data)
        with pytest.raises(LfoError, match=says):
            TextWorldEnv([type(games[0])(0, broken, "x")]).reset(game=0)
    with pytest.raises(LfoError, match="cannot read game"):
        TextWorldEnv([type(games[0])(0, tmp_path / "missing.z8", "x")]).reset(game=0)
    monkeypatch.setitem(sys.modules, "textworld", None)  # the extra not installed
    with pytest.raises(LfoError, match=r"pip install -e '\.\[textworld\]'"):
        generate_games(COOKING, [77], root=tmp_path)


def _lfo(*args: str, home):
    sys.path.insert(0, str(Path(__file__).parents[1] / "train"))
    from tiny import lfo_here

    return lfo_here(*args, env={"LFO_HOME": str(home)})


def test_gen_env_makes_and_checks_textworld_games(tmp_path):
    done = _lfo("gen-env", "--world", "textworld", "--games", "2", "--seed", "5", "--check", "--json", home=tmp_path)
    assert done.returncode == 0, done.stderr[-2000:]
    out = json.loads(done.stdout)
    assert out["gold_success"] == 1.0 and out["checks"] == {"gold_100": True, "random_below_10pct": True}
    assert set(json.loads(Path(out["manifest"]).read_text())["games"]) == {"5", "6"}
    bad = _lfo("gen-env", "--world", "textworld", "--game-type", "zork", home=tmp_path)
    assert bad.returncode == 2 and bad.stdout == "" and bad.stderr.count("\n") == 1
    assert bad.stderr.startswith("error: textworld: unknown game type 'zork'")


def test_a_recorded_episode_is_a_conversation_the_chat_template_renders(games):
    """What a warm start imitates: the opening as the user turn, each command an `act` call, each outcome
    its tool result; replaying the calls wins the game again."""
    from transformers.utils import get_json_schema

    sys.path.insert(0, str(Path(__file__).parents[1] / "train"))
    from tiny import tiny_tokenizer

    env = TextWorldEnv(games)
    episode = record(env, games[2].seed, gold_policy(), system_prompt="You play a text game.")
    roles = [m["role"] for m in episode["messages"]]
    assert roles[:2] == ["system", "user"] and roles[2:] == ["assistant", "tool"] * episode["steps"]
    assert episode["won"] and episode["reward"] == 1.0
    commands = [m["tool_calls"][0]["function"]["arguments"]["command"] for m in episode["messages"] if m["role"] == "assistant"]
    planned = iter(commands)
    replay = play_all([games[2]], lambda env, observation: next(planned))
    assert replay[0].won and replay[0].commands == tuple(commands)
    text = tiny_tokenizer().apply_chat_template(episode["messages"], tools=[get_json_schema(env.act)], tokenize=False)
    assert commands[0] in text and episode["messages"][-1]["content"][:20] in text
