"""What the agent reads: TextWorld's feedback without the ASCII-art banner, the status line's score/moves,
the command prompt with the status bar the interpreter prints after it (``>   -= Kitchen =-0/1``), and runs
of blank lines."""

from __future__ import annotations

import re

_BANNER_CHARS = set(" _|$\\/<>-")
_ROOM = re.compile(r"^-= (?P<room>.+?) =-(?:\s+\S+/\S+)?\s*$")
_PROMPT = re.compile(r"^>\s*(?:-= .+? =-\s*\S*)?$")  # the prompt, then the status bar: room, score/moves


def clean(feedback: str) -> str:
    lines = []
    for line in feedback.splitlines():
        stripped = line.strip()
        if _PROMPT.match(stripped):
            continue
        if stripped and set(stripped) <= _BANNER_CHARS:  # the banner: art made of these characters only
            continue
        room = _ROOM.match(stripped)
        lines.append(f"-= {room['room']} =-" if room else line.rstrip())
    return re.sub(r"\n{3,}", "\n\n", "\n".join(lines)).strip()
