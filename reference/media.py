"""Small but real output files: a PNG, an MP4 video, a WAV, an agent-run JSON.

Outputs behind ``output_url`` must be files a client can open, not placeholders. Each is
generated from scratch with the standard library, a few hundred bytes, its content
derived from the prompt (so different prompts give different files):

- image: a 16x16 RGB PNG (signature, IHDR, one zlib IDAT, IEND, each chunk CRC'd);
- video: an ISO BMFF (MP4) file, ``ftyp`` + ``moov`` + ``mdat``, one video track of two
  16x16 uncompressed RGB frames at 2 frames/s (sample entry ``raw ``, the uncompressed
  codec of the QuickTime family that ISO BMFF readers such as ffmpeg accept); no encoder
  is needed, which keeps the reference free of native dependencies;
- audio: a 0.25 s mono 16-bit 8 kHz PCM WAV (a sine tone);
- agent: a JSON document describing the run.
"""

from __future__ import annotations

import hashlib
import json
import math
import struct
import zlib
from typing import Any

__all__ = ["CONTENT_TYPES", "EXTENSIONS", "render"]

#: File extension of each generation type's output.
EXTENSIONS = {"image": ".png", "video": ".mp4", "audio": ".wav", "agent": ".json"}
#: Content type served for each extension.
CONTENT_TYPES = {
    ".png": "image/png",
    ".mp4": "video/mp4",
    ".wav": "audio/wav",
    ".json": "application/json",
}

_SIDE = 16


def _seed(prompt: str) -> bytes:
    return hashlib.sha256(prompt.encode("utf-8")).digest()


def _frame(seed: bytes, shift: int) -> bytes:
    """A 16x16 RGB gradient whose colours come from the prompt hash."""
    r0, g0, b0 = seed[0], seed[1], seed[2]
    rows = []
    for y in range(_SIDE):
        row = bytearray()
        for x in range(_SIDE):
            row += bytes(((r0 + 8 * x + shift) % 256, (g0 + 8 * y) % 256, (b0 + shift) % 256))
        rows.append(bytes(row))
    return b"".join(rows)


def _png_chunk(kind: bytes, data: bytes) -> bytes:
    crc = zlib.crc32(kind + data) & 0xFFFFFFFF
    return struct.pack(">I", len(data)) + kind + data + struct.pack(">I", crc)


def png(prompt: str) -> bytes:
    """A valid 16x16 8-bit RGB PNG."""
    pixels = _frame(_seed(prompt), 0)
    stride = _SIDE * 3
    raw = b"".join(b"\x00" + pixels[y * stride : (y + 1) * stride] for y in range(_SIDE))
    ihdr = struct.pack(">IIBBBBB", _SIDE, _SIDE, 8, 2, 0, 0, 0)
    return (
        b"\x89PNG\r\n\x1a\n"
        + _png_chunk(b"IHDR", ihdr)
        + _png_chunk(b"IDAT", zlib.compress(raw, 9))
        + _png_chunk(b"IEND", b"")
    )


def wav(prompt: str) -> bytes:
    """A valid 0.25 s mono 16-bit PCM WAV at 8 kHz, a tone picked by the prompt."""
    rate, seconds = 8000, 0.25
    frequency = 220 + _seed(prompt)[0] * 2
    count = int(rate * seconds)
    samples = b"".join(
        struct.pack("<h", int(8000 * math.sin(2 * math.pi * frequency * n / rate)))
        for n in range(count)
    )
    fmt = struct.pack("<HHIIHH", 1, 1, rate, rate * 2, 2, 16)
    body = b"WAVE" + b"fmt " + struct.pack("<I", len(fmt)) + fmt
    body += b"data" + struct.pack("<I", len(samples)) + samples
    return b"RIFF" + struct.pack("<I", len(body)) + body


def _box(kind: bytes, *parts: bytes) -> bytes:
    payload = b"".join(parts)
    return struct.pack(">I", 8 + len(payload)) + kind + payload


def _full_box(kind: bytes, version: int, flags: int, *parts: bytes) -> bytes:
    return _box(kind, struct.pack(">I", (version << 24) | flags), *parts)


_MATRIX = struct.pack(">9I", 0x00010000, 0, 0, 0, 0x00010000, 0, 0, 0, 0x40000000)


