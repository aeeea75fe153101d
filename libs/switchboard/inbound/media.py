"""Media → one line of text the agent can read (docs/concepts.md#the-message-path), the same for every channel.

The bytes come from the channel (:meth:`switchboard.channels.base.Channel.fetch_media`: WhatsApp
resolves a media id to a short-lived URL right before the download); what is done with them is here:

* audio →
  ``POST {TRANSCRIPTION_BASE_URL}/v1/audio/transcriptions`` (OpenAI shape) uploaded as ``voice.ogg`` /
  ``audio/ogg`` (MIME parameters stripped: ``.opus`` names are rejected by OpenAI's transcription API; audio without
  a type is sniffed from its bytes, :func:`switchboard.media.sniff_mime`, and named ``voice.m4a`` etc.) →
  ``[Audio transcription]: "..."``;
  A provider that refuses the container (``400``/``415`` saying the file format is invalid or
  unsupported: WebM/Opus, an Ogg a newer model no longer takes) gets the same audio once more as
  16 kHz mono WAV (:func:`switchboard.media.transcode.to_wav`); refused again, or not decodable, it
  is :class:`AudioNotUnderstood`: the inbound job tells the customer and hands the conversation to
  a person.
* image → ``POST {VISION_BASE_URL}/v1/chat/completions`` with a base64 data URL →
  ``[Image description]: "..."`` after the caption;
* video / document / sticker → the caption plus a line naming the file (no model call).

A tenant with transcription or vision deployments of its own (``llm.transcription``, ``llm.vision``;
for vision also its own chat deployments that take images) is served by them instead, through the model
gateway (:meth:`switchboard.llm.router.ModelGateway.transcribe` and ``complete``): its keys, its
fallback order, the turn's time budget, costs recorded (:class:`MediaModels`). Otherwise the
platform's endpoint below answers, as configured by the operator.

Without a provider key both endpoints default to the offline model server (``MODEL_SERVER_PORT``).
``OPENAI_API_KEY`` is sent only to OpenAI's own endpoint, never to ``TRANSCRIPTION_BASE_URL`` /
``VISION_BASE_URL`` pointing elsewhere (:mod:`switchboard.llm.keys`).
A transient failure (network, 5xx, or an expiring link that died before our copy of it was made)
raises :class:`MediaUnavailable` with ``is_transient=True`` (the job retries); a permanent one (expired media id, refused file) gives a bracketed notice instead, so
the customer still gets an answer.
"""

from __future__ import annotations

import asyncio
import base64
import re
import time
import uuid
from collections.abc import Awaitable, Callable
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any

import httpx

from switchboard.crypto import CredentialDecryptError
from switchboard.errors import SwitchboardError
from switchboard.llm.config import DeploymentSettings, LLMSettings, MediaKind
from switchboard.llm.costs import cheapest_group, group_name
from switchboard.llm.health import mark_failing, mark_healthy
from switchboard.llm.keys import choose_key, platform_key
from switchboard.media.sniff import extension_for, sniff_mime
from switchboard.media.store import is_stored
from switchboard.media.transcode import TranscodeFailed, audio_seconds, to_wav
from switchboard.observability import get_logger
from switchboard.settings import Settings

if TYPE_CHECKING:
    from switchboard.llm.router import ModelCallFailed, ModelGateway, ModelReply

__all__ = [
    "MediaCall",
    "MediaModels",
    "cost_by_kind",
    "MediaUnavailable",
    "AudioNotUnderstood",
    "media_to_text",
    "transcribe_any",
    "safe_filename",
    "upload_name",
    "MediaFetcher",
    "MEDIA_KINDS",
]

MEDIA_KINDS = ("image", "audio", "video", "document", "sticker")
"""Normalized message kinds that carry media refs."""
MediaFetcher = Callable[[str], Awaitable[tuple[bytes, str | None]]]
"""``ref`` → ``(bytes, served MIME type)``; raises :class:`MediaUnavailable`."""

VISION_PROMPT = (
    "Describe this image for a customer-support agent in one or two factual sentences "
    "(what it shows, any visible damage, text or numbers)."
)
OPENAI_ROOT = "https://api.openai.com"
"""OpenAI's official root, used when no ``*_BASE_URL`` is set and ``OPENAI_API_KEY`` is."""
MAX_MEDIA_BYTES = 25_000_000
"""Largest file sent to transcription (OpenAI's 25 MB upload limit; WhatsApp audio is at most 16 MB)."""


