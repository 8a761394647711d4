"""Summary figures the replays report."""

import numpy as np


def percentile(values: list[float], q: int) -> float | None:
    """The ``q``-th percentile rounded to 0.1, or None for no values."""
    return None if not values else round(float(np.percentile(values, q)), 1)
