"""What the engine tests share."""

from __future__ import annotations

SENTENCES = [
    "Hi.",
    "The town of Ellery sat at the bend of a slow brown river.",
    "Children learned to swim off the wooden dock behind the post office, and their parents "
    "pretended not to notice.",
    "Not everyone was pleased.",
]
"""Four lengths: 13, 121, 239 and 59 phoneme ids."""