def mp4(prompt: str) -> bytes:
    """A valid ISO BMFF (MP4) file: one 1 s video track of two uncompressed frames."""
    seed = _seed(prompt)
    frames = [_frame(seed, 0), _frame(seed, 96)]
    frame_size = len(frames[0])
    timescale, duration = 1000, 1000  # movie: 1 s
    ftyp = _box(b"ftyp", b"isom", struct.pack(">I", 0x200), b"isom", b"iso2", b"mp41")
    mvhd = _full_box(
        b"mvhd", 0, 0,
        struct.pack(">IIII", 0, 0, timescale, duration),
        struct.pack(">IH", 0x00010000, 0x0100), bytes(10), _MATRIX, bytes(24),
        struct.pack(">I", 2),
    )  # fmt: skip
    tkhd = _full_box(
        b"tkhd", 0, 3,
        struct.pack(">IIIII", 0, 0, 1, 0, duration), bytes(8),
        struct.pack(">hhhH", 0, 0, 0, 0), _MATRIX,
        struct.pack(">II", _SIDE << 16, _SIDE << 16),
    )  # fmt: skip
    mdhd = _full_box(b"mdhd", 0, 0, struct.pack(">IIIIHH", 0, 0, 2, 2, 0x55C4, 0))
    hdlr = _full_box(b"hdlr", 0, 0, struct.pack(">I", 0), b"vide", bytes(12), b"VideoHandler\0")
    vmhd = _full_box(b"vmhd", 0, 1, struct.pack(">HHHH", 0, 0, 0, 0))
    dinf = _box(b"dinf", _full_box(b"dref", 0, 0, struct.pack(">I", 1), _full_box(b"url ", 0, 1)))
    compressor = b"\x03raw".ljust(32, b"\0")
    sample_entry = _box(
        b"raw ",
        bytes(6), struct.pack(">H", 1),                 # reserved, data_reference_index
        bytes(16),                                      # pre_defined, reserved
        struct.pack(">HHII", _SIDE, _SIDE, 0x00480000, 0x00480000),
        bytes(4), struct.pack(">H", 1), compressor,     # reserved, frame_count, name
        struct.pack(">Hh", 24, -1),                     # depth, pre_defined
    )  # fmt: skip
    stsd = _full_box(b"stsd", 0, 0, struct.pack(">I", 1), sample_entry)
    stts = _full_box(b"stts", 0, 0, struct.pack(">III", 1, 2, 1))
    stsc = _full_box(b"stsc", 0, 0, struct.pack(">IIII", 1, 1, 2, 1))
    stsz = _full_box(b"stsz", 0, 0, struct.pack(">II", frame_size, 2))

    def moov_with(chunk_offset: int) -> bytes:
        stco = _full_box(b"stco", 0, 0, struct.pack(">II", 1, chunk_offset))
        stbl = _box(b"stbl", stsd, stts, stsc, stsz, stco)
        minf = _box(b"minf", vmhd, dinf, stbl)
        mdia = _box(b"mdia", mdhd, hdlr, minf)
        return _box(b"moov", mvhd, _box(b"trak", tkhd, mdia))

    # The chunk offset points into mdat, after ftyp and moov (whose size it does not change).
    offset = len(ftyp) + len(moov_with(0)) + 8
    mdat = _box(b"mdat", *frames)
    return ftyp + moov_with(offset) + mdat


def agent_result(generation_id: str, prompt: str, model: str) -> bytes:
    """The JSON document an agent run produces."""
    document: dict[str, Any] = {
        "generation_id": generation_id,
        "model": model,
        "prompt": prompt,
        "steps": [
            {"n": 1, "action": "plan", "output": "split the request into steps"},
            {"n": 2, "action": "act", "output": "carried out the plan"},
        ],
        "result": f"done: {prompt[:200]}",
    }
    return json.dumps(document, indent=2).encode("utf-8")


def render(kind: str, generation_id: str, prompt: str, model: str) -> bytes:
    """The output file of a generation of type ``kind``."""
    if kind == "image":
        return png(prompt)
    if kind == "video":
        return mp4(prompt)
    if kind == "audio":
        return wav(prompt)
    if kind == "agent":
        return agent_result(generation_id, prompt, model)
    raise ValueError(f"no output renderer for generation type {kind!r}")
