"""Small SVG charts drawn on the server (no chart library, nothing from a CDN): one line per channel."""

from __future__ import annotations

from collections.abc import Sequence
from datetime import date

from markupsafe import Markup, escape

from switchboard.channels.base import channel_class, channel_label
from switchboard.i18n import gettext

__all__ = ["line_chart", "channel_colour"]

_NO_CHANNEL_COLOUR = "#5f6b7a"
"""The ``none`` line (conversations without a channel)."""
_FALLBACK_COLOURS = ("#2256d8", "#a15c00", "#6b21a8", "#0e7490")
WIDTH, HEIGHT, RIGHT, TOP, BOTTOM = 520, 220, 12, 26, 46
DOTS_UP_TO_DAYS = 31
"""Longer ranges draw lines only (a point stays visible only where it stands alone); each point keeps
its hover title."""
CHAR_PX = 6.6
"""Width of one character of an 11 px label, pixels: the left margin grows to fit the longest y label."""


def channel_colour(channel: str) -> str | None:
    """The line colour channel ``channel`` declares (:attr:`~switchboard.channels.base.Channel.chart_colour`),
    grey for ``none``; ``None`` for a channel without one (a colour of the fallback palette is used)."""
    if channel == "none":
        return _NO_CHANNEL_COLOUR
    cls = channel_class(channel)
    return getattr(cls, "chart_colour", None) if cls is not None else None


def _fmt(value: float, unit: str) -> str:
    if unit == "s":  # a wait: seconds, minutes or hours, whichever reads best
        if value < 120:
            return f"{value:.0f}s" if value >= 10 or float(value).is_integer() else f"{value:.1f}s"
        if value < 7200:
            return f"{value / 60:.0f}m"
        return f"{value / 3600:.1f}h"
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
    language: str = "en",
) -> Markup:
    """An SVG line chart: x = ``days``, one polyline (with dots) per channel; gaps where a value is ``None``.

    Args:
        title: shown above the plot (already translated).
        series: ``{channel: [value per day]}``.
        unit: ``"%"`` for ratios (0-1), ``"s"`` for seconds, ``"$"`` for US dollars, else plain numbers.
        language: the legend's channel names are in it (``en`` / ``es``).
    """
    values = [v for line in series.values() for v in line if v is not None]
    top = max(values) if values else 0
    top = top if top > 0 else 1
    ticks = [(frac, _fmt(top * frac, unit)) for frac in (0, 0.5, 1)]
    left = max(32, round(CHAR_PX * max(len(label) for _, label in ticks)) + 10)
    plot_w, plot_h = WIDTH - left - RIGHT, HEIGHT - TOP - BOTTOM
    step = plot_w / max(1, len(days) - 1)

    def x(i: int) -> float:
        return left + i * step

    def y(v: float) -> float:
        return TOP + plot_h - (v / top) * plot_h

    parts = [
        f'<svg class="chart" id="{escape(chart_id)}" role="img" viewBox="0 0 {WIDTH} {HEIGHT}" width="100%" '
        f'xmlns="http://www.w3.org/2000/svg"><title>{escape(title)}</title>',
        f'<text x="4" y="14" style="font-weight:600;fill:#1d2330">{escape(title)}</text>',
    ]
    for frac, label in ticks:
        gy = TOP + plot_h - frac * plot_h
        parts.append(f'<line x1="{left}" x2="{WIDTH - RIGHT}" y1="{gy:.1f}" y2="{gy:.1f}" stroke="#dde1e7"/>')
        parts.append(f'<text x="{left - 4}" y="{gy + 4:.1f}" text-anchor="end">{escape(label)}</text>')
    dots = len(days) <= DOTS_UP_TO_DAYS
    label_every = max(1, -(-len(days) // 7))  # at most 7 day labels: 40 px each never touch
    for i, d in enumerate(days):
        if i % label_every == 0:
            # the first and the last label stay inside the chart
            anchor = "start" if i == 0 else "end" if i == len(days) - 1 else "middle"
            parts.append(
                f'<text class="day" x="{x(i):.1f}" y="{TOP + plot_h + 16}" text-anchor="{anchor}">{d:%m-%d}</text>'
            )
    legend_x = float(left)
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
            alone = (i == 0 or line[i - 1] is None) and (i == len(line) - 1 or line[i + 1] is None)
            parts.append(
                f'<circle cx="{x(i):.1f}" cy="{y(v):.1f}" r="{3 if dots or alone else 0}" fill="{colour}" '
                f'data-channel="{escape(channel)}" '
                f'data-value="{v}"><title>{escape(channel)} {d_label(days[i])}: {escape(_fmt(v, unit))}</title></circle>'
            )
        if len(segment) > 1:
            parts.append(
                f'<polyline fill="none" stroke="{colour}" stroke-width="2" points="{" ".join(segment)}"/>'
            )
        label = gettext(language, channel_label(channel))
        parts.append(
            f'<text class="legend" x="{legend_x:.0f}" y="{HEIGHT - 8}" style="fill:{colour}">● {escape(label)}</text>'
        )
        legend_x += CHAR_PX * (len(label) + 3)
    if not values:
        parts.append(f'<text x="{left + plot_w / 2}" y="{TOP + plot_h / 2}" text-anchor="middle">—</text>')
    parts.append("</svg>")
    return Markup("".join(parts))


def d_label(day: date) -> str:
    return day.isoformat()
