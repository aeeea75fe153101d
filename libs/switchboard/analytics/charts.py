"""Small SVG charts drawn on the server (no chart library, nothing from a CDN): one line per channel."""

from __future__ import annotations

from collections.abc import Sequence
from datetime import date

from markupsafe import Markup, escape

from switchboard.channels.base import channel_class, channel_label

__all__ = ["line_chart", "channel_colour"]

_NO_CHANNEL_COLOUR = "#5f6b7a"
"""The ``none`` line (conversations without a channel)."""
_FALLBACK_COLOURS = ("#2256d8", "#a15c00", "#6b21a8", "#0e7490")
WIDTH, HEIGHT, LEFT, RIGHT, TOP, BOTTOM = 520, 200, 44, 10, 24, 28


def channel_colour(channel: str) -> str | None:
    """The line colour channel ``channel`` declares (:attr:`~switchboard.channels.base.Channel.chart_colour`),
    grey for ``none``; ``None`` for a channel without one (a colour of the fallback palette is used)."""
    if channel == "none":
        return _NO_CHANNEL_COLOUR
    cls = channel_class(channel)
    return getattr(cls, "chart_colour", None) if cls is not None else None


def _fmt(value: float, unit: str) -> str:
    if unit == "%":
        return f"{value * 100:.0f}%"
    if unit == "$":  # model spend: cents matter, fractions of a cent on a quiet day too
        return f"${value:.2f}" if abs(value) >= 1 else f"${value:.4f}"
    if abs(value) >= 10_000:
        return f"{value / 1000:.0f}k"
    return f"{value:.0f}" if float(value).is_integer() or abs(value) >= 10 else f"{value:.1f}"


def line_chart(
    title: str,
    days: Sequence[date],
    series: dict[str, Sequence[float | None]],
    *,
    unit: str = "",
    chart_id: str = "",
) -> Markup:
    """An SVG line chart: x = ``days``, one polyline (with dots) per channel; gaps where a value is ``None``.

    Args:
        title: shown above the plot (already translated).
        series: ``{channel: [value per day]}``.
        unit: ``"%"`` for ratios (0-1), ``"s"`` for seconds, ``"$"`` for US dollars, else plain numbers.
    """
    values = [v for line in series.values() for v in line if v is not None]
    top = max(values) if values else 0
    top = top if top > 0 else 1
    plot_w, plot_h = WIDTH - LEFT - RIGHT, HEIGHT - TOP - BOTTOM
    step = plot_w / max(1, len(days) - 1)

    def x(i: int) -> float:
        return LEFT + i * step

    def y(v: float) -> float:
        return TOP + plot_h - (v / top) * plot_h

    parts = [
        f'<svg class="chart" id="{escape(chart_id)}" role="img" viewBox="0 0 {WIDTH} {HEIGHT}" width="100%" '
        f'xmlns="http://www.w3.org/2000/svg"><title>{escape(title)}</title>',
        f'<text x="{LEFT}" y="14" style="font-weight:600;fill:#1d2330">{escape(title)}</text>',
    ]
    for frac in (0, 0.5, 1):
        gy = TOP + plot_h - frac * plot_h
        parts.append(f'<line x1="{LEFT}" x2="{WIDTH - RIGHT}" y1="{gy:.1f}" y2="{gy:.1f}" stroke="#dde1e7"/>')
        parts.append(
            f'<text x="{LEFT - 4}" y="{gy + 4:.1f}" text-anchor="end">{escape(_fmt(top * frac, unit))}{escape(unit if unit == "s" else "")}</text>'
        )
    label_every = max(1, len(days) // 7)
    for i, d in enumerate(days):
        if i % label_every == 0 or i == len(days) - 1:
            anchor = "end" if i == len(days) - 1 and len(days) > 1 else "middle"  # the last one stays inside
            parts.append(f'<text x="{x(i):.1f}" y="{HEIGHT - 8}" text-anchor="{anchor}">{d:%m-%d}</text>')
    for n, (channel, line) in enumerate(sorted(series.items())):
        colour = channel_colour(channel) or _FALLBACK_COLOURS[n % len(_FALLBACK_COLOURS)]
        segment: list[str] = []
        for i, v in enumerate(line):
            if v is None:
                if len(segment) > 1:
                    parts.append(
                        f'<polyline fill="none" stroke="{colour}" stroke-width="2" points="{" ".join(segment)}"/>'
                    )
                segment = []
                continue
            segment.append(f"{x(i):.1f},{y(v):.1f}")
            parts.append(
                f'<circle cx="{x(i):.1f}" cy="{y(v):.1f}" r="3" fill="{colour}" data-channel="{escape(channel)}" '
                f'data-value="{v}"><title>{escape(channel)} {d_label(days[i])}: {escape(_fmt(v, unit))}</title></circle>'
            )
        if len(segment) > 1:
            parts.append(
                f'<polyline fill="none" stroke="{colour}" stroke-width="2" points="{" ".join(segment)}"/>'
            )
        parts.append(
            f'<text x="{WIDTH - RIGHT - 90}" y="{14 + 12 * n}" style="fill:{colour}">● {escape(channel_label(channel))}</text>'
        )
    if not values:
        parts.append(f'<text x="{WIDTH / 2}" y="{TOP + plot_h / 2}" text-anchor="middle">—</text>')
    parts.append("</svg>")
    return Markup("".join(parts))


def d_label(day: date) -> str:
    return day.isoformat()
