"""Worlds as plugins: the interface lfo's training, warm starts, evaluation and report use
(:class:`World`), and the registry that finds a world by its kind (a recipe's ``env.kind``).

    world = load_world("customer_service", "data/")
    pools = world.task_pools(cfg.data, cfg.eval, seed=0)
    GRPOTrainer(..., environment_factory=world.env_factory(seed=0, max_turns=16, options={}))

See docs/environment.md ("Worlds as plugins").
"""

from lfo_cli.worlds.base import EpisodeRunner, Example, SemanticProbe, StudyWords, Task, TaskPools, World
from lfo_cli.worlds.registry import DEFAULT_KIND, WorldChoice, kinds, load_world, world_class
from lfo_cli.worlds.tasks import stratified_tasks, sub_seed

__all__ = ["DEFAULT_KIND", "EpisodeRunner", "Example", "SemanticProbe", "StudyWords", "Task", "TaskPools", "World", "WorldChoice", "kinds",
           "load_world", "stratified_tasks", "sub_seed", "world_class"]
