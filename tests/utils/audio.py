"""Real audio files for tests, encoded with PyAV: a voice note in the containers phones and browsers
send (Ogg/Opus from WhatsApp, WebM/Opus from a browser), optionally carrying the offline model
server's transcript marker in its title tag (which survives conversion to WAV)."""

from __future__ import annotations

import io
import math
import struct

import av
from switchboard.standins.offline_server import TRANSCRIPT_MARKER

__all__ = ["voice_note"]


def voice_note(container: str = "ogg", *, transcript: str | None = None, seconds: float = 1.0) -> bytes:
    """A mono 48 kHz Opus tone of ``seconds`` in ``container`` (``ogg`` | ``webm``); with
    ``transcript``, the title tag reads ``SWITCHBOARD-TRANSCRIPT: <transcript>``."""
    rate = 48_000
    samples = int(seconds * rate)
    pcm = b"".join(
        struct.pack("<h", int(8_000 * math.sin(2 * math.pi * 440 * i / rate))) for i in range(samples)
    )
    buf = io.BytesIO()
    with av.open(buf, "w", format=container) as out:
        if transcript is not None:
            out.metadata["title"] = f"{TRANSCRIPT_MARKER.decode()} {transcript}"
        stream = out.add_stream("libopus", rate=rate, layout="mono")
        frame = av.AudioFrame(format="s16", layout="mono", samples=samples)
        frame.planes[0].update(pcm)
        frame.sample_rate = rate
        for packet in stream.encode(frame):
            out.mux(packet)
        for packet in stream.encode(None):
            out.mux(packet)
    return buf.getvalue()
