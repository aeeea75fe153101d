"""What a file is, from its first bytes: for media that arrives without a (trustworthy) MIME type.

Instagram sends audio with no MIME type and a URL without an extension (``tests/fixtures/payloads/INDEX.md``);
transcription endpoints pick the decoder from the upload's file name (OpenAI's transcription API does), so the
container is read from the bytes. Signatures: ISO BMFF ``ftyp`` box at offset 4 (MP4/M4A/3GP/MOV,
ISO/IEC 14496-12), ``OggS`` (RFC 3533), EBML ``1A 45 DF A3`` (WebM/Matroska), ``RIFF....WAVE`` /
``RIFF....WEBP``, ``ID3`` or an MPEG audio frame sync (MP3), ADTS ``FFF1``/``FFF9`` (AAC),
``#!AMR``, ``fLaC``, JPEG ``FF D8 FF``, PNG, GIF, ``%PDF``.
"""

from __future__ import annotations

import mimetypes

__all__ = ["sniff_mime", "extension_for", "AUDIO_BRANDS"]

AUDIO_BRANDS = frozenset({b"M4A ", b"M4B ", b"M4P ", b"F4A ", b"F4B "})
"""``ftyp`` major brands that mean audio only."""

_EXTENSIONS = {
    "audio/mp4": ".m4a",
    "audio/ogg": ".ogg",
    "audio/opus": ".ogg",
    "audio/webm": ".webm",
    "audio/mpeg": ".mp3",
    "audio/aac": ".aac",
    "audio/wav": ".wav",
    "audio/amr": ".amr",
    "audio/flac": ".flac",
    "video/mp4": ".mp4",
    "video/quicktime": ".mov",
    "video/3gpp": ".3gp",
    "video/webm": ".webm",
    "image/jpeg": ".jpg",
    "image/png": ".png",
    "image/gif": ".gif",
    "image/webp": ".webp",
    "application/pdf": ".pdf",
}


def sniff_mime(data: bytes, *, kind: str | None = None) -> str | None:
    """The MIME type the bytes say, or ``None`` when they match no known signature.

    Args:
        data: the file, or at least its first 64 bytes.
        kind: what the message says it is (``audio``, ``video``...): an MP4 or WebM container sent
            as audio is ``audio/mp4`` / ``audio/webm`` (voice messages are MP4 without video).
    """
    head = data[:64]
    if len(head) >= 12 and head[4:8] == b"ftyp":
        brand = head[8:12]
        if brand in AUDIO_BRANDS or kind == "audio":
            return "audio/mp4"
        if brand == b"qt  ":
            return "video/quicktime"
        if brand.startswith(b"3g"):
            return "video/3gpp"
        return "video/mp4"
    if head.startswith(b"OggS"):
        return "audio/ogg"
    if head.startswith(b"\x1a\x45\xdf\xa3"):
        return "audio/webm" if kind == "audio" else "video/webm"
    if head.startswith(b"RIFF") and head[8:12] == b"WAVE":
        return "audio/wav"
    if head.startswith(b"RIFF") and head[8:12] == b"WEBP":
        return "image/webp"
    if head.startswith(b"#!AMR"):
        return "audio/amr"
    if head.startswith(b"fLaC"):
        return "audio/flac"
    if head.startswith(b"ID3"):
        return "audio/mpeg"
    if len(head) >= 2 and head[0] == 0xFF and head[1] in (0xF1, 0xF9):
        return "audio/aac"
    if len(head) >= 2 and head[0] == 0xFF and head[1] & 0xE0 == 0xE0:
        return "audio/mpeg"
    if head.startswith(b"\xff\xd8\xff"):
        return "image/jpeg"
    if head.startswith(b"\x89PNG\r\n\x1a\n"):
        return "image/png"
    if head.startswith((b"GIF87a", b"GIF89a")):
        return "image/gif"
    if head.startswith(b"%PDF-"):
        return "application/pdf"
    return None


def extension_for(mime: str | None) -> str:
    """A real file extension for ``mime`` (``audio/mp4`` → ``.m4a``; unknown → ``.bin``)."""
    base = (mime or "").split(";", 1)[0].strip().lower()
    return _EXTENSIONS.get(base) or (mimetypes.guess_extension(base) if base else None) or ".bin"
