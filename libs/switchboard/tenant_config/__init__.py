"""A tenant's settings as data: one public document (secrets write-only), validated saves, an audit trail.

Used by ``switchboard tenant settings show|set|edit|history``, the admin API
(``/v1/admin/tenants/{slug}/settings``) and the console's agent settings page.
"""

from switchboard.tenant_config.document import (
    SECRET_CHANGED,
    SECRET_NOT_SET,
    SECRET_SET,
    Problem,
    SettingsInvalid,
    all_sections,
    effective_document,
    merge_patch,
    overrides_document,
    prepare_settings,
    public_view,
    set_path,
)
from switchboard.tenant_config.service import (
    Source,
    assign_settings,
    list_settings_changes,
    patch_settings,
    save_settings,
)

__all__ = [
    "SECRET_CHANGED",
    "SECRET_NOT_SET",
    "SECRET_SET",
    "Problem",
    "SettingsInvalid",
    "Source",
    "all_sections",
    "assign_settings",
    "effective_document",
    "list_settings_changes",
    "merge_patch",
    "overrides_document",
    "patch_settings",
    "prepare_settings",
    "public_view",
    "save_settings",
    "set_path",
]
