"""A local stand-in for Google's OAuth and Gmail endpoints and the Pub/Sub push sender (demo, ``simulate
gmail``, tests). Mounted by the Gmail service at ``/_sandbox/gmail`` while ``GMAIL_API_BASE_URL`` is unset.

Google-shaped endpoints:

* ``GET /o/oauth2/auth`` (consent: redirects at once to ``redirect_uri?code=…&state=…``; the mailbox is
  ``login_hint`` or ``support@example.com``), ``POST /token`` (``authorization_code`` and
  ``refresh_token`` grants; ``{"error": "invalid_grant"}`` after a revoke), ``GET /oauth2/v1/certs``
  (the key the push sender signs its OIDC tokens with);
* ``/gmail/v1/users/me/``: ``profile``, ``history`` (404 ``notFound`` for a stale cursor),
  ``messages`` (``q=after:<epoch s>``), ``messages/{id}`` (``format=full``),
  ``messages/{id}/attachments/{id}``, ``messages/send`` (the sent mail gets label ``SENT`` and shows up
  in the history, as Gmail's does), ``watch``, ``stop``. A bearer token that was not issued, or has
  expired, gets 401.

Control endpoints (loopback clients only):

* ``POST /_control/deliver`` ``{"to", "from", "from_name"?, "subject", "text"?, "html"?, "headers"?,
  "thread_id"?, "attachments"?: [{"filename", "mime", "data_b64"}]}`` or ``{"to", "payload": <a
  messages.get answer>}``: a mail arrives (new id, a ``messagesAdded`` history record); with
  ``"push_url"`` a Pub/Sub push is posted there (OIDC-signed when ``"audience"`` is given, else the
  URL must carry its token). Answer ``{id, threadId, historyId, push_status}``.
* ``POST /_control/push`` ``{"email", "push_url", "audience"?, "message_id"?}``: only the push.
* ``GET /_control/sent?mailbox=&after=N``: recorded sends (headers decoded, text part, ``seq``).
* ``POST /_control/revoke`` / ``/_control/expire_tokens`` / ``/_control/stale`` ``{"email"}``: the
  refresh token stops working / access tokens expire / every older history id answers 404.
* ``POST /_control/page_size`` ``{"size"}``: history page size (pagination tests).

State survives a restart when the sandbox has a ``state_path`` (the Gmail service gives it
``DATA_DIR/gmail_sandbox.json``): mailboxes, codes, issued tokens, sends, the id counter and the push
signing key are written there (at most every :data:`SAVE_INTERVAL_S`, and on shutdown) and read back at
start. Without it the state is in memory only. Message ids grow from the start time in milliseconds, so
even a sandbox started without its file never hands out an id it gave before (the sync would skip a
reused id as a duplicate).
"""

from __future__ import annotations

import base64
import email
import email.policy
import json
import os
import secrets
import time
import uuid
from collections.abc import AsyncIterator
from contextlib import asynccontextmanager
from dataclasses import dataclass, field
from email.message import EmailMessage
from email.utils import formataddr, parseaddr
from pathlib import Path
from typing import Any
from urllib.parse import urlencode

import httpx
from fastapi import APIRouter, HTTPException, Request
from fastapi.responses import JSONResponse, RedirectResponse, Response

from switchboard.observability.logs import get_logger
from switchboard.standins.faults import require_control_access

__all__ = ["GmailSandbox", "sandbox_router", "DEFAULT_MAILBOX"]

DEFAULT_MAILBOX = "support@example.com"
ACCESS_TOKEN_TTL_S = 3599
SAVE_INTERVAL_S = 0.5  # at most two state writes a second under load; a later change is written then
STATE_VERSION = 1

log = get_logger(__name__)


def _b64url(data: bytes) -> str:
    return base64.urlsafe_b64encode(data).decode()


@dataclass
class SandboxMailbox:
    email: str
    messages: dict[str, dict[str, Any]] = field(default_factory=dict)
    history: list[dict[str, Any]] = field(default_factory=list)
    history_id: int = 9_876_500
    min_history_id: int = 0
    attachments: dict[str, bytes] = field(default_factory=dict)


