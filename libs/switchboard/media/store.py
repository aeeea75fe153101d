"""Our own copies of customers' media, for every channel whose links expire (Instagram CDN URLs;
Gmail attachments later): one place that downloads with a size limit, names by content, and reads back.

Storage is `obstore <https://developmental.github.io/obstore>`_: a folder
``DATA_DIR/media`` by default (``LocalStore``), an S3-compatible bucket with ``MEDIA_STORE_URL=s3://...``
(options from ``MEDIA_STORE_OPTIONS``), ``memory:///`` in a process. Keys are content-addressed,
``<namespace>/<sha256[:2]>/<sha256><ext>`` with a real extension from the sniffed type
(:mod:`switchboard.media.sniff`), so copying the same file twice (a retried job, two workers) writes the
same object. A stored file is referred to as ``store:<key>`` in a message's ``media[].ref``.
"""

from __future__ import annotations

import hashlib
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import httpx
import obstore
from obstore.store import LocalStore, from_url

from switchboard.egress import EgressPolicy, EgressRefused, guarded_client
from switchboard.errors import SwitchboardError
from switchboard.media.sniff import extension_for, sniff_mime
from switchboard.observability import get_logger
from switchboard.settings import Settings

__all__ = ["MediaStore", "MediaCopyFailed", "StoredMedia", "STORE_PREFIX", "is_stored", "key_of"]

log = get_logger(__name__)

STORE_PREFIX = "store:"
"""``media[].ref`` of a copy in our storage: ``store:<key>``."""


class MediaCopyFailed(SwitchboardError):
    """A file could not be copied or read.

    Attributes:
        is_transient: trying again later may work (network, 5xx); ``False`` for a dead link
            (4xx: the CDN URL expired), a file over the limit, or a missing object.
        reason: ``expired``, ``too_large``, ``http_<status>``, ``network``, ``missing``.
    """

    def __init__(self, message: str, *, is_transient: bool, reason: str) -> None:
        self.is_transient = is_transient
        self.reason = reason
        super().__init__(message)


@dataclass(frozen=True)
class StoredMedia:
    """One copied file."""

    key: str
    mime: str | None
    size_bytes: int
    sha256: str

    @property
    def ref(self) -> str:
        return STORE_PREFIX + self.key


def is_stored(ref: str | None) -> bool:
    """Whether a ``media[].ref`` names a copy in our storage."""
    return bool(ref) and str(ref).startswith(STORE_PREFIX)


def key_of(ref: str) -> str:
    """``store:<key>`` → ``<key>``."""
    return ref[len(STORE_PREFIX) :] if is_stored(ref) else ref