class MediaUnavailable(SwitchboardError):
    """Media could not be turned into text now.

    Attributes:
        is_transient: retrying later may work.
        reason: why, in a word the agent's notice names (``expired``, ``too_large``), when known.
    """

    def __init__(self, message: str, *, is_transient: bool, reason: str | None = None) -> None:
        self.is_transient = is_transient
        self.reason = reason
        super().__init__(message)


class AudioNotUnderstood(MediaUnavailable):
    """A voice message no transcription could read, even converted to WAV (permanent).

    Attributes:
        text: what the message reads as for the agent and the console (the caption, then a bracketed
            notice): stored on the message before the conversation goes to a person.
    """

    def __init__(self, message: str, *, text: str) -> None:
        self.text = text
        super().__init__(message, is_transient=False, reason="not_understood")


@dataclass(frozen=True)
class MediaCall:
    """One transcription or vision call a tenant's deployment answered."""

    kind: MediaKind
    deployment: str | None
    """``id`` of the deployment that answered."""
    cost_usd: float
    """Its price in USD (LiteLLM's cost map; 0 when unpriced)."""
    priced: bool


@dataclass
class MediaModels:
    """A tenant's model setup for reading media: the gateway, the tenant's ``llm`` settings (its
    ``transcription`` and ``vision`` lists), the time the reading may take, and the calls made.

    Attributes:
        deadline: ``time.monotonic()`` by which the media must be read (the turn's budget); ``None``:
            each call's own timeout (``MEDIA_TIMEOUT_S``).
        cheapest_only: the tenant's monthly budget is spent: only the cheapest group is called.
        calls: every call answered so far (the inbound job adds their cost to the turn's).
    """

    gateway: ModelGateway
    tenant_id: uuid.UUID
    llm: LLMSettings
    deadline: float | None = None
    trace_id: str = ""
    cheapest_only: bool = False
    calls: list[MediaCall] = field(default_factory=list)
    redis: Any = None
    """Where the tenant's model health is kept (:mod:`switchboard.llm.health`); ``None``: not recorded."""

    def deployments(self, kind: MediaKind) -> list[DeploymentSettings]:
        """The tenant's deployments for ``kind`` (empty: the platform's endpoint), only the cheapest
        group once the budget is spent."""
        chosen = self.gateway.media_deployments(self.llm, kind)
        if self.cheapest_only and chosen:
            group = cheapest_group(chosen)
            chosen = [d for d in chosen if group_name(d) == group]
        return chosen

    def deadline_for(self, own_s: float) -> float:
        """The monotonic deadline of one call whose own timeout is ``own_s`` (never past :attr:`deadline`)."""
        own = time.monotonic() + own_s
        return own if self.deadline is None else min(own, self.deadline)

    async def record_health(
        self, kind: MediaKind, deployments: list[DeploymentSettings], *, failed: bool
    ) -> None:
        """What one call says about the tenant's ``kind`` deployments, in the model health readout (the
        console's banner, the Platform page): every one failed (network, timeout, 5xx, 429) marks them
        failing as ``<kind>:<id>``; an answer marks them healthy. Never raises (logged)."""
        if self.redis is None:
            return
        names = [f"{kind}:{d.id}" for d in deployments]
        try:
            if failed:
                await mark_failing(self.redis, self.tenant_id, names)
            else:
                await mark_healthy(self.redis, self.tenant_id, names)
        except Exception as exc:  # noqa: BLE001 (a readout; logged)
            log.warning("model_health_not_recorded", error=f"{type(exc).__name__}: {exc}"[:300])


def cost_by_kind(calls: list[MediaCall]) -> dict[str, float]:
    """USD spent per kind (``{"transcription": 0.0002}``), kinds without a call left out."""
    totals: dict[str, float] = {}
    for call in calls:
        totals[call.kind] = round(totals.get(call.kind, 0.0) + call.cost_usd, 8)
    return totals


log = get_logger(__name__)

_FORMAT_WORDS = re.compile(r"format|unsupported|decod|codec|invalid file|could not be processed", re.I)
"""What a provider's 400 says when it refuses the file's container or codec (OpenAI: "Invalid file
format. Supported formats: [...]"; others: "unsupported media type", "could not decode audio")."""

_WHY = {
    "expired": "the link had expired",
    "too_large": "the file was too large",
    "missing": "the copy is gone",
    "not_understood": "the audio could not be understood",
}


_UNSAFE = re.compile(r"[^A-Za-z0-9._ -]+")


