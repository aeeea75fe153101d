"""Business hours: when the tenant's team answers, from its ``hours`` settings.

A schedule is a set of weekly opening periods in local wall-clock time (``mon 09:00-18:00``) plus whole
closed days (holidays), read in one IANA time zone. :meth:`BusinessHours.is_open` and
:meth:`BusinessHours.next_opening` take aware instants and hold across daylight-saving changes: a period
starting in the hour the clocks skip opens when the clocks jump (``02:30`` on a spring-forward night
opens at ``03:00``); a period in the hour that repeats opens at its first occurrence, and again at the
second when it closed in between.

Outside the hours a request for a person waits in the queue for the next opening
(:func:`switchboard.handoff.assignment.escalate`) and the customer gets :func:`waiting_reply`.
"""

from __future__ import annotations

from dataclasses import dataclass
from datetime import UTC, date, datetime, time, timedelta
from zoneinfo import ZoneInfo

from switchboard.db.models import utcnow
from switchboard.i18n import N_, gettext
from switchboard.tenant_settings import WEEKDAYS, HoursSettings, TenantSettings

__all__ = ["BusinessHours", "availability", "business_hours", "opening_words", "waiting_reply", "utcnow"]

SEARCH_DAYS = 400
"""How far ahead :meth:`BusinessHours.next_opening` looks, days (a year of holidays and then some)."""
_END_OF_DAY = "24:00"


def _clock(value: str) -> time:
    hours, minutes = value.split(":")
    return time(int(hours), int(minutes))


def _naive_local(at: datetime, zone: ZoneInfo) -> datetime:
    return at.astimezone(zone).replace(tzinfo=None)


@dataclass(frozen=True)
class BusinessHours:
    """A tenant's opening hours in one time zone (build it with :func:`business_hours`)."""

    zone: ZoneInfo
    periods: dict[int, list[tuple[time, time | None]]]
    """``date.weekday()`` → ``(opens, closes)`` local times; ``closes`` ``None`` is midnight (``24:00``)."""
    holidays: frozenset[date]

    @classmethod
    def from_settings(cls, hours: HoursSettings, *, default_timezone: str = "UTC") -> BusinessHours:
        periods: dict[int, list[tuple[time, time | None]]] = {}
        for period in hours.schedule:
            closes = None if period.closes == _END_OF_DAY else _clock(period.closes)
            periods.setdefault(WEEKDAYS.index(period.day), []).append((_clock(period.opens), closes))
        return cls(ZoneInfo(hours.timezone or default_timezone), periods, frozenset(hours.holidays))

    def is_open(self, at: datetime) -> bool:
        """Whether the team answers at the aware instant ``at``.

        Raises:
            ValueError: ``at`` has no time zone.
        """
        if at.tzinfo is None:
            raise ValueError("is_open needs an aware datetime")
        local = _naive_local(at, self.zone)
        if local.date() in self.holidays:
            return False
        now = local.time()
        return any(
            opens <= now and (closes is None or now < closes)
            for opens, closes in self.periods.get(local.weekday(), [])
        )

    def _starts(self, opens: time, day: date) -> list[datetime]:
        """The instants (UTC) at which local ``opens`` on ``day`` begins: one, two when the hour repeats
        (both occurrences), or the moment the clocks jump when that wall time is skipped."""
        wall = datetime.combine(day, opens)
        first = wall.replace(tzinfo=self.zone, fold=0).astimezone(UTC)
        second = wall.replace(tzinfo=self.zone, fold=1).astimezone(UTC)
        if _naive_local(first, self.zone) == wall:
            return sorted({first, second})
        # Skipped wall time: fold=1 reads it with the offset after the jump (earlier instant), fold=0 with
        # the one before (later). The jump lies between; find it to the minute.
        low, high = second, first
        while high - low > timedelta(minutes=1):
            middle = low + (high - low) / 2
            middle = middle.replace(second=0, microsecond=0)
            if middle <= low:
                break
            if _naive_local(middle, self.zone) >= wall:
                high = middle
            else:
                low = middle
        return [high]

    def _clock_change(self, day: date) -> datetime | None:
        """The instant (UTC) the clocks change around local ``day``, if they do: going back can reopen
        a period (the wall time returns into it) without any period starting."""
        low = datetime.combine(day, time(0)).replace(tzinfo=self.zone).astimezone(UTC) - timedelta(hours=1)
        high = low + timedelta(hours=27)
        before, after = low.astimezone(self.zone).utcoffset(), high.astimezone(self.zone).utcoffset()
        if before == after:
            return None
        while high - low > timedelta(minutes=1):
            middle = (low + (high - low) / 2).replace(second=0, microsecond=0)
            if middle <= low:
                break
            if middle.astimezone(self.zone).utcoffset() == before:
                low = middle
            else:
                high = middle
        return high

    def next_opening(self, at: datetime) -> datetime | None:
        """The first instant at or after ``at`` when the team answers (``at`` itself when open now), in
        UTC; ``None`` when the schedule has no opening within :data:`SEARCH_DAYS` days.

        Raises:
            ValueError: ``at`` has no time zone.
        """
        if self.is_open(at):
            return at.astimezone(UTC)
        start_day = _naive_local(at, self.zone).date() - timedelta(days=1)
        best: datetime | None = None
        for offset in range(SEARCH_DAYS + 2):
            day = start_day + timedelta(days=offset)
            if best is not None and day > best.astimezone(self.zone).date() + timedelta(days=1):
                return best  # a clock change at midnight can put the next day's start first: look one more
            if day in self.holidays:
                continue
            starts = [
                start
                for opens, _ in self.periods.get(day.weekday(), [])
                for start in self._starts(opens, day)
            ]
            change = self._clock_change(day)
            for start in [*starts, *([change] if change is not None else [])]:
                if start >= at and (best is None or start < best) and self.is_open(start):
                    best = start
        return best


