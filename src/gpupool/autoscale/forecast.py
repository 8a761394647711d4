"""Forecast a service's near-future peak from its own history: explainable and online.

The seasonal-quantile forecaster learns, for each hour of the day, how far the load rose above
its current level within the next ``horizon`` ticks: the distribution of
``max(rate[t+1 .. t+horizon]) / level(t)`` (``level`` = the mean of the last stable window).
Its forecast at tick ``t`` is ``level(t)`` times that ratio's ``quantile`` for ``t``'s hour
(with the neighbouring hours, to have enough samples from one week). Ramps, the evening rise
and how bursty each hour is live in that table; it is refitted at each midnight on all the
history before it, so a forecast at ``t`` never uses load after ``t``.

Also here, to compare with (NVIDIA Dynamo's planner offers the same two): ``constant`` (the
level now) and ``arima`` (ARIMA on the 10-minute windows, one step ahead, fitted on the
learning days).
"""

import warnings
from dataclasses import dataclass

import numpy as np
from numpy.lib.stride_tricks import sliding_window_view

from gpupool.autoscale.load import trailing_mean

DAY_S = 86_400


@dataclass(frozen=True)
class Forecast:
    """Forecast peak load (req/s) per tick."""

    peak: np.ndarray


def _future_max(rates: np.ndarray, horizon: int) -> np.ndarray:
    """max(rates[t+1 .. t+horizon]) for each t (NaN where the future runs past the end)."""
    out = np.full(len(rates), np.nan)
    if horizon < 1 or len(rates) <= horizon:
        return out
    windows = sliding_window_view(rates[1:], horizon).max(axis=1)
    out[: len(windows)] = windows
    return out


def _log_rise(rates: np.ndarray, level: np.ndarray, horizon: int, floor: float) -> np.ndarray:
    """log(max(rates[t+1 .. t+horizon]) / level[t]), both lifted by ``floor`` (no log of 0)."""
    return np.log((_future_max(rates, horizon) + floor) / (level + floor))


def _volatility(level: np.ndarray, floor: float, step: int, span: int) -> np.ndarray:
    """Recent std of log(level[t] / level[t - step]) over ``span`` ticks (1 when span is 0)."""
    if span <= 0:
        return np.ones(len(level))
    change = np.zeros(len(level))
    change[step:] = np.log((level[step:] + floor) / (level[:-step] + floor))
    mean = trailing_mean(change, span)
    spread = np.sqrt(np.maximum(trailing_mean(change**2, span) - mean**2, 0.0))
    floored: np.ndarray = np.maximum(spread, 1e-3)
    return floored


def rise_table(
    ratio: np.ndarray,
    hours: np.ndarray,
    known_end: int,
    bins: int,
    quantile: float,
    neighbours: int,
) -> np.ndarray:
    """Per hour bin: the ``quantile`` of the log rise over ticks before ``known_end``."""
    known = np.arange(max(known_end, 0))
    known = known[np.isfinite(ratio[known])]
    table = np.zeros(bins)
    for b in range(bins):
        near = np.abs((hours[known] - b + bins // 2) % bins - bins // 2) <= neighbours
        if near.any():
            table[b] = np.quantile(ratio[known][near], quantile)
    return table


def peak_now(
    loads: np.ndarray, start_s: float, tick_s: int, horizon: int, quantile: float
) -> float:
    """The live forecast: the peak over the next ``horizon`` ticks after the last load of
    ``loads`` (one per tick from ``start_s``, epoch seconds)."""
    floor = max(1e-9, 1e-3 * float(np.mean(loads)))
    ratio = _log_rise(loads, loads, horizon, floor)
    offset = int(start_s // tick_s)
    hours = _hour(np.arange(offset, offset + len(loads)), tick_s, 3600)
    table = rise_table(ratio, hours, len(loads) - horizon, 24, quantile, 1)
    value = (loads[-1] + floor) * np.exp(table[hours[-1]]) - floor
    return max(float(value), 0.0)


def _hour(ticks: np.ndarray, tick_s: int, bin_s: int) -> np.ndarray:
    return (ticks * tick_s % DAY_S) // bin_s


def seasonal_quantile(
    rates: np.ndarray,
    tick_s: int,
    horizon: int,
    quantile: float,
    learn_end: int,
    stable_ticks: int = 6,
    bin_s: int = 3600,
    neighbours: int = 1,
    volatility_ticks: int = 0,
) -> Forecast:
    """Peak over the next ``horizon`` ticks at ``quantile``, for every tick from ``learn_end``.

    With ``volatility_ticks`` the learned rise is in units of the load's recent volatility
    (the standard deviation of its log change per ``stable_ticks`` over that span), so a calm
    evening asks for less headroom than a bursty afternoon at the same hour.
    """
    level = trailing_mean(rates, stable_ticks)
    floor = max(1e-9, 1e-3 * float(np.mean(rates[:learn_end])))
    scale = _volatility(level, floor, stable_ticks, volatility_ticks)
    ratio = _log_rise(rates, level, horizon, floor) / scale
    hours = _hour(np.arange(len(rates)), tick_s, bin_s)
    day_ticks = DAY_S // tick_s
    peak = np.full(len(rates), np.nan)
    for day_start in range(learn_end, len(rates), day_ticks):
        # the ratio at t needs rates up to t + horizon: only ticks whose future is before today
        table = rise_table(ratio, hours, day_start - horizon, DAY_S // bin_s, quantile, neighbours)
        day = np.arange(day_start, min(day_start + day_ticks, len(rates)))
        peak[day] = (level[day] + floor) * np.exp(table[hours[day]] * scale[day]) - floor
    return Forecast(np.maximum(peak, 0.0))


def constant(rates: np.ndarray, stable_ticks: int = 6) -> Forecast:
    """The level now, as the forecast for every horizon."""
    return Forecast(trailing_mean(rates, stable_ticks))


def arima(
    window_rates: np.ndarray,
    window_ticks: int,
    learn_windows: int,
    order: tuple[int, int, int] = (2, 1, 1),
) -> Forecast:
    """ARIMA on the windows, fitted on the learning windows, one window ahead (statsmodels).

    At each tick the forecast is the larger of the window now and the next window's one-step
    prediction made from the windows completed before it; the fitted parameters stay fixed.
    """
    from statsmodels.tsa.arima.model import ARIMA

    series = np.log1p(np.asarray(window_rates, dtype=float))
    with warnings.catch_warnings():  # start values and convergence notes, not errors
        warnings.simplefilter("ignore")
        fit = ARIMA(series[:learn_windows], order=order).fit()
    # one-step predictions over the whole series with the learned parameters: the prediction
    # for window w uses windows before w only (the Kalman filter runs forward)
    ahead = np.expm1(fit.apply(series).predict(start=0, end=len(series) - 1))
    nxt = np.concatenate([ahead[1:], ahead[-1:]])
    per_tick_now = np.repeat(window_rates, window_ticks)
    per_tick_next = np.repeat(nxt, window_ticks)
    return Forecast(np.maximum(per_tick_now, per_tick_next))


def clairvoyant(rates: np.ndarray, horizon: int) -> Forecast:
    """The real peak over the next ``horizon`` ticks (the future: a ceiling, never a policy);
    the last ticks, whose future runs past the trace, see what is left of it."""
    peak = _future_max(rates, horizon)
    tail = np.maximum.accumulate(np.asarray(rates, dtype=float)[::-1])[::-1]
    gone = ~np.isfinite(peak)
    peak[gone] = tail[np.minimum(np.nonzero(gone)[0] + 1, len(rates) - 1)]
    return Forecast(peak)
