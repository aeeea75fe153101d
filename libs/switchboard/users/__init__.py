"""Console users, roles, sessions, API tokens and the login limit: a library the console pages and
the admin API both authenticate through (it imports neither).

* :mod:`~switchboard.users.accounts`: users, roles, argon2 passwords, sign-in, tenant access.
* :mod:`~switchboard.users.sessions`: server-side sessions and their CSRF tokens.
* :mod:`~switchboard.users.tokens`: per-user API tokens (``sbu_...``).
* :mod:`~switchboard.users.limits`: the login rate limit in Redis.
* :mod:`~switchboard.users.invites`: invitation links, turning accounts off and on.
* :mod:`~switchboard.users.mail`: invitation e-mails through the SMTP server of the settings.
"""

from switchboard.db.models import Role
from switchboard.password_policy import MIN_PASSWORD_CHARS, WeakPassword
from switchboard.users.accounts import (
    ROLE_WORDS,
    ROLES,
    UserExists,
    UserNotFound,
    authenticate,
    create_user,
    find_user,
    generate_password,
    hash_password,
    list_users,
    may_access_tenant,
    normalize_email,
    set_password,
    verify_password,
)
from switchboard.users.invites import (
    INVITABLE_ROLES,
    CannotDeactivateSelf,
    InviteNotFound,
    InviteProblem,
    InviteRefused,
    IssuedInvite,
    accept_invite,
    create_invite,
    invite_for_token,
    invite_path,
    pending_invites,
    resend_invite,
    revoke_invite,
    set_user_active,
)
from switchboard.users.limits import FLAGGED_ADDRESS_ATTEMPTS, LoginLimiter, LoginRefused
from switchboard.users.sessions import (
    CSRF_FIELD,
    CSRF_HEADER,
    SESSION_COOKIE,
    SessionInfo,
    csrf_matches,
    end_session,
    load_session,
    start_session,
)
from switchboard.users.tokens import (
    API_TOKEN_PREFIX,
    active_api_tokens,
    create_api_token,
    revoke_api_tokens,
    user_for_api_token,
)

__all__ = [
    "ROLES",
    "ROLE_WORDS",
    "Role",
    "SESSION_COOKIE",
    "CSRF_HEADER",
    "CSRF_FIELD",
    "API_TOKEN_PREFIX",
    "MIN_PASSWORD_CHARS",
    "WeakPassword",
    "UserExists",
    "UserNotFound",
    "LoginRefused",
    "LoginLimiter",
    "FLAGGED_ADDRESS_ATTEMPTS",
    "SessionInfo",
    "hash_password",
    "verify_password",
    "normalize_email",
    "create_user",
    "set_password",
    "find_user",
    "list_users",
    "authenticate",
    "start_session",
    "load_session",
    "end_session",
    "create_api_token",
    "active_api_tokens",
    "revoke_api_tokens",
    "user_for_api_token",
    "may_access_tenant",
    "csrf_matches",
    "generate_password",
    "INVITABLE_ROLES",
    "CannotDeactivateSelf",
    "InviteNotFound",
    "InviteProblem",
    "InviteRefused",
    "IssuedInvite",
    "accept_invite",
    "create_invite",
    "invite_for_token",
    "invite_path",
    "pending_invites",
    "resend_invite",
    "revoke_invite",
    "set_user_active",
]
