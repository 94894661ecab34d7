"""WMIL (world-model interactive learning): a from-scratch baby model learns from a parent environment.

Layout (CleanRL-style, one readable loop per algorithm):

- :mod:`lfo_cli.wmil.task_base`  symbolic tasks as *batched* tensor rules: the ``Task`` base class,
                                 ``ActionSpace``; :mod:`lfo_cli.wmil.reactive_tasks` and
                                 :mod:`lfo_cli.wmil.memory_tasks` the single-step and multi-step tasks
- :mod:`lfo_cli.wmil.envs`       the task registry, ``VecEnv``, ``State``, ``RewardVector`` and the design's
                                 single-env ``SymbolicEnv``
- :mod:`lfo_cli.wmil.parents`    ``DeterministicParent`` and ``LLMParent`` (OpenAI-compatible HTTP or local)
- :mod:`lfo_cli.wmil.model`      ``BabyModel`` = StateEncoder + TransformerCore + Action/WorldModel/Value heads
- :mod:`lfo_cli.wmil.algos`      returns, GAE, REINFORCE and PPO losses
- :mod:`lfo_cli.wmil.curriculum` mastery-window curriculum
- :mod:`lfo_cli.wmil.trainer`    the training loop, checkpoints, exact resume
- :mod:`lfo_cli.wmil.evaluate`   evaluation, baselines; :mod:`lfo_cli.wmil.probe` linear probes + t-SNE
- :mod:`lfo_cli.wmil.ablate`     multi-seed ablations with bootstrap CIs and paired tests
- :mod:`lfo_cli.wmil.reference`  the design's per-step loop (one env, python objects), for the benchmark

Vocabulary: an **env step** is one action of one environment; a **training step** (what ``--steps``
counts, and what the design's "step 5,000" meant) is one policy update on a batch of ``num_envs``
episodes, i.e. ``num_envs * episode_length`` env steps.
"""
