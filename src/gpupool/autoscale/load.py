"""A service's load as the autoscaler sees it: requests per second per tick, from 600-s windows."""

import numpy as np


def ticks_from_windows(window_rates: np.ndarray, window_s: int, tick_s: int) -> np.ndarray:
    """Each window's mean rate held over its ticks (the data's own resolution, no smoothing)."""
    if window_s % tick_s:
        raise ValueError(f"tick {tick_s} s does not divide the {window_s}-s window")
    return np.repeat(np.asarray(window_rates, dtype=float), window_s // tick_s)


def bursty_ticks(
    window_rates: np.ndarray, window_cv2: np.ndarray, window_s: int, tick_s: int, seed: int
) -> np.ndarray:
    """Requests per second per tick drawn from each window's rate and burstiness: a renewal
    process of rate r and inter-arrival CV c has, over t seconds, counts of mean r*t and
    variance about r*t*c^2; each tick's count is drawn from the Gamma of those two moments
    (``window_cv2``: c^2 per window; 0 keeps the tick at the mean, the smooth load)."""
    mean = ticks_from_windows(window_rates, window_s, tick_s) * tick_s
    cv2 = ticks_from_windows(window_cv2, window_s, tick_s)
    drawn = mean.copy()
    bursty = (mean > 0) & (cv2 > 0)
    rng = np.random.default_rng(seed)
    drawn[bursty] = rng.gamma(mean[bursty] / cv2[bursty], cv2[bursty])
    out: np.ndarray = drawn / tick_s
    return out


def trailing_mean(rates: np.ndarray, ticks: int) -> np.ndarray:
    """Mean over the last ``ticks`` ticks up to and including each tick (fewer at the start)."""
    ticks = max(1, ticks)
    cum = np.concatenate([[0.0], np.cumsum(rates)])
    idx = np.arange(1, len(rates) + 1)
    lo = np.maximum(0, idx - ticks)
    mean: np.ndarray = (cum[idx] - cum[lo]) / (idx - lo)
    return mean
