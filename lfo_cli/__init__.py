"""lfo: learn from observation. A CLI-first toolkit for RL on LLM agents with a world-model loss."""

__version__ = "0.1.0"
