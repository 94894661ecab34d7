"""The customer-service environment (stdlib only: no torch/trl/transformers imports).

Public API::

    world = generate_world(num_companies=100, num_train_tasks=500, num_val_tasks=100,
                           heldout_fraction=0.5, seed=0)
    write_world(world, "data/"); world = load_world("data/")
    ep = Episode(world); prompt = ep.reset(world.tasks["val"][0], rollout_seed=0)
    obs = ep.step("search_company", {"company_name": "Acme Bank"})
    ep.done, ep.reward(), ep.info(), ep.transitions

    GRPOTrainer(..., environment_factory=make_env_factory(world, seed=0))

See docs/environment.md for the design.
"""

from lfo_cli.env.catalogue import FIELDS, INDUSTRIES, REFERENCE_KEY
from lfo_cli.env.episode import MAX_TURNS, Episode, StateSummary, Transition
from lfo_cli.env.formatting import (
    format_world_model_input,
    format_world_model_target,
    strip_target_markers,
    world_model_example,
)
from lfo_cli.env.generate import WorldConfig, generate_world
from lfo_cli.env.noise import NoiseConfig
from lfo_cli.env.policies import POLICIES, Action, Policy, PublicTask
from lfo_cli.env.replies import CATEGORIES, PHONE_CATEGORIES, ParsedReply, parse_directory, parse_reply
from lfo_cli.env.rollout import (
    Trajectory,
    make_policy,
    read_trajectories_jsonl,
    run_episode,
    write_trajectories_jsonl,
)
from lfo_cli.env.tool_calls import TOOLS
from lfo_cli.env.trl_env import CustomerServiceEnv, EnvFactory, make_env_factory
from lfo_cli.env.world import SPLITS, Company, Department, Task, TaskStep, WorldData
from lfo_cli.env.world_files import load_world, write_world

__all__ = [
    "CATEGORIES", "FIELDS", "INDUSTRIES", "MAX_TURNS", "PHONE_CATEGORIES", "POLICIES", "REFERENCE_KEY", "SPLITS",
    "TOOLS", "Action", "Company", "CustomerServiceEnv", "Department", "EnvFactory", "Episode", "NoiseConfig",
    "ParsedReply", "Policy", "PublicTask", "StateSummary", "Task", "TaskStep", "Trajectory", "Transition",
    "WorldConfig", "WorldData", "format_world_model_input", "format_world_model_target", "generate_world",
    "load_world", "make_env_factory", "make_policy", "parse_directory", "parse_reply", "read_trajectories_jsonl",
    "run_episode", "strip_target_markers", "world_model_example", "write_trajectories_jsonl", "write_world",
]
