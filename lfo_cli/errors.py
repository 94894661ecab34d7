"""The one exception type that the CLI turns into a single error line and exit code 2.

Library code raises :class:`LfoError` for bad *input* (malformed recipes, unknown keys, out-of-range
values, corrupt data files, unreachable endpoints). Bugs stay ordinary exceptions with tracebacks.
"""

from __future__ import annotations


class LfoError(Exception):
    """Bad user input or unusable data: reported as one line, exit code 2."""

    exit_code = 2
