"""Teams: named groups of a tenant's human agents (an agent may be in several).

A conversation given to a team (``conversations.team_id``: from the console, or the tenant's default team
for its channel, ``handoff.channel_teams`` or ``handoff.default_team``, when it is handed to a person) is assigned automatically only among that team's
online agents (:func:`switchboard.handoff.assignment.pick_agent`); while none of them is online it waits in
the queue, and only a member who comes online takes it from there.
"""

from __future__ import annotations

import uuid
from dataclasses import dataclass, field

from sqlalchemy import delete, func
from sqlmodel import col, select
from sqlmodel.ext.asyncio.session import AsyncSession

from switchboard.db.models import HumanAgent, Team, TeamMember, utcnow
from switchboard.errors import SwitchboardError
from switchboard.tenant_settings import load_tenant_settings

__all__ = [
    "TEAM_NAME_MAX",
    "TEAM_REASON",
    "TeamExists",
    "TeamNotFound",
    "TeamView",
    "create_team",
    "rename_team",
    "delete_team",
    "set_member",
    "list_teams",
    "get_team",
    "teams_of_agent",
    "is_member",
    "default_team_id",
]

TEAM_REASON = " to the team "
"""What the reason of a conversation given to a team says right before the team's name (the console's
history reads it back)."""
TEAM_NAME_MAX = 100
"""Longest team name, in characters."""


class TeamExists(SwitchboardError):
    """The tenant already has a team of that name (names compare case-insensitively)."""

    def __init__(self, name: str) -> None:
        self.name = name
        super().__init__(f"a team named {name!r} already exists")


class TeamNotFound(SwitchboardError):
    """No team (or agent) with that id in this tenant."""


@dataclass
class TeamView:
    """A team and its members by name."""

    team: Team
    members: list[HumanAgent] = field(default_factory=list)


def _clean_name(name: str) -> str:
    cleaned = " ".join(name.split())
    if not cleaned:
        raise ValueError("a team needs a name")
    if len(cleaned) > TEAM_NAME_MAX:
        raise ValueError(f"a team name has at most {TEAM_NAME_MAX} characters")
    return cleaned


async def _by_name(session: AsyncSession, tenant_id: uuid.UUID, name: str) -> Team | None:
    return (
        await session.exec(
            select(Team).where(Team.tenant_id == tenant_id, func.lower(Team.name) == name.lower())
        )
    ).first()


async def get_team(session: AsyncSession, *, tenant_id: uuid.UUID, team_id: uuid.UUID) -> Team:
    """The tenant's team ``team_id``.

    Raises:
        TeamNotFound: no such team in this tenant.
    """
    team = await session.get(Team, team_id)
    if team is None or team.tenant_id != tenant_id:
        raise TeamNotFound(f"no team {team_id}")
    return team


async def create_team(session: AsyncSession, *, tenant_id: uuid.UUID, name: str) -> Team:
    """A new, empty team (the name's runs of spaces become one).

    Raises:
        ValueError: an empty name or one longer than :data:`TEAM_NAME_MAX`.
        TeamExists: the tenant has a team of that name.
    """
    cleaned = _clean_name(name)
    if await _by_name(session, tenant_id, cleaned) is not None:
        raise TeamExists(cleaned)
    team = Team(tenant_id=tenant_id, name=cleaned)
    session.add(team)
    await session.flush()
    return team


async def rename_team(session: AsyncSession, *, tenant_id: uuid.UUID, team_id: uuid.UUID, name: str) -> Team:
    """Rename a team (its members and conversations stay).

    Raises:
        ValueError, TeamExists: as :func:`create_team`.
        TeamNotFound: no such team in this tenant.
    """
    team = await get_team(session, tenant_id=tenant_id, team_id=team_id)
    cleaned = _clean_name(name)
    same = await _by_name(session, tenant_id, cleaned)
    if same is not None and same.id != team.id:
        raise TeamExists(cleaned)
    team.name, team.updated_at = cleaned, utcnow()
    session.add(team)
    await session.flush()
    return team


async def delete_team(session: AsyncSession, *, tenant_id: uuid.UUID, team_id: uuid.UUID) -> Team:
    """Delete a team: its conversations are nobody's team any more (any online agent may get them).

    Raises:
        TeamNotFound: no such team in this tenant.
    """
    team = await get_team(session, tenant_id=tenant_id, team_id=team_id)
    await session.delete(team)
    await session.flush()
    return team


async def set_member(
    session: AsyncSession, *, tenant_id: uuid.UUID, team_id: uuid.UUID, agent_id: uuid.UUID, member: bool
) -> tuple[Team, HumanAgent]:
    """Add the agent to the team (``member``) or take them out; doing it twice changes nothing.

    Raises:
        TeamNotFound: no such team or agent in this tenant.
    """
    team = await get_team(session, tenant_id=tenant_id, team_id=team_id)
    agent = await session.get(HumanAgent, agent_id)
    if agent is None or agent.tenant_id != tenant_id:
        raise TeamNotFound(f"no agent {agent_id}")
    present = await session.get(TeamMember, (team.id, agent.id))
    if member and present is None:
        session.add(TeamMember(team_id=team.id, agent_id=agent.id, tenant_id=tenant_id))
    elif not member and present is not None:
        await session.exec(
            delete(TeamMember).where(col(TeamMember.team_id) == team.id, col(TeamMember.agent_id) == agent.id)  # type: ignore[call-overload]
        )
    await session.flush()
    return team, agent


async def list_teams(session: AsyncSession, *, tenant_id: uuid.UUID) -> list[TeamView]:
    """The tenant's teams by name, each with its members by name."""
    teams = (
        await session.exec(select(Team).where(Team.tenant_id == tenant_id).order_by(func.lower(Team.name)))
    ).all()
    views = {t.id: TeamView(t) for t in teams}
    rows = await session.exec(
        select(TeamMember.team_id, HumanAgent)
        .join(HumanAgent, col(HumanAgent.id) == col(TeamMember.agent_id))
        .where(TeamMember.tenant_id == tenant_id)
        .order_by(col(HumanAgent.name))
    )
    for team_id, agent in rows.all():
        views[team_id].members.append(agent)
    return list(views.values())


async def teams_of_agent(session: AsyncSession, agent: HumanAgent) -> list[uuid.UUID]:
    """Ids of the teams the agent is in."""
    rows = await session.exec(select(TeamMember.team_id).where(TeamMember.agent_id == agent.id))
    return list(rows.all())


async def is_member(session: AsyncSession, *, team_id: uuid.UUID, agent_id: uuid.UUID) -> bool:
    return await session.get(TeamMember, (team_id, agent_id)) is not None


async def default_team_id(
    session: AsyncSession, tenant_id: uuid.UUID, channel: str | None = None
) -> uuid.UUID | None:
    """The team a conversation handed to a person goes to when it has none: the line of the tenant's
    ``handoff.channel_teams`` for ``channel``, else ``handoff.default_team`` (team names, any case);
    ``None`` when unset or no such team."""
    handoff = (await load_tenant_settings(session, tenant_id)).handoff
    by_channel = dict(line.split(" = ", 1) for line in handoff.channel_teams)
    name = (by_channel.get(channel or "") or handoff.default_team).strip()
    if not name:
        return None
    team = await _by_name(session, tenant_id, " ".join(name.split()))
    return team.id if team is not None else None