def safe_filename(name: str | None, fallback: str = "file") -> str:
    """A filesystem-safe version of a customer's file name (``"Receipt #1042 (copy).pdf"`` →
    ``"Receipt _1042 _copy_.pdf"``); the original is kept for display."""
    cleaned = _UNSAFE.sub("_", (name or "").strip()).strip(" .")[:120]
    return cleaned or fallback


def upload_name(mime: str | None) -> tuple[str, str]:
    """``(filename, content_type)`` for an upload: ``audio/ogg; codecs=opus`` → ``("voice.ogg", "audio/ogg")``."""
    base = (mime or "application/octet-stream").split(";", 1)[0].strip().lower()
    ext = {"audio/aac": ".m4a"}.get(base) or extension_for(base)
    return f"voice{ext}", base


def _endpoint(settings: Settings, override: str | None, *, what: str) -> tuple[str, dict[str, str]]:
    """``(base URL, headers)`` of a transcription or vision call. ``OPENAI_API_KEY`` goes only to OpenAI's
    own endpoint (:func:`switchboard.llm.keys.choose_key`), never to another ``*_BASE_URL``."""
    if override:
        base = override.rstrip("/")
    elif platform_key(settings, "openai") is not None:
        base = OPENAI_ROOT
    else:  # the offline model server: MODEL_SERVER_URL in containers, this machine's port otherwise
        base = settings.model_server_url.rstrip("/")
    key = choose_key(
        settings, provider="openai", api_base=base, stored_key=None, platform_default=True, what=what
    )
    return base, {"Authorization": f"Bearer {key}"} if key else {}


async def _post(http: httpx.AsyncClient, url: str, timeout_s: float, **kwargs: Any) -> dict[str, Any]:
    try:
        response = await http.post(url, timeout=timeout_s, **kwargs)
    except httpx.HTTPError as exc:
        raise MediaUnavailable(f"{url}: {type(exc).__name__}", is_transient=True) from exc
    if response.status_code >= 500 or response.status_code == 429:
        raise MediaUnavailable(f"{url}: HTTP {response.status_code}", is_transient=True)
    if response.status_code == 415 or (
        response.status_code == 400 and _FORMAT_WORDS.search(response.text[:2_000])
    ):
        raise MediaUnavailable(
            f"{url}: HTTP {response.status_code} (file format refused)", is_transient=False, reason="format"
        )
    if response.status_code >= 400:
        raise MediaUnavailable(f"{url}: HTTP {response.status_code}", is_transient=False)
    try:
        return response.json()
    except ValueError as exc:
        raise MediaUnavailable(f"{url}: not JSON", is_transient=False) from exc


def _status(error: BaseException) -> int | None:
    code = getattr(error, "status_code", None)
    return code if isinstance(code, int) else None


def _unavailable(exc: ModelCallFailed, *, what: str) -> MediaUnavailable:
    """Every deployment failed: a refused file format (a 400 saying so, or a 415) from any of them is
    ``reason="format"`` (the audio is converted and tried again); else transient when any failure was
    (network, timeout, 408, 429, 5xx); else permanent."""
    errors = exc.errors or [exc.error]
    detail = "; ".join(f.get("error", "") for f in exc.failed_deployments)[:500] or str(exc)[:300]
    for error in errors:
        status = _status(error)
        if status == 415 or (status == 400 and _FORMAT_WORDS.search(str(error)[:2_000])):
            return MediaUnavailable(
                f"{what}: file format refused ({detail})", is_transient=False, reason="format"
            )
    if any(_status(e) is None or _status(e) in (408, 429) or (_status(e) or 0) >= 500 for e in errors):
        return MediaUnavailable(f"{what}: {detail}", is_transient=True)
    return MediaUnavailable(f"{what}: {detail}", is_transient=False)


async def _call_models(
    models: MediaModels,
    kind: MediaKind,
    deployments: list[DeploymentSettings],
    call: Callable[[Any], Awaitable[ModelReply]],
) -> str:
    """``call(router)`` on the tenant's Router of ``deployments`` (fallback order inside the gateway),
    recorded: the call's cost in :attr:`MediaModels.calls`, the outcome in the model health readout.

    Raises:
        MediaUnavailable: a stored key cannot be read, or every deployment failed (:func:`_unavailable`).
    """
    from switchboard.llm.router import ModelCallFailed

    try:
        router = models.gateway.media_router(models.tenant_id, models.llm, deployments, kind)
    except CredentialDecryptError as exc:  # logged by the gateway with the deployment id
        raise MediaUnavailable(f"{kind}: a stored key cannot be read", is_transient=False) from exc
    try:
        reply = await call(router)
    except ModelCallFailed as exc:
        unavailable = _unavailable(exc, what=kind)
        await models.record_health(kind, deployments, failed=unavailable.is_transient)
        raise unavailable from exc
    await models.record_health(kind, deployments, failed=False)
    models.calls.append(MediaCall(kind, reply.model_id, reply.cost_usd, reply.priced))
    return (reply.content or "").strip()


