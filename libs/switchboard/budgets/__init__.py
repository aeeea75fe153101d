"""Per-tenant monthly model-spend budgets (docs/agent.md#budgets): the ``budget`` section and the spend check.

:func:`~switchboard.budgets.spend.budget_state` sums ``turns.cost_usd`` of the tenant's calendar month
(UTC) and says whether the turn runs normally, with a warning, or with the exceeded-budget action
(``cheaper_group`` or ``handoff``). The ``feedback`` section (the tenant app's feedback key) lives in
:mod:`.settings` too.
"""

from typing import Any

from switchboard.budgets.settings import BudgetSettings, FeedbackSettings

__all__ = ["BudgetSettings", "FeedbackSettings", "BudgetState", "budget_state", "month_start"]


def __getattr__(name: str) -> Any:
    if name in ("BudgetState", "budget_state", "month_start"):
        from switchboard.budgets import spend

        return getattr(spend, name)
    raise AttributeError(name)