def business_hours(settings: TenantSettings) -> BusinessHours | None:
    """The tenant's hours, or ``None`` when business hours are off (always open)."""
    if not settings.hours.enabled:
        return None
    return BusinessHours.from_settings(settings.hours, default_timezone=settings.locale.timezone)


_WEEKDAY_NAMES = (
    N_("Monday"),
    N_("Tuesday"),
    N_("Wednesday"),
    N_("Thursday"),
    N_("Friday"),
    N_("Saturday"),
    N_("Sunday"),
)
_MONTH_NAMES = (
    N_("January"),
    N_("February"),
    N_("March"),
    N_("April"),
    N_("May"),
    N_("June"),
    N_("July"),
    N_("August"),
    N_("September"),
    N_("October"),
    N_("November"),
    N_("December"),
)


def opening_words(opening: datetime, *, now: datetime, zone: ZoneInfo, language: str) -> str:
    """``opening`` as a customer reads it, in ``zone``'s local time and ``language``: ``today at 09:00``,
    ``tomorrow at 09:00``, ``on Monday 7 December at 09:00``."""
    local, today = opening.astimezone(zone), now.astimezone(zone).date()
    clock = local.strftime("%H:%M")
    if local.date() == today:
        return gettext(language, N_("today at {time}")).format(time=clock)
    if local.date() == today + timedelta(days=1):
        return gettext(language, N_("tomorrow at {time}")).format(time=clock)
    return gettext(language, N_("on {weekday} {day} {month} at {time}")).format(
        weekday=gettext(language, _WEEKDAY_NAMES[local.weekday()]),
        day=local.day,
        month=gettext(language, _MONTH_NAMES[local.month - 1]),
        time=clock,
    )


def waiting_reply(settings: TenantSettings, opens_at: datetime | None, *, now: datetime | None = None) -> str:
    """What a customer waiting for a person is told: ``hours.out_of_hours_reply`` with the next opening
    when the team is away (``opens_at`` set), else ``handoff.queue_reply``."""
    if opens_at is None:
        return settings.handoff.queue_reply
    hours = business_hours(settings)
    zone = hours.zone if hours is not None else ZoneInfo(settings.locale.timezone)
    words = opening_words(opens_at, now=now or utcnow(), zone=zone, language=settings.locale.language)
    return settings.hours.out_of_hours_reply.replace("{opening}", words)


AVAILABILITY_LANGUAGES = ("en", "es")
"""The languages :func:`availability` words the next opening in (those a website chat page may have)."""


def availability(settings: TenantSettings, *, now: datetime | None = None) -> dict[str, object]:
    """Whether the team answers now, for a customer-facing surface (the website chat's notice):
    ``{"open": True}`` when business hours are off or the team is in; otherwise
    ``{"open": False, "opens_at": ISO-8601 UTC | None, "opens": {"en": ..., "es": ...} | None}``, the
    next opening as :func:`opening_words` words it in the tenant's time zone (``None`` when the schedule
    has no opening within :data:`SEARCH_DAYS` days)."""
    hours = business_hours(settings)
    at = now or utcnow()
    if hours is None or hours.is_open(at):
        return {"open": True}
    opening = hours.next_opening(at)
    if opening is None:
        return {"open": False, "opens_at": None, "opens": None}
    return {
        "open": False,
        "opens_at": opening.isoformat(),
        "opens": {
            language: opening_words(opening, now=at, zone=hours.zone, language=language)
            for language in AVAILABILITY_LANGUAGES
        },
    }
