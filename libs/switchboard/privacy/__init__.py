"""Customer data protection: erase one customer everywhere, export everything stored about them,
retention per tenant.

* :func:`~switchboard.privacy.erase.erase_customer` deletes or irreversibly anonymizes every row and
  media file holding a customer's data or words (resumable, idempotent; audited without personal data).
* :func:`~switchboard.privacy.export.export_customer` writes a ZIP with one JSON document and the
  customer's media files; :func:`~switchboard.privacy.export.sign_export` makes its expiring link.
* :mod:`switchboard.privacy.retention` deletes what is older than each tenant's retention settings.
"""

from __future__ import annotations

from switchboard.privacy.erase import CustomerNotFound, EraseReport, erase_customer, find_customer

__all__ = ["CustomerNotFound", "EraseReport", "erase_customer", "find_customer"]
