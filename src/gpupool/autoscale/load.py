"""A service's load as the autoscaler sees it: requests per second per tick, from 600-s windows."""

import numpy as np


def ticks_from_windows(window_rates: np.ndarray, window_s: int, tick_s: int) -> np.ndarray:
    """Each window's mean rate held over its ticks (the data's own resolution, no smoothing)."""
    if window_s % tick_s:
        raise ValueError(f"tick {tick_s} s does not divide the {window_s}-s window")
    return np.repeat(np.asarray(window_rates, dtype=float), window_s // tick_s)


def trailing_mean(rates: np.ndarray, ticks: int) -> np.ndarray:
    """Mean over the last ``ticks`` ticks up to and including each tick (fewer at the start)."""
    ticks = max(1, ticks)
    cum = np.concatenate([[0.0], np.cumsum(rates)])
    idx = np.arange(1, len(rates) + 1)
    lo = np.maximum(0, idx - ticks)
    mean: np.ndarray = (cum[idx] - cum[lo]) / (idx - lo)
    return mean