async def _transcribe_with(
    models: MediaModels,
    deployments: list[DeploymentSettings],
    settings: Settings,
    data: bytes,
    mime: str | None,
) -> str:
    """Speech → text through the tenant's transcription deployments (fallback order, the deadline)."""
    name, content_type = upload_name(mime)
    seconds = await asyncio.to_thread(audio_seconds, data)  # prices the call (per second of audio)
    return await _call_models(
        models,
        "transcription",
        deployments,
        lambda router: models.gateway.transcribe(
            router,
            (name, data, content_type),
            llm=models.llm,
            trace_id=models.trace_id,
            deadline=models.deadline_for(settings.media_timeout_s),
            audio_seconds=seconds,
        ),
    )


async def transcribe(
    http: httpx.AsyncClient,
    settings: Settings,
    data: bytes,
    mime: str | None,
    models: MediaModels | None = None,
) -> str:
    """Speech → text: through the tenant's transcription deployments when ``models`` has some, else an
    OpenAI-compatible ``/v1/audio/transcriptions`` (the platform's ``TRANSCRIPTION_BASE_URL``).

    Raises:
        MediaUnavailable: the endpoint failed (``is_transient`` for network/5xx; ``reason="format"``
            when the file's format was refused).
    """
    deployments = models.deployments("transcription") if models is not None else []
    if models is not None and deployments:
        return await _transcribe_with(models, deployments, settings, data, mime)
    base, headers = _endpoint(settings, settings.transcription_base_url, what="transcription")
    name, content_type = upload_name(mime)
    body = await _post(
        http,
        f"{base}/v1/audio/transcriptions",
        settings.media_timeout_s,
        headers=headers,
        files={"file": (name, data, content_type)},
        data={"model": settings.transcription_model},
    )
    return str(body.get("text", "")).strip()


async def transcribe_any(
    http: httpx.AsyncClient,
    settings: Settings,
    data: bytes,
    mime: str | None,
    models: MediaModels | None = None,
) -> str:
    """:func:`transcribe`, and when the provider refuses the file's format, once more as 16 kHz mono WAV.

    Raises:
        MediaUnavailable: transient (network/5xx: retry later), or permanent for other refusals;
            ``reason="not_understood"`` when the audio was refused again as WAV or could not be decoded.
    """
    try:
        return await transcribe(http, settings, data, mime, models)
    except MediaUnavailable as exc:
        if exc.reason != "format":
            raise
        log.info("transcription_format_refused", mime=mime, size_bytes=len(data))
    try:
        wav = await asyncio.to_thread(to_wav, data)  # CPU-bound: off the event loop
    except TranscodeFailed as exc:
        raise MediaUnavailable(
            f"audio could not be decoded: {exc}", is_transient=False, reason="not_understood"
        ) from exc
    try:
        transcript = await transcribe(http, settings, wav, "audio/wav", models)
    except MediaUnavailable as exc:
        if exc.is_transient:
            raise
        raise MediaUnavailable(f"{exc} (also as WAV)", is_transient=False, reason="not_understood") from exc
    log.info("transcription_after_conversion", mime=mime, wav_bytes=len(wav))
    return transcript


VISION_MAX_TOKENS = 200
"""Longest description a vision call may write (tokens)."""


def _vision_messages(url: str) -> list[dict[str, Any]]:
    return [
        {
            "role": "user",
            "content": [
                {"type": "text", "text": VISION_PROMPT},
                {"type": "image_url", "image_url": {"url": url, "detail": "low"}},
            ],
        }
    ]


async def _describe_with(
    models: MediaModels, deployments: list[DeploymentSettings], settings: Settings, url: str
) -> str:
    """Image → words through the tenant's vision deployments (fallback order, the deadline)."""
    return await _call_models(
        models,
        "vision",
        deployments,
        lambda router: models.gateway.complete(
            router,
            _vision_messages(url),
            tools=None,
            llm=models.llm.model_copy(update={"max_output_tokens": VISION_MAX_TOKENS}),
            trace_id=models.trace_id,
            deadline=models.deadline_for(settings.media_timeout_s),
        ),
    )


