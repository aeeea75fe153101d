"""Input and output guardrails of a turn (docs/agent.md#guardrails): a score with its rationale, stored on the turn.

* :mod:`.settings`: the tenant's ``guardrails`` section (registered with
  :func:`~switchboard.tenant_settings.register_section`; on by default, each stage can be turned off).
* :mod:`.input`: :func:`check_input`, a model call before the turn (threshold, redirect or handoff,
  fail open or closed on checker failure).
* :mod:`.output`: :func:`check_output`, deterministic rules after the turn (system-prompt leak, tool
  internals, foreign contact data); a blocked reply is replaced.
* :mod:`.records`: :class:`GuardrailRecord`, what ``turns.guardrails`` holds per stage.

With the offline model server the input check is answered by its deterministic heuristic
(:mod:`switchboard.standins.offline_guard`) and the record's ``checker`` is ``offline_heuristic``.
"""

from typing import Any

from switchboard.guardrails.records import GuardrailRecord, GuardrailVerdict
from switchboard.guardrails.settings import GuardrailSettings, InputGuardrailSettings, OutputGuardrailSettings

__all__ = [
    "check_input",
    "check_output",
    "GuardrailRecord",
    "GuardrailVerdict",
    "GuardrailSettings",
    "InputGuardrailSettings",
    "OutputGuardrailSettings",
]


def __getattr__(name: str) -> Any:
    # the checks load on first use: every process imports .settings (tenant settings validation), and
    # .input pulls in the agent's prompt module and the model gateway
    if name == "check_input":
        from switchboard.guardrails.input import check_input

        return check_input
    if name == "check_output":
        from switchboard.guardrails.output import check_output

        return check_output
    raise AttributeError(name)
