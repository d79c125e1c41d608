"""Full-jitter exponential backoff (AWS Architecture Blog, "Exponential Backoff And Jitter").

Used between retries of conditional writes that lost a race: a random wait in
``[0, min(cap, base * 2**attempt))``, so that racing writers spread out instead of
colliding again in step.
"""

from __future__ import annotations

import random

#: The exponent stops growing here (the cap is reached long before in practice).
MAX_EXPONENT = 10


def full_jitter(attempt: int, base_seconds: float, cap_seconds: float) -> float:
    return random.uniform(0, min(cap_seconds, base_seconds * 2 ** min(attempt, MAX_EXPONENT)))
