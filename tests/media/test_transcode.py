"""Audio in any container FFmpeg reads → 16 kHz mono WAV (:mod:`switchboard.media.transcode`)."""

from __future__ import annotations

import io

import av
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from switchboard.media.transcode import WAV_RATE_HZ, TranscodeFailed, to_wav

from tests.utils.audio import voice_note


@pytest.mark.parametrize("container", ["ogg", "webm"])
def test_an_opus_voice_note_becomes_16_khz_mono_wav_of_the_same_length(container):
    wav = to_wav(voice_note(container, transcript="quiero cambiar mi pedido", seconds=2.0))
    assert wav[:4] == b"RIFF" and wav[8:12] == b"WAVE"
    with av.open(io.BytesIO(wav)) as result:
        (stream,) = result.streams.audio
        assert (stream.rate, stream.layout.nb_channels, stream.codec_context.name) == (
            WAV_RATE_HZ,
            1,
            "pcm_s16le",
        )
        samples = sum(frame.samples for frame in result.decode(stream))
    # Opus pads its start (pre-skip): within 30 ms of the two seconds recorded
    assert abs(samples - 2 * WAV_RATE_HZ) <= 0.03 * WAV_RATE_HZ
    # the title tag travels with the audio (the offline model server's transcript marker is in it)
    assert b"SWITCHBOARD-TRANSCRIPT: quiero cambiar mi pedido" in wav


def test_long_audio_is_cut_at_the_limit():
    wav = to_wav(voice_note("ogg", seconds=3.0), max_seconds=1.0)
    with av.open(io.BytesIO(wav)) as result:
        samples = sum(frame.samples for frame in result.decode(result.streams.audio[0]))
    assert WAV_RATE_HZ <= samples < 1.2 * WAV_RATE_HZ


@pytest.mark.parametrize(
    "data",
    [
        b"",
        b"not audio at all",
        b"OggS" + b"\x00" * 200,
        b"\x1aE\xdf\xa3" + b"\xff" * 64,
        b"\x89PNG\r\n\x1a\n",
    ],
)
def test_what_is_not_decodable_audio_is_refused_in_words(data):
    with pytest.raises(TranscodeFailed):
        to_wav(data)


@settings(max_examples=60, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(data=st.binary(max_size=4_096))
def test_any_bytes_give_a_wav_or_transcode_failed_never_another_error(data):
    try:
        wav = to_wav(data)
    except TranscodeFailed:
        return
    assert wav[:4] == b"RIFF"
