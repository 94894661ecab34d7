"""Environment trajectories as multi-turn tool-calling chats (the warm start's SFT data).

A rollout of the world's teacher (:meth:`lfo_cli.worlds.World.teacher_rollouts`) becomes
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
name, number or value the conversation never showed) is not imitated.
"""

from __future__ import annotations

from collections.abc import Callable, Iterable
from typing import Any

from lfo_cli.models import prompts
from lfo_cli.worlds import World

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
    world: World,
    tasks: Iterable[Any],
    *,
    policy: str,
    noise: Any = None,
    seed: int = 0,
    rollouts_per_task: int = 1,
    system_prompt: str | None = None,
    imitate_random: bool = True,
    settings: Any = None,
    progress: Callable[[int, int], None] | None = None,
) -> list[dict[str, Any]]:
    """The world's teacher on each task (:meth:`lfo_cli.worlds.World.teacher_rollouts`: ``policy`` with
    ``noise`` and the world's own options in ``settings``, a warm start's data section; reproducible from
    ``seed``), each rollout with its
    conversation: one dict per rollout with ``task_id``, ``difficulty``, ``policy``, ``reward``, ``info``,
    ``transitions`` (dicts) and ``messages`` (``system_prompt``: default the world's;
    ``imitate_random``: see :func:`trajectory_messages`). ``progress(done, total)`` is called with the
    rollouts played so far: the tasks are played in chunks, which gives the same rollouts as one call (a
    rollout's seed derives from ``seed``, its task and its index, not from the rollouts before it)."""
    system = system_prompt or world.system_prompt or prompts.SYSTEM_PROMPT
    tasks = list(tasks)
    total, rollouts = len(tasks) * rollouts_per_task, []
    chunk = max(1, len(tasks) // 50) if progress else max(1, len(tasks))
    for start in range(0, len(tasks), chunk):
        rollouts += world.teacher_rollouts(tasks[start:start + chunk], policy=policy, noise=noise, seed=seed,
                                           rollouts_per_task=rollouts_per_task, settings=settings)
        if progress:
            progress(len(rollouts), total)
    return [{**{k: r[k] for k in ("task_id", "difficulty", "policy", "reward", "info", "transitions")},
             "messages": trajectory_messages(r, system, imitate_random=imitate_random)} for r in rollouts]
