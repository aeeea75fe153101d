"""The console's login rate limit, in Redis.

Attempts are counted per e-mail (before the password is checked) and failures per client address
over a window; past the limit the login is refused with the wait in the message, unchecked. A busy
address never refuses an account that is not itself under attack.
"""

from __future__ import annotations

from redis.asyncio import Redis

from switchboard.errors import SwitchboardError
from switchboard.observability import get_logger
from switchboard.users.accounts import sha256_hex

__all__ = ["FLAGGED_ADDRESS_ATTEMPTS", "LoginLimiter", "LoginRefused"]

log = get_logger(__name__)

FLAGGED_ADDRESS_ATTEMPTS = 2
"""Attempts per e-mail and window still checked from an address past its failure limit (a typo and
its retry); further attempts on that e-mail from that address are refused unchecked."""


class LoginRefused(SwitchboardError):
    """Too many failed logins for this e-mail or from this address; ``retry_after_s`` says how long to wait."""

    def __init__(self, retry_after_s: int) -> None:
        self.retry_after_s = retry_after_s
        minutes = max(1, round(retry_after_s / 60))
        super().__init__(
            f"Too many failed sign-in attempts. Wait about {minutes} minute{'s' if minutes != 1 else ''} "
            "and try again."
        )


class LoginLimiter:
    """Login attempts per e-mail and failures per client address in Redis, over a fixed window.

    * Per e-mail (``max_attempts``): every attempt is counted atomically (``INCR`` in a transaction
      with the window's ``EXPIRE``) BEFORE its password is checked, so concurrent guesses cannot all
      be checked: of any number sent at once, at most ``max_attempts`` reach the password check. A
      correct password clears the count.
    * Per address (``max_attempts_per_ip``): failures only. An address past its limit does not refuse
      everyone behind it (a proxy, an office): from it, an e-mail with no attempt in the window still
      gets its password checked, but one that already has attempts in the window (an account under attack)
      is refused once it has :data:`FLAGGED_ADDRESS_ATTEMPTS` attempts (a typo and a retry still
      pass). A flood from one address therefore never locks out other users, while spraying guesses
      across accounts from it gets that many guesses per account per window.

    The address is ``request.client.host`` after the trusted-proxy rewrite
    done by the console service (setting ``forwarded_allow_ips``).

    Args:
        redis: any redis-py asyncio client (the service's ARQ pool).
        max_attempts: attempts allowed per e-mail in the window; more are refused unchecked.
        max_attempts_per_ip: failures per client address after which that address's attempts on
            accounts under attack are refused (several people may share one address).
        window_s: how long a key counts (seconds) from its first count.
    """

    def __init__(self, redis: Redis, *, max_attempts: int, max_attempts_per_ip: int, window_s: int) -> None:
        self.redis = redis
        self.max_attempts = max_attempts
        self.max_attempts_per_ip = max_attempts_per_ip
        self.window_s = window_s

    @staticmethod
    def _email_key(email: str) -> str:
        return f"console:login:email:{sha256_hex(email.strip().lower())}"

    @staticmethod
    def _ip_key(ip: str) -> str:
        return f"console:login:ip:{ip or 'unknown'}"

    async def _count(self, key: str) -> tuple[int, int]:
        """``INCR`` the key, starting its window when new; ``(count, ttl_s)`` in one transaction."""
        async with self.redis.pipeline(transaction=True) as pipe:
            pipe.set(key, 0, ex=self.window_s, nx=True)
            pipe.incr(key)
            pipe.ttl(key)
            _created, count, ttl = await pipe.execute()
        return int(count), int(ttl)

    async def attempt(self, *, email: str, ip: str) -> None:
        """Count this attempt for ``email`` before its password is checked.

        Raises:
            LoginRefused: the e-mail is past ``max_attempts`` in the window, or the address is past
                ``max_attempts_per_ip`` failures and the e-mail is past :data:`FLAGGED_ADDRESS_ATTEMPTS`.
        """
        ip_failures = int(await self.redis.get(self._ip_key(ip)) or 0)
        address_flagged = ip_failures >= self.max_attempts_per_ip
        count, ttl = await self._count(self._email_key(email))
        limit = min(FLAGGED_ADDRESS_ATTEMPTS, self.max_attempts) if address_flagged else self.max_attempts
        if count > limit:
            if address_flagged and count <= self.max_attempts:
                # refused for the address's sake: wait as long as the address's window lasts
                ttl = int(await self.redis.ttl(self._ip_key(ip)))
            log.warning(
                "console_login_rate_limited",
                key_kind="ip" if address_flagged and count <= self.max_attempts else "email",
                attempts=count,
                ip_failures=ip_failures,
            )
            raise LoginRefused(ttl if ttl > 0 else self.window_s)

    async def failed(self, *, ip: str) -> None:
        """Count one failure on the client address (the e-mail's attempt was counted already)."""
        await self._count(self._ip_key(ip))

    async def succeeded(self, *, email: str) -> None:
        """A correct login clears the e-mail's count (the address's stays: one address guessing many
        accounts)."""
        await self.redis.delete(self._email_key(email))