class MediaStore:
    """The configured object store (see the module docstring).

    Args:
        store: an obstore store; :meth:`from_settings` builds the configured one.
        max_bytes: largest file :meth:`copy_url` and :meth:`put` accept.
    """

    def __init__(self, store: Any, *, max_bytes: int) -> None:
        self.store = store
        self.max_bytes = max_bytes

    @classmethod
    def from_settings(cls, settings: Settings) -> MediaStore:
        """``MEDIA_STORE_URL`` (unset: ``DATA_DIR/media``) with ``MEDIA_STORE_OPTIONS``."""
        if settings.media_store_url:
            store = from_url(settings.media_store_url, config=settings.media_store_options or None)
        else:
            root = Path(settings.data_dir).resolve() / "media"
            root.mkdir(parents=True, exist_ok=True)
            store = LocalStore(root, mkdir=True)
        return cls(store, max_bytes=settings.media_max_bytes)

    async def put(
        self, data: bytes, *, namespace: str, mime: str | None = None, kind: str | None = None
    ) -> StoredMedia:
        """Store ``data`` under its content address; the MIME type is sniffed when not given (or generic).

        Raises:
            MediaCopyFailed: over :attr:`max_bytes` (``too_large``).
        """
        if len(data) > self.max_bytes:
            raise MediaCopyFailed(
                f"file of {len(data)} bytes is over {self.max_bytes}", is_transient=False, reason="too_large"
            )
        if not mime or mime == "application/octet-stream" or kind == "audio":
            mime = sniff_mime(data, kind=kind) or mime
        digest = hashlib.sha256(data).hexdigest()
        key = f"{namespace.strip('/')}/{digest[:2]}/{digest}{extension_for(mime)}"
        await obstore.put_async(self.store, key, data)
        return StoredMedia(key=key, mime=mime, size_bytes=len(data), sha256=digest)

    async def get(self, ref: str) -> bytes:
        """The bytes of ``store:<key>`` (or a bare key).

        Raises:
            MediaCopyFailed: no such object (``missing``).
        """
        try:
            result = await obstore.get_async(self.store, key_of(ref))
            return bytes(await result.bytes_async())
        except FileNotFoundError as exc:
            raise MediaCopyFailed(
                f"{ref}: not in media storage", is_transient=False, reason="missing"
            ) from exc

    async def write(self, key: str, data: bytes) -> None:
        """Store ``data`` under the fixed ``key`` (an export, not a customer's media: no size limit)."""
        await obstore.put_async(self.store, key, data)

    async def exists(self, key: str) -> bool:
        """Whether ``key`` is stored."""
        try:
            await obstore.head_async(self.store, key)
        except FileNotFoundError:
            return False
        return True

    async def delete(self, ref: str) -> None:
        """Delete ``store:<key>`` (or a bare key).

        Raises:
            MediaCopyFailed: no such object (``missing``).
        """
        try:
            await obstore.delete_async(self.store, key_of(ref))
        except FileNotFoundError as exc:
            raise MediaCopyFailed(
                f"{ref}: not in media storage", is_transient=False, reason="missing"
            ) from exc

    async def copy_url(
        self,
        http: httpx.AsyncClient,
        url: str,
        *,
        namespace: str,
        kind: str | None = None,
        mime: str | None = None,
        timeout_s: float = 15.0,
        egress: EgressPolicy | None = None,
    ) -> StoredMedia:
        """Download ``url`` (never more than :attr:`max_bytes`) and store it.

        Args:
            egress: the outbound-address policy the link (a provider handed it to us) and every
                redirect must pass, connected to pinned (:mod:`switchboard.egress`); ``None``: ``http``
                as it is (a test's own client).

        Raises:
            MediaCopyFailed: 4xx (``expired``: CDN links die), a file over the limit, the policy
                refused the address (``refused``), network trouble or a 5xx (transient).
        """
        client = http if egress is None else guarded_client(egress)
        try:
            async with client.stream("GET", url, timeout=timeout_s, follow_redirects=True) as response:
                if response.status_code >= 400:
                    transient = response.status_code >= 500 or response.status_code == 429
                    reason = f"http_{response.status_code}" if transient else "expired"
                    raise MediaCopyFailed(
                        f"download answered HTTP {response.status_code}",
                        is_transient=transient,
                        reason=reason,
                    )
                declared = response.headers.get("content-length", "")
                if declared.isdigit() and int(declared) > self.max_bytes:
                    raise MediaCopyFailed(
                        f"file of {declared} bytes is over {self.max_bytes}",
                        is_transient=False,
                        reason="too_large",
                    )
                chunks: list[bytes] = []
                size = 0
                async for chunk in response.aiter_bytes():
                    size += len(chunk)
                    if size > self.max_bytes:
                        raise MediaCopyFailed(
                            f"file is over {self.max_bytes} bytes", is_transient=False, reason="too_large"
                        )
                    chunks.append(chunk)
                served = response.headers.get("content-type")
        except EgressRefused as exc:
            log.warning("media_link_refused", error=str(exc))
            raise MediaCopyFailed(str(exc), is_transient=False, reason="refused") from None
        except httpx.HTTPError as exc:
            raise MediaCopyFailed(
                f"download failed: {type(exc).__name__}", is_transient=True, reason="network"
            ) from exc
        finally:
            if client is not http:
                await client.aclose()
        served_mime = (served or "").split(";", 1)[0].strip().lower() or None
        return await self.put(b"".join(chunks), namespace=namespace, mime=mime or served_mime, kind=kind)