@dataclass
class GmailSandbox:
    """In-memory state: mailboxes, issued tokens, recorded sends, the push signing key."""

    mailboxes: dict[str, SandboxMailbox] = field(default_factory=dict)
    codes: dict[str, str] = field(default_factory=dict)
    access_tokens: dict[str, tuple[str, float]] = field(default_factory=dict)
    refresh_tokens: dict[str, str] = field(default_factory=dict)
    token_requests: list[dict[str, str]] = field(default_factory=list)
    sent: list[dict[str, Any]] = field(default_factory=list)
    page_size: int | None = None
    state_path: Path | None = None
    """Where the state is kept across restarts (None: memory only)."""
    seq: int = field(default_factory=lambda: int(time.time() * 1000))
    """Next message sequence number; starts at the epoch in ms so ids never repeat across restarts."""
    _key: Any = None
    key_id: str = "sandbox-key-1"
    _last_save: float = 0.0
    _save_pending: Any = None

    def _tick(self) -> int:
        self.seq += 1
        return self.seq - 1

    # --- persistence ------------------------------------------------------------------------------
    def to_state(self) -> dict[str, Any]:
        """Everything a restart must keep, JSON-able (attachments base64url)."""
        from cryptography.hazmat.primitives import serialization

        key = None
        if self._key is not None:
            key = self._key.private_bytes(
                serialization.Encoding.PEM, serialization.PrivateFormat.PKCS8, serialization.NoEncryption()
            ).decode()
        return {
            "version": STATE_VERSION,
            "seq": self.seq,
            "key_pem": key,
            "codes": self.codes,
            "access_tokens": {t: [a, exp] for t, (a, exp) in self.access_tokens.items()},
            "refresh_tokens": self.refresh_tokens,
            "sent": self.sent,
            "mailboxes": {
                address: {
                    "messages": box.messages,
                    "history": box.history,
                    "history_id": box.history_id,
                    "min_history_id": box.min_history_id,
                    "attachments": {k: _b64url(v) for k, v in box.attachments.items()},
                }
                for address, box in self.mailboxes.items()
            },
        }

    @classmethod
    def load(cls, path: Path) -> GmailSandbox:
        """The sandbox kept at ``path``, or a new one that will keep its state there (no file yet, or a
        file that cannot be read: logged ``gmail_sandbox_state_unreadable``, then started afresh)."""
        sandbox = cls(state_path=path)
        try:
            data = json.loads(path.read_text())
        except FileNotFoundError:
            return sandbox
        except (OSError, ValueError) as exc:
            log.warning("gmail_sandbox_state_unreadable", path=str(path), error=str(exc))
            return sandbox
        if data.get("version") != STATE_VERSION:
            log.warning("gmail_sandbox_state_unreadable", path=str(path), error="unknown version")
            return sandbox
        sandbox.seq = max(int(data["seq"]), sandbox.seq)
        sandbox.codes = dict(data["codes"])
        sandbox.access_tokens = {t: (a, float(exp)) for t, (a, exp) in data["access_tokens"].items()}
        sandbox.refresh_tokens = dict(data["refresh_tokens"])
        sandbox.sent = list(data["sent"])
        for address, box in data["mailboxes"].items():
            sandbox.mailboxes[address] = SandboxMailbox(
                email=address,
                messages=box["messages"],
                history=box["history"],
                history_id=box["history_id"],
                min_history_id=box["min_history_id"],
                attachments={k: base64.urlsafe_b64decode(v) for k, v in box["attachments"].items()},
            )
        if data.get("key_pem"):
            from cryptography.hazmat.primitives import serialization

            sandbox._key = serialization.load_pem_private_key(data["key_pem"].encode(), password=None)
        return sandbox

    def save(self) -> None:
        """Write the state to ``state_path`` now (atomically: a temporary file renamed over it)."""
        if self._save_pending is not None:
            self._save_pending.cancel()
            self._save_pending = None
        if self.state_path is None:
            return
        self.state_path.parent.mkdir(parents=True, exist_ok=True)
        temporary = self.state_path.with_suffix(".tmp")
        temporary.write_text(json.dumps(self.to_state()))
        os.replace(temporary, self.state_path)
        self._last_save = time.monotonic()

    def changed(self) -> None:
        """Note a change: written now, or (when the last write is under :data:`SAVE_INTERVAL_S` old)
        once that interval has passed; either way on shutdown."""
        if self.state_path is None or self._save_pending is not None:
            return
        wait_s = self._last_save + SAVE_INTERVAL_S - time.monotonic()
        if wait_s <= 0:
            self.save()
            return
        import asyncio

        self._save_pending = asyncio.get_running_loop().call_later(wait_s, self.save)

    def mailbox(self, address: str) -> SandboxMailbox:
        address = address.strip().lower()
        if address not in self.mailboxes:
            self.mailboxes[address] = SandboxMailbox(email=address)
        return self.mailboxes[address]

    def _next_id(self) -> str:
        return f"{self._tick():016x}"  # 16 hex digits, as Gmail's

    # --- keys and pushes --------------------------------------------------------------------------
    def _private_key(self) -> Any:
        if self._key is None:
            from cryptography.hazmat.primitives.asymmetric import rsa

            self._key = rsa.generate_private_key(public_exponent=65537, key_size=2048)
        return self._key

    def public_pem(self) -> str:
        from cryptography.hazmat.primitives import serialization

        pem: bytes = (
            self._private_key()
            .public_key()
            .public_bytes(serialization.Encoding.PEM, serialization.PublicFormat.SubjectPublicKeyInfo)
        )
        return pem.decode()

    def oidc_token(
        self,
        audience: str,
        *,
        email_claim: str = "gmail-push@sandbox.iam.gserviceaccount.com",
        issuer: str = "https://accounts.google.com",
        lifetime_s: int = 3600,
    ) -> str:
        """A Google-shaped OIDC token signed with the sandbox key (what Pub/Sub push attaches)."""
        from cryptography.hazmat.primitives import serialization
        from google.auth import crypt
        from google.auth import jwt as google_jwt

        pem = self._private_key().private_bytes(
            serialization.Encoding.PEM, serialization.PrivateFormat.PKCS8, serialization.NoEncryption()
        )
        signer = crypt.RSASigner.from_string(pem, key_id=self.key_id)  # type: ignore[no-untyped-call]  # google-auth leaves it unannotated
        now = int(time.time())
        claims = {
            "iss": issuer,
            "aud": audience,
            "email": email_claim,
            "email_verified": True,
            "iat": now,
            "exp": now + lifetime_s,
            "sub": "1000000000000000000001",
        }
        token: bytes = google_jwt.encode(signer, claims)  # type: ignore[no-untyped-call]  # google-auth leaves it unannotated
        return token.decode()

    def push_body(self, address: str, message_id: str | None = None) -> dict[str, Any]:
        box = self.mailbox(address)
        data = json.dumps({"emailAddress": box.email, "historyId": box.history_id}).encode()
        mid = message_id or str(10_000_000_000_000 + self._tick())
        published = time.strftime("%Y-%m-%dT%H:%M:%S.000Z", time.gmtime())
        return {
            "message": {
                "data": base64.b64encode(data).decode(),
                "messageId": mid,
                "message_id": mid,
                "publishTime": published,
                "publish_time": published,
            },
            "subscription": "projects/sandbox/subscriptions/gmail-push",
        }

    # --- mail -------------------------------------------------------------------------------------
    def _add(self, box: SandboxMailbox, message: dict[str, Any]) -> dict[str, Any]:
        box.history_id += 1 + self._tick() % 3  # ids grow, not contiguously
        message["historyId"] = str(box.history_id)
        box.messages[message["id"]] = message
        box.history.append(
            {
                "id": str(box.history_id),
                "messages": [{"id": message["id"], "threadId": message["threadId"]}],
                "messagesAdded": [
                    {
                        "message": {
                            "id": message["id"],
                            "threadId": message["threadId"],
                            "labelIds": list(message.get("labelIds") or []),
                        }
                    }
                ],
            }
        )
        return message

    def _part(self, box: SandboxMailbox, part: Any, part_id: str) -> dict[str, Any]:
        headers = [{"name": k, "value": str(v)} for k, v in part.items()]
        if part.is_multipart():
            children = [
                self._part(box, child, f"{part_id}.{i}" if part_id else str(i))
                for i, child in enumerate(part.get_payload())
            ]
            return {
                "partId": part_id,
                "mimeType": part.get_content_type(),
                "filename": "",
                "headers": headers,
                "body": {"size": 0},
                "parts": children,
            }
        data = part.get_payload(decode=True) or b""
        filename = part.get_filename() or ""
        body: dict[str, Any] = {"size": len(data)}
        if filename:
            attachment_id = "ANGjdJ" + secrets.token_urlsafe(24)
            box.attachments[attachment_id] = data
            body["attachmentId"] = attachment_id
        else:
            body["data"] = _b64url(data)
        return {
            "partId": part_id,
            "mimeType": part.get_content_type(),
            "filename": filename,
            "headers": headers,
            "body": body,
        }

    def add_mime(
        self, address: str, mime: EmailMessage | Any, *, labels: list[str], thread_id: str | None = None
    ) -> dict[str, Any]:
        """Store an RFC 5322 message in ``address``'s mailbox as Gmail would (new id, history record)."""
        box = self.mailbox(address)
        gmail_id = self._next_id()
        thread = thread_id or self._thread_of(box, mime) or gmail_id
        payload = self._part(box, mime, "")
        text = ""
        for part in mime.walk():
            if part.get_content_type() == "text/plain" and not part.get_filename():
                text = part.get_content() if hasattr(part, "get_content") else str(part.get_payload())
                break
        message = {
            "id": gmail_id,
            "threadId": thread,
            "labelIds": labels,
            "snippet": " ".join(text.split())[:200],
            "sizeEstimate": len(mime.as_bytes()),
            "internalDate": str(int(time.time() * 1000)),
            "payload": payload,
        }
        return self._add(box, message)

    def _thread_of(self, box: SandboxMailbox, mime: Any) -> str | None:
        """Gmail's threading: a message whose References/In-Reply-To name a stored Message-ID joins its thread."""
        wanted = set(str(mime.get("References", "")).split()) | set(str(mime.get("In-Reply-To", "")).split())
        for stored in box.messages.values():
            for header in stored["payload"].get("headers") or []:
                if header["name"].lower() == "message-id" and header["value"] in wanted:
                    return str(stored["threadId"])
        return None

    def deliver(self, spec: dict[str, Any]) -> dict[str, Any]:
        """A mail arrives (control endpoint ``deliver``; module docstring)."""
        to = str(spec.get("to") or DEFAULT_MAILBOX).lower()
        box = self.mailbox(to)
        if isinstance(spec.get("payload"), dict):
            message = json.loads(json.dumps(spec["payload"]))
            if not spec.get("keep_ids"):
                old_id = message.get("id")
                message["id"] = self._next_id()
                if message.get("threadId") in (None, old_id):
                    message["threadId"] = message["id"]
            message["internalDate"] = str(spec.get("internal_date_ms") or int(time.time() * 1000))
            for part in _walk(message.get("payload") or {}):
                body = part.get("body") or {}
                if body.get("attachmentId"):
                    box.attachments.setdefault(str(body["attachmentId"]), b"%PDF-1.4 sandbox attachment")
            return self._add(box, message)
        mime = EmailMessage()
        mime["From"] = (
            formataddr((spec.get("from_name"), spec["from"])) if spec.get("from_name") else spec["from"]
        )
        mime["To"] = to
        mime["Subject"] = spec.get("subject") or ""
        mime["Message-ID"] = spec.get("message_id") or f"<{uuid.uuid4().hex}@{spec['from'].split('@')[-1]}>"
        mime["Date"] = email.utils.formatdate(localtime=False)
        for name, value in (spec.get("headers") or {}).items():
            mime[name] = value
        if spec.get("html") and not spec.get("text"):
            mime.set_content(spec["html"], subtype="html")
        else:
            mime.set_content(spec.get("text") or "")
            if spec.get("html"):
                mime.add_alternative(spec["html"], subtype="html")
        for attachment in spec.get("attachments") or []:
            maintype, _, subtype = str(attachment.get("mime") or "application/octet-stream").partition("/")
            mime.add_attachment(
                base64.b64decode(attachment["data_b64"]),
                maintype=maintype,
                subtype=subtype,
                filename=attachment["filename"],
            )
        return self.add_mime(to, mime, labels=["INBOX", "UNREAD"], thread_id=spec.get("thread_id"))

    def record_send(self, address: str, raw: str, thread_id: str | None) -> dict[str, Any]:
        data = base64.urlsafe_b64decode(raw + "=" * (-len(raw) % 4))
        mime = email.message_from_bytes(data, policy=email.policy.default)
        stored = self.add_mime(address, mime, labels=["SENT"], thread_id=thread_id)
        text = html = ""
        for part in mime.walk():
            if part.get_content_type() == "text/plain" and not text:
                text = part.get_content()
            elif part.get_content_type() == "text/html" and not html:
                html = part.get_content()
        record = {
            "seq": len(self.sent) + 1,
            "id": stored["id"],
            "threadId": stored["threadId"],
            "requested_thread_id": thread_id,
            "mailbox": address,
            "to": parseaddr(str(mime.get("To", "")))[1],
            "headers": {k: str(v) for k, v in mime.items()},
            "text": text.strip(),
            "html": html,
            "raw": raw,
            "at": time.time(),
        }
        self.sent.append(record)
        return stored


