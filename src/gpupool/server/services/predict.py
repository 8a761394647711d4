"""The live forecast of a service's peak, from its own load history (one sample a minute).

The forecaster is the simulator's (``gpupool.autoscale.forecast``): the hour's learned
quantile of the rise over the start-up time, applied to the load now. It needs a day of
history; and when its recent forecasts covered the real peaks much less often than its
quantile promises, it stands aside: the service scales reactively and its status says why.
"""

from math import ceil

import numpy as np

from gpupool.autoscale.forecast import peak_now

TICK_S = 60
QUANTILE = 0.9
MIN_HISTORY_S = 86_400
MAX_HISTORY_S = 8 * 86_400
COVERAGE_SLACK = 0.15


def per_minute(times: np.ndarray, loads: np.ndarray) -> np.ndarray:
    """The samples on a one-minute grid from the first, gaps filled by the last value."""
    index = ((times - times[0]) // TICK_S).astype(int)
    grid = np.full(index[-1] + 1, np.nan)
    grid[index] = loads
    filled = np.where(np.isnan(grid), 0, np.arange(len(grid)))
    np.maximum.accumulate(filled, out=filled)
    return grid[filled]


def coverage(
    times: np.ndarray, loads: np.ndarray, forecasts: np.ndarray, horizon_s: float, since: float
) -> tuple[float, int]:
    """How often the peak in the ``horizon_s`` after a forecast stayed within it (and of how
    many forecasts made since ``since`` whose horizon has passed)."""
    hits = n = 0
    end = times[-1]
    for i in np.nonzero((times >= since) & np.isfinite(forecasts))[0]:
        if times[i] + horizon_s > end:
            break
        ahead = loads[(times > times[i]) & (times <= times[i] + horizon_s)]
        if len(ahead):
            n += 1
            hits += ahead.max() <= forecasts[i] + 1e-9
    return (hits / n if n else 1.0), n


def live_forecast(
    times: np.ndarray, loads: np.ndarray, forecasts: np.ndarray, startup_s: float
) -> tuple[float | None, str]:
    """(the forecast peak over the start-up time, or None) and what the service's status
    should say about it."""
    span = float(times[-1] - times[0]) if len(times) else 0.0
    if span < MIN_HISTORY_S:
        return None, (
            f"predictive: needs a day of load history (has {span / 3600:.1f} h); scaling reactively"
        )
    horizon = ceil(startup_s / TICK_S) + 1
    covered, n = coverage(times, loads, forecasts, horizon * TICK_S, times[-1] - 86_400)
    if n >= 60 and covered < QUANTILE - COVERAGE_SLACK:
        return None, (
            f"predictive: the forecast covered {covered:.0%} of the last day's peaks "
            f"(aiming at {QUANTILE:.0%}); scaling reactively"
        )
    grid = per_minute(times, loads)
    value = peak_now(grid, float(times[0]), TICK_S, horizon, QUANTILE)
    return value, f"predictive: forecast peak {value:.3g} over the next {horizon} min"
