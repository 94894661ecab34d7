"""Environment trajectories as multi-turn tool-calling chats (the warm start's SFT data).

A trajectory of the environment's reference policies (``lfo_cli.env.rollout.run_episode``) becomes
exactly the conversation TRL's GRPO tool loop builds during a rollout: system prompt, the task as
the user turn, then per step an assistant turn with one tool call and a ``tool`` message holding the
observation string, and a final short assistant reply that ends the episode (in TRL an assistant
turn without a tool call ends the rollout).

A deliberate copy slip of the noisy teacher (``NoiseConfig.slip``, listed in the trajectory's
``info["slipped_steps"]``) stays in the conversation, so the agent sees the error reply and the
recovery, but its assistant message carries ``"weight": 0`` (axolotl's per-turn convention):
the warm start trains on the recovery, not on making the slip. With ``imitate_random=False`` the
same holds for the teacher's random replacement actions (``NoiseConfig.epsilon``, listed in
``info["random_steps"]``): the detour and its reply stay in context, the random call itself (a
company, number or value the conversation never showed) is not imitated.
"""

from __future__ import annotations

from collections.abc import Iterable
from typing import Any

from lfo_cli.env.episode import Episode
from lfo_cli.env.rollout import run_episode
from lfo_cli.env.world import sub_seed
from lfo_cli.models import prompts

FINAL_REPLY = "Done."


def trajectory_messages(traj: Any, system_prompt: str = prompts.SYSTEM_PROMPT, *,
                        imitate_random: bool = True) -> list[dict[str, Any]]:
    """Chat messages of one ``Trajectory`` (or its dict form); noise turns that are not to be
    imitated carry ``"weight": 0``."""
    d = traj.to_dict() if hasattr(traj, "to_dict") else traj
    messages = prompts.build_messages(d["prompt"], system_prompt)
    info = d.get("info") or {}
    untrained = set(info.get("slipped_steps", ()))
    if not imitate_random:
        untrained |= set(info.get("random_steps", ()))
    for i, tr in enumerate(d["transitions"]):
        action = tr["action"] if isinstance(tr, dict) else tr.action
        observation = tr["observation"] if isinstance(tr, dict) else tr.observation
        args = action.get("args")
        call = prompts.tool_call_message(action["tool"], args if isinstance(args, dict) else {})
        if i in untrained:
            call["weight"] = 0
        messages.append(call)
        messages.append(prompts.tool_result_message(action["tool"], observation))
    messages.append({"role": "assistant", "content": FINAL_REPLY})
    return messages


def collect_trajectories(
    world: Any,
    tasks: Iterable[Any],
    *,
    policy: str,
    noise: Any = None,
    seed: int = 0,
    rollouts_per_task: int = 1,
    system_prompt: str = prompts.SYSTEM_PROMPT,
    imitate_random: bool = True,
    probe_rate: float = 0.0,
    probe_noise: Any = None,
) -> list[dict[str, Any]]:
    """Run ``policy`` (with the environment's ``NoiseConfig``) on each task; one dict per rollout
    with ``messages``, ``transitions`` (dicts), ``task_id``, ``difficulty``, ``policy``, ``reward``
    and ``info``. Rollout seeds derive from ``seed`` so the data set is reproducible.
    ``imitate_random``: see :func:`trajectory_messages`. ``probe_rate``: each rollout plays the ``probe``
    policy instead with this probability (drawn per rollout from ``seed``, task and rollout index, so a
    rollout's policy and its own seed do not depend on the others), with ``probe_noise`` (None: ``noise``)."""
    import random

    episode = Episode(world)
    out = []
    for task in tasks:
        for r in range(rollouts_per_task):
            rollout_seed = sub_seed("warmstart", seed, task.task_id, r) % (2**31)
            played, played_noise = policy, noise
            if probe_rate and random.Random(sub_seed("probe-mix", seed, task.task_id, r)).random() < probe_rate:
                played, played_noise = "probe", noise if probe_noise is None else probe_noise
            traj = run_episode(episode, played, task, rollout_seed=rollout_seed, noise=played_noise)
            d = traj.to_dict()
            out.append(
                {
                    "task_id": task.task_id,
                    "difficulty": task.difficulty,
                    "policy": traj.policy,
                    "reward": traj.reward,
                    "info": traj.info,
                    "transitions": d["transitions"],
                    "messages": trajectory_messages(d, system_prompt, imitate_random=imitate_random),
                }
            )
    return out