def _walk(part: dict[str, Any]) -> Any:
    yield part
    for child in part.get("parts") or []:
        yield from _walk(child)


def _gerror(status: int, reason: str, message: str) -> JSONResponse:
    return JSONResponse(
        {
            "error": {
                "code": status,
                "message": message,
                "errors": [{"message": message, "domain": "global", "reason": reason}],
                "status": {401: "UNAUTHENTICATED", 404: "NOT_FOUND"}.get(status, "FAILED_PRECONDITION"),
            }
        },
        status_code=status,
    )


async def post_push(
    state: GmailSandbox,
    *,
    email_address: str,
    push_url: str,
    audience: str | None,
    message_id: str | None = None,
) -> int:
    """POST a Pub/Sub push for ``email_address`` to ``push_url``; returns the HTTP status."""
    headers = {"Content-Type": "application/json"}
    if audience:
        headers["Authorization"] = f"Bearer {state.oidc_token(audience)}"
    async with httpx.AsyncClient(timeout=10.0) as client:
        response = await client.post(
            push_url, json=state.push_body(email_address, message_id), headers=headers
        )
    return response.status_code


def sandbox_router(
    sandbox: GmailSandbox | None = None, *, admin_token: str | None = None, state_path: Path | None = None
) -> APIRouter:
    """Router to mount at ``/_sandbox/gmail`` (state in ``sandbox``; else the one kept at ``state_path``,
    else a new in-memory one).

    Args:
        admin_token: when set, the ``/_control`` endpoints also need ``Authorization: Bearer <admin_token>``
            (they always answer loopback clients only: :func:`~switchboard.standins.faults.require_control_access`).
        state_path: a JSON file the state survives restarts in (the Gmail service: ``DATA_DIR/gmail_sandbox.json``);
            written after changes and when the app shuts down.
    """
    state = sandbox or (GmailSandbox.load(state_path) if state_path is not None else GmailSandbox())

    @asynccontextmanager
    async def lifespan(_app: Any) -> AsyncIterator[None]:
        yield
        if state.state_path is not None:
            state.save()  # a change still waiting for its interval

    router = APIRouter(prefix="/_sandbox/gmail", tags=["sandbox"], include_in_schema=False, lifespan=lifespan)
    router.sandbox = state  # type: ignore[attr-defined]

    def mailbox_of(request: Request) -> SandboxMailbox:
        header = request.headers.get("authorization", "")
        token = header.split(" ", 1)[1] if header.lower().startswith("bearer ") else ""
        found = state.access_tokens.get(token)
        if found is None or found[1] < time.time():
            raise HTTPException(status_code=401, detail="invalid credentials")
        return state.mailbox(found[0])

    # --- OAuth ---------------------------------------------------------------------------------------
    @router.get("/o/oauth2/auth")
    async def consent(request: Request) -> Response:
        params = request.query_params
        code = "4/SANDBOX-" + secrets.token_urlsafe(16)
        state.codes[code] = (params.get("login_hint") or DEFAULT_MAILBOX).lower()
        state.changed()
        query = urlencode({"code": code, "state": params.get("state", ""), "scope": params.get("scope", "")})
        return RedirectResponse(f"{params.get('redirect_uri')}?{query}", status_code=302)

    @router.post("/token")
    async def token(request: Request) -> Response:
        form = dict((await request.form()).items())
        state.token_requests.append({k: str(v) for k, v in form.items() if k != "client_secret"})
        grant = form.get("grant_type")
        if grant == "authorization_code":
            address = state.codes.pop(str(form.get("code")), None)
            if address is None:
                return JSONResponse(
                    {"error": "invalid_grant", "error_description": "Malformed auth code."}, 400
                )
            refresh = "1//SANDBOX-" + secrets.token_urlsafe(24)
            state.refresh_tokens[refresh] = address
        elif grant == "refresh_token":
            refresh = str(form.get("refresh_token"))
            address = state.refresh_tokens.get(refresh)
            if address is None:
                return JSONResponse(
                    {"error": "invalid_grant", "error_description": "Token has been expired or revoked."}, 400
                )
        else:
            return JSONResponse({"error": "unsupported_grant_type"}, 400)
        access = "ya29.SANDBOX-" + secrets.token_urlsafe(24)
        state.access_tokens[access] = (address, time.time() + ACCESS_TOKEN_TTL_S)
        state.changed()
        body = {
            "access_token": access,
            "expires_in": ACCESS_TOKEN_TTL_S,
            "token_type": "Bearer",
            "scope": "https://www.googleapis.com/auth/gmail.modify https://www.googleapis.com/auth/gmail.send",
        }
        if grant == "authorization_code":
            body["refresh_token"] = refresh
        return JSONResponse(body)

    @router.get("/oauth2/v1/certs")
    async def certs() -> dict[str, str]:
        pem = state.public_pem()
        state.changed()  # the key may be new: pushes signed after a restart must verify against it
        return {state.key_id: pem}

    # --- Gmail API -----------------------------------------------------------------------------------
    @router.get("/gmail/v1/users/me/profile")
    async def profile(request: Request) -> dict[str, Any]:
        box = mailbox_of(request)
        return {
            "emailAddress": box.email,
            "messagesTotal": len(box.messages),
            "threadsTotal": 0,
            "historyId": str(box.history_id),
        }

    @router.get("/gmail/v1/users/me/history")
    async def history(
        request: Request, startHistoryId: str, pageToken: str | None = None, maxResults: int = 100
    ) -> Response:  # noqa: N803 (Gmail's parameter names)
        box = mailbox_of(request)
        try:
            start = int(startHistoryId)
        except ValueError:
            return _gerror(400, "invalidArgument", "Invalid startHistoryId")
        if start <= 0 or start < box.min_history_id:
            return _gerror(404, "notFound", "Requested entity was not found.")
        records = [r for r in box.history if int(r["id"]) > start]
        size = state.page_size or maxResults
        offset = int(pageToken or 0)
        page = records[offset : offset + size]
        body: dict[str, Any] = {"historyId": str(box.history_id)}
        if page:
            body["history"] = page
        if offset + size < len(records):
            body["nextPageToken"] = str(offset + size)
        return JSONResponse(body)

    @router.get("/gmail/v1/users/me/messages")
    async def list_messages(
        request: Request, q: str = "", pageToken: str | None = None, maxResults: int = 100
    ) -> dict[str, Any]:  # noqa: N803
        box = mailbox_of(request)
        after_ms = 0
        for word in q.split():
            if word.startswith("after:") and word[6:].isdigit():
                after_ms = int(word[6:]) * 1000
        found = sorted(
            (m for m in box.messages.values() if int(m.get("internalDate") or 0) >= after_ms),
            key=lambda m: int(m.get("internalDate") or 0),
            reverse=True,
        )
        offset = int(pageToken or 0)
        page = found[offset : offset + maxResults]
        body: dict[str, Any] = {"resultSizeEstimate": len(found)}
        if page:
            body["messages"] = [{"id": m["id"], "threadId": m["threadId"]} for m in page]
        if offset + maxResults < len(found):
            body["nextPageToken"] = str(offset + maxResults)
        return body

    @router.get("/gmail/v1/users/me/messages/{message_id}")
    async def get_message(request: Request, message_id: str) -> Response:
        box = mailbox_of(request)
        message = box.messages.get(message_id)
        if message is None:
            return _gerror(404, "notFound", "Requested entity was not found.")
        return JSONResponse(message)

    @router.get("/gmail/v1/users/me/messages/{message_id}/attachments/{attachment_id}")
    async def get_attachment(request: Request, message_id: str, attachment_id: str) -> Response:
        box = mailbox_of(request)
        data = box.attachments.get(attachment_id)
        if data is None or message_id not in box.messages:
            return _gerror(404, "notFound", "Requested entity was not found.")
        return JSONResponse({"size": len(data), "data": _b64url(data)})

    @router.post("/gmail/v1/users/me/messages/send")
    async def send(request: Request) -> Response:
        box = mailbox_of(request)
        body = await request.json()
        if not body.get("raw"):
            return _gerror(
                400,
                "invalidArgument",
                "'raw' RFC822 payload message string or uploading message via /upload/* URL required",
            )
        stored = state.record_send(box.email, str(body["raw"]), body.get("threadId"))
        state.changed()
        return JSONResponse({"id": stored["id"], "threadId": stored["threadId"], "labelIds": ["SENT"]})

    @router.post("/gmail/v1/users/me/watch")
    async def watch(request: Request) -> dict[str, str]:
        box = mailbox_of(request)
        return {"historyId": str(box.history_id), "expiration": str(int((time.time() + 7 * 86_400) * 1000))}

    @router.post("/gmail/v1/users/me/stop")
    async def stop(request: Request) -> Response:
        mailbox_of(request)
        return Response(status_code=204)

    # --- control -------------------------------------------------------------------------------------
    @router.post("/_control/deliver")
    async def control_deliver(request: Request) -> dict[str, Any]:
        require_control_access(request, admin_token)
        spec = await request.json()
        message = state.deliver(spec)
        state.changed()
        push_status = None
        if spec.get("push_url"):
            push_status = await post_push(
                state,
                email_address=str(spec.get("to") or DEFAULT_MAILBOX),
                push_url=spec["push_url"],
                audience=spec.get("audience"),
            )
            state.changed()  # the signing key may be new
        return {
            "id": message["id"],
            "threadId": message["threadId"],
            "historyId": message["historyId"],
            "push_status": push_status,
        }

    @router.post("/_control/push")
    async def control_push(request: Request) -> dict[str, Any]:
        require_control_access(request, admin_token)
        spec = await request.json()
        status = await post_push(
            state,
            email_address=spec["email"],
            push_url=spec["push_url"],
            audience=spec.get("audience"),
            message_id=spec.get("message_id"),
        )
        state.changed()
        return {"status": status}

    @router.get("/_control/sent")
    async def control_sent(request: Request, mailbox: str | None = None, after: int = 0) -> dict[str, Any]:
        require_control_access(request, admin_token)
        sent = [
            s for s in state.sent if s["seq"] > after and (mailbox is None or s["mailbox"] == mailbox.lower())
        ]
        return {
            "messages": [{k: v for k, v in s.items() if k != "raw"} for s in sent],
            "last_seq": len(state.sent),
        }

    @router.post("/_control/revoke")
    async def control_revoke(request: Request) -> dict[str, int]:
        require_control_access(request, admin_token)
        address = str((await request.json())["email"]).lower()
        gone = [t for t, a in state.refresh_tokens.items() if a == address]
        for t in gone:
            del state.refresh_tokens[t]
        state.changed()
        return {"revoked": len(gone)}

    @router.post("/_control/expire_tokens")
    async def control_expire(request: Request) -> dict[str, int]:
        require_control_access(request, admin_token)
        address = str((await request.json())["email"]).lower()
        expired = [t for t, (a, _) in state.access_tokens.items() if a == address]
        for t in expired:
            state.access_tokens[t] = (address, 0.0)
        state.changed()
        return {"expired": len(expired)}

    @router.post("/_control/stale")
    async def control_stale(request: Request) -> dict[str, int]:
        require_control_access(request, admin_token)
        box = state.mailbox(str((await request.json())["email"]))
        box.min_history_id = box.history_id
        state.changed()
        return {"min_history_id": box.min_history_id}

    @router.post("/_control/page_size")
    async def control_page_size(request: Request) -> dict[str, Any]:
        require_control_access(request, admin_token)
        state.page_size = (await request.json()).get("size")
        return {"page_size": state.page_size}

    return router
