"""Audio in a container a provider refuses → 16 kHz mono WAV, which every transcription API takes.

WhatsApp voice notes are Ogg/Opus, browsers record WebM/Opus, phones send MP4/AAC or AMR; a
transcription model may accept some of these and answer ``400 Invalid file format`` to the rest.
:func:`to_wav` decodes whatever FFmpeg reads (PyAV bundles FFmpeg's libraries in its wheel, so no
system package is needed) and writes 16-bit PCM at 16 kHz, mono: the input rate of Whisper-family
models, about 32 KB per second of speech, far under any upload limit for a voice note.

The metadata (title, comment) of the container or its audio stream is copied to the WAV's INFO chunk: it carries no audio,
and the offline model server's test marker travels in it.
"""

from __future__ import annotations

import io

import av
import av.error

from switchboard.errors import SwitchboardError

__all__ = ["TranscodeFailed", "audio_seconds", "to_wav", "WAV_RATE_HZ", "MAX_SECONDS"]

WAV_RATE_HZ = 16_000
"""Sample rate of the WAV written (Hz): what Whisper-family models resample everything to."""
MAX_SECONDS = 600.0
"""Longest audio converted (seconds); the rest is cut. WhatsApp caps voice notes at 16 MB, about
an hour of Opus: a transcript of ten minutes is what a support agent can use."""


class TranscodeFailed(SwitchboardError):
    """The bytes are not audio FFmpeg can decode (no audio stream, a corrupt or unknown container)."""


def to_wav(data: bytes, *, max_seconds: float = MAX_SECONDS) -> bytes:
    """Decode ``data`` (any container and codec FFmpeg reads) into a 16 kHz mono 16-bit WAV.

    CPU-bound (about 20 ms per minute of Opus on one core): call it through ``asyncio.to_thread``.

    Raises:
        TranscodeFailed: nothing decodable, or no audio stream.
    """
    out_buf = io.BytesIO()
    written = 0
    limit = int(max_seconds * WAV_RATE_HZ)
    try:
        with av.open(io.BytesIO(data), mode="r") as source:
            if not source.streams.audio:
                raise TranscodeFailed("no audio stream")
            stream = source.streams.audio[0]
            with av.open(out_buf, mode="w", format="wav") as target:
                tags = {**stream.metadata, **source.metadata}  # Ogg keeps its tags on the stream
                for key in ("title", "comment"):
                    if key in tags:
                        target.metadata[key] = tags[key]
                out = target.add_stream("pcm_s16le", rate=WAV_RATE_HZ, layout="mono")
                resampler = av.AudioResampler(format="s16", layout="mono", rate=WAV_RATE_HZ)
                for frame in source.decode(stream):
                    for resampled in resampler.resample(frame):
                        if written >= limit:
                            break
                        written += resampled.samples
                        for packet in out.encode(resampled):
                            target.mux(packet)
                    if written >= limit:
                        break
                for resampled in resampler.resample(None):
                    for packet in out.encode(resampled):
                        target.mux(packet)
                for packet in out.encode(None):
                    target.mux(packet)
    except av.error.FFmpegError as exc:
        raise TranscodeFailed(f"{type(exc).__name__}: {exc}"[:300]) from exc
    if written == 0:
        raise TranscodeFailed("no audio samples")
    return out_buf.getvalue()


def audio_seconds(data: bytes) -> float | None:
    """The length of the audio in ``data`` in seconds, from the container's header (the stream's, else
    the container's duration; no decoding), ``None`` when the bytes do not say (not audio, or a
    container without a duration). Prices a transcription (per second of audio)."""
    try:
        with av.open(io.BytesIO(data), mode="r") as source:
            if not source.streams.audio:
                return None
            stream = source.streams.audio[0]
            if stream.duration is not None and stream.time_base is not None:
                return float(stream.duration * stream.time_base)
            if source.duration is not None:
                return float(source.duration) / av.time_base
    except (av.error.FFmpegError, ValueError, OSError):
        return None
    return None
