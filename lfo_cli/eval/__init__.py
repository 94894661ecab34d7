"""Evaluation: statistics (stats.py) and checkpoint evaluation commands."""
