"""Evaluation tasks (one JSON object a line) and their automatic checks.

A task::

    {"id": "s-returns", "category": "simple", "text": "What is your returns policy?",
     "customer": "simulate:demo-customer",
     "checks": [{"type": "contains", "values": ["30 days"]}]}

``category``: ``simple`` (one tool or one passage), ``compound`` (two or three tools combined),
``trap`` (not answerable with the tools at hand: the right answer is to refuse or hand off).
``customer``: the external user id of the customer asking (orders are scoped to it); default a fresh
one per run. Every check must pass for the task to succeed. Check types:

* ``contains``: every one of ``values`` appears in the reply (case-insensitive).
* ``numeric``: some number in the reply is within ``tolerance`` of ``value`` (``89.90``, ``89,90``).
* ``refusal``: the reply declines or says it does not know, the input guardrail blocked the turn, or
  the turn handed off to a person.
* ``tool_called``: a tool ``name`` was called whose arguments include ``arguments`` (values compared
  as case-insensitive strings).
* ``handoff``: the conversation went to a person (``escalate_to_human`` ran, or a guardrail handed off).
"""

from __future__ import annotations

import json
import re
from dataclasses import dataclass, field
from pathlib import Path
from typing import Annotated, Any, Literal

from pydantic import BaseModel, ConfigDict, Field, TypeAdapter, ValidationError

__all__ = [
    "Category",
    "CATEGORIES",
    "Check",
    "EvalTask",
    "Observation",
    "TasksRejected",
    "load_tasks",
    "run_checks",
    "is_refusal",
    "DEMO_TASKS_PATH",
]

Category = Literal["simple", "compound", "trap"]
CATEGORIES: tuple[Category, ...] = ("simple", "compound", "trap")
DEMO_TASKS_PATH = Path(__file__).with_name("demo_tasks.jsonl")
"""The task set of the demo tenant (``switchboard/seed.py``'s FAQ, catalog, orders and stores)."""

REFUSAL_RE = re.compile(
    r"\b(can(no|')t|cannot|unable|not able|don'?t (know|have)|do not (know|have)|no information|not sure"
    r"|couldn'?t find|could not find|found nothing|nothing about|not (available|something i)|sorry"
    r"|pass (you|your conversation) to a person|a person (from our team )?will|not allowed|can't share)\b",
    re.IGNORECASE,
)
_NUMBER = re.compile(r"(?<![\w.])-?\d+(?:[.,]\d+)?")


class _Check(BaseModel):
    model_config = ConfigDict(extra="forbid")


class ContainsCheck(_Check):
    type: Literal["contains"]
    values: list[str] = Field(min_length=1)


class NumericCheck(_Check):
    type: Literal["numeric"]
    value: float
    tolerance: float = Field(0.01, ge=0)


class RefusalCheck(_Check):
    type: Literal["refusal"]


class ToolCalledCheck(_Check):
    type: Literal["tool_called"]
    name: str
    arguments: dict[str, Any] = Field(default_factory=dict)


class HandoffCheck(_Check):
    type: Literal["handoff"]


Check = Annotated[
    ContainsCheck | NumericCheck | RefusalCheck | ToolCalledCheck | HandoffCheck, Field(discriminator="type")
]


class EvalTask(BaseModel):
    """One task of a task file."""

    model_config = ConfigDict(extra="forbid")

    id: str = Field(min_length=1, max_length=80)
    category: Category
    text: str = Field(min_length=1, max_length=10_000)
    customer: str | None = Field(None, max_length=255)
    checks: list[Check] = Field(min_length=1)


class TasksRejected(ValueError):
    """A task file line is not a valid task (the message names the line)."""


def load_tasks(path: Path) -> list[EvalTask]:
    """The tasks of a JSONL file (blank lines and ``#`` comment lines skipped).

    Raises:
        TasksRejected: a line is not JSON or not a task, or two tasks share an id.
        OSError: the file cannot be read.
    """
    tasks: list[EvalTask] = []
    adapter = TypeAdapter(EvalTask)
    for number, line in enumerate(path.read_text(encoding="utf-8").splitlines(), start=1):
        if not line.strip() or line.lstrip().startswith("#"):
            continue
        try:
            tasks.append(adapter.validate_python(json.loads(line)))
        except (json.JSONDecodeError, ValidationError) as exc:
            raise TasksRejected(f"{path}:{number}: not a valid task: {str(exc).splitlines()[0]}") from exc
    ids = [t.id for t in tasks]
    if len(set(ids)) != len(ids):
        raise TasksRejected(f"{path}: task ids repeat: {sorted({i for i in ids if ids.count(i) > 1})}")
    if not tasks:
        raise TasksRejected(f"{path}: no tasks")
    return tasks


@dataclass
class Observation:
    """What one run of a task produced (the agent's turn or the pipeline's)."""

    reply: str
    tool_calls: list[dict[str, Any]] = field(default_factory=list)
    """``[{"name", "arguments": dict | None}]`` in call order (``None``: arguments were not JSON)."""
    handed_off: bool = False
    blocked: bool = False
    """A guardrail stopped the turn (its redirect is a refusal)."""


def is_refusal(observation: Observation) -> bool:
    """The reply declines or says it does not know, a guardrail blocked the turn, or the conversation
    went to a person."""
    return observation.handed_off or observation.blocked or bool(REFUSAL_RE.search(observation.reply))


def _numbers(text: str) -> list[float]:
    return [float(m.replace(",", ".")) for m in _NUMBER.findall(text)]


def _arguments_match(wanted: dict[str, Any], got: dict[str, Any] | None) -> bool:
    if got is None:
        return False
    return all(str(got.get(k, "")).strip().lower() == str(v).strip().lower() for k, v in wanted.items())


def run_checks(task: EvalTask, observation: Observation) -> list[dict[str, Any]]:
    """``[{"type", "passed", "detail"}]``, one per check of ``task``."""
    reply = observation.reply or ""
    out: list[dict[str, Any]] = []
    for check in task.checks:
        if isinstance(check, ContainsCheck):
            missing = [v for v in check.values if v.lower() not in reply.lower()]
            out.append(
                {"type": check.type, "passed": not missing, "detail": f"missing {missing}" if missing else ""}
            )
        elif isinstance(check, NumericCheck):
            near = [n for n in _numbers(reply) if abs(n - check.value) <= check.tolerance]
            out.append(
                {"type": check.type, "passed": bool(near), "detail": f"want {check.value}±{check.tolerance}"}
            )
        elif isinstance(check, RefusalCheck):
            out.append({"type": check.type, "passed": is_refusal(observation), "detail": ""})
        elif isinstance(check, ToolCalledCheck):
            hit = any(
                c["name"] == check.name and _arguments_match(check.arguments, c.get("arguments"))
                for c in observation.tool_calls
            )
            called = [c["name"] for c in observation.tool_calls]
            out.append({"type": check.type, "passed": hit, "detail": f"{check.name} wanted; called {called}"})
        else:
            out.append({"type": check.type, "passed": observation.handed_off, "detail": ""})
    return out
