"""Tiny inline-SVG line charts for self-contained HTML reports (no scripts, no network)."""

from collections.abc import Sequence
from html import escape

PALETTE = ("#1f77b4", "#d62728", "#2ca02c", "#9467bd", "#ff7f0e", "#8c564b", "#17becf", "#7f7f7f")


def line_chart(
    title: str,
    series: Sequence[tuple[str, Sequence[tuple[float, float]]]],
    x_label: str,
    y_label: str,
    width: int = 560,
    height: int = 300,
) -> str:
    """An SVG with one polyline per (name, points) series, axes from the data's range."""
    pad_l, pad_r, pad_t, pad_b = 56, 140, 28, 40
    xs = [x for _, pts in series for x, _ in pts] or [0.0, 1.0]
    ys = [y for _, pts in series for _, y in pts] or [0.0, 1.0]
    x0, x1 = min(xs), max(xs) if max(xs) > min(xs) else min(xs) + 1
    y0, y1 = min(0.0, min(ys)), max(ys) if max(ys) > 0 else 1.0
    plot_w, plot_h = width - pad_l - pad_r, height - pad_t - pad_b

    def px(x: float) -> float:
        return pad_l + (x - x0) / (x1 - x0) * plot_w

    def py(y: float) -> float:
        return pad_t + plot_h - (y - y0) / (y1 - y0) * plot_h

    parts = [
        f'<svg xmlns="http://www.w3.org/2000/svg" width="{width}" height="{height}" '
        f'role="img" aria-label="{escape(title)}">',
        f'<text x="{pad_l}" y="18" font-size="14" font-weight="bold">{escape(title)}</text>',
        f'<line x1="{pad_l}" y1="{pad_t + plot_h}" x2="{pad_l + plot_w}" y2="{pad_t + plot_h}" '
        'stroke="#333"/>',
        f'<line x1="{pad_l}" y1="{pad_t}" x2="{pad_l}" y2="{pad_t + plot_h}" stroke="#333"/>',
    ]
    for i in range(5):
        yv = y0 + (y1 - y0) * i / 4
        xv = x0 + (x1 - x0) * i / 4
        parts.append(
            f'<text x="{pad_l - 6}" y="{py(yv) + 4:.1f}" font-size="10" '
            f'text-anchor="end">{yv:.3g}</text>'
        )
        parts.append(
            f'<text x="{px(xv):.1f}" y="{pad_t + plot_h + 14}" font-size="10" '
            f'text-anchor="middle">{xv:.3g}</text>'
        )
    parts.append(
        f'<text x="{pad_l + plot_w / 2:.1f}" y="{height - 6}" font-size="11" '
        f'text-anchor="middle">{escape(x_label)}</text>'
    )
    parts.append(
        f'<text x="12" y="{pad_t + plot_h / 2:.1f}" font-size="11" '
        f'transform="rotate(-90 12 {pad_t + plot_h / 2:.1f})" '
        f'text-anchor="middle">{escape(y_label)}</text>'
    )
    for k, (name, pts) in enumerate(series):
        color = PALETTE[k % len(PALETTE)]
        coords = " ".join(f"{px(x):.1f},{py(y):.1f}" for x, y in pts)
        parts.append(
            f'<polyline fill="none" stroke="{color}" stroke-width="2" '
            f'points="{coords}"><title>{escape(name)}</title></polyline>'
        )
        ly = pad_t + 14 * k + 6
        parts.append(
            f'<rect x="{pad_l + plot_w + 12}" y="{ly - 8}" width="10" height="10" fill="{color}"/>'
        )
        parts.append(
            f'<text x="{pad_l + plot_w + 26}" y="{ly + 1}" font-size="11">{escape(name)}</text>'
        )
    parts.append("</svg>")
    return "".join(parts)