async def describe_image(
    http: httpx.AsyncClient,
    settings: Settings,
    data: bytes,
    mime: str | None,
    models: MediaModels | None = None,
) -> str:
    """Image → one or two sentences: through the tenant's vision deployments when ``models`` has some,
    else an OpenAI-compatible ``/v1/chat/completions`` (the platform's ``VISION_BASE_URL``).

    Raises:
        MediaUnavailable: the endpoint failed.
    """
    url = f"data:{(mime or 'image/jpeg').split(';')[0]};base64,{base64.b64encode(data).decode()}"
    deployments = models.deployments("vision") if models is not None else []
    if models is not None and deployments:
        return await _describe_with(models, deployments, settings, url)
    base, headers = _endpoint(settings, settings.vision_base_url, what="vision")
    body = await _post(
        http,
        f"{base}/v1/chat/completions",
        settings.media_timeout_s,
        headers=headers,
        json={
            "model": settings.vision_model,
            "messages": _vision_messages(url),
            "max_tokens": VISION_MAX_TOKENS,
        },
    )
    try:
        return str(body["choices"][0]["message"]["content"] or "").strip()
    except (KeyError, IndexError, TypeError) as exc:
        raise MediaUnavailable(
            "vision answer without choices[0].message.content", is_transient=False
        ) from exc


def _quoted(text: str) -> str:
    return '"' + text.replace('"', "'") + '"'


async def media_to_text(
    *,
    kind: str,
    media: list[dict[str, Any]],
    caption: str,
    fetch: MediaFetcher,
    http: httpx.AsyncClient,
    settings: Settings,
    models: MediaModels | None = None,
) -> str:
    """The text the agent reads for a media message (caption first, then one bracketed line).

    Args:
        kind: ``audio`` | ``image`` | ``video`` | ``document`` | ``sticker``.
        media: stored media refs ``{ref, mime, filename?, caption?, voice?}``.
        caption: the customer's caption (may be empty).
        fetch: the channel's download of a media ref (at most :data:`MAX_MEDIA_BYTES`).
        models: the tenant's model setup (its own transcription and vision deployments, the deadline);
            ``None``: the platform's endpoints.

    Raises:
        MediaUnavailable: transient failure (the job should retry); permanent failures return a notice.
        AudioNotUnderstood: a voice message no transcription could read (its text in ``.text``).
    """
    lines = [caption.strip()] if caption.strip() else []
    ref = media[0] if media else {}
    label = "Voice message" if kind == "audio" else kind.capitalize()
    if ref.get("unavailable"):  # the copy at ingest failed for good (expired link, too large)
        why = _WHY.get(str(ref["unavailable"]), str(ref["unavailable"]))
        lines.append(f"[{label} received but could not be read: {why}]")
    elif kind in ("audio", "image") and ref.get("ref"):
        try:
            data, served_mime = await fetch(str(ref["ref"]))
            mime = ref.get("mime") or served_mime
            if not mime or mime == "application/octet-stream":  # Instagram audio comes without a type
                mime = sniff_mime(data, kind=kind) or mime
            if kind == "audio":
                lines.append(
                    f"[Audio transcription]: {_quoted(await transcribe_any(http, settings, data, mime, models))}"
                )
            else:
                lines.append(
                    f"[Image description]: {_quoted(await describe_image(http, settings, data, mime, models))}"
                )
        except MediaUnavailable as exc:
            if exc.is_transient:
                raise
            if exc.reason == "not_understood":
                lines.append(f"[{label} received but could not be read: {_WHY['not_understood']}]")
                raise AudioNotUnderstood(str(exc), text="\n".join(lines)) from exc
            if ref.get("expiring") and not is_stored(str(ref["ref"])):
                # The provider's link died before our copy job (media.jobs.copy_inbound_media) ran: by the
                # retry the row holds our copy, or the copy job's verdict (``unavailable``).
                raise MediaUnavailable(
                    f"{exc} (our copy of the expiring link is still pending)",
                    is_transient=True,
                    reason=exc.reason,
                ) from exc
            why = f": {_WHY.get(exc.reason, exc.reason)}" if exc.reason else ""
            lines.append(f"[{label} received but could not be read{why}]")
    elif kind in ("video", "document"):
        label = ref.get("filename") or ref.get("mime") or kind
        lines.append(f"[{kind.capitalize()} received: {label}]")
    return "\n".join(lines)
