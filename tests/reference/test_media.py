"""The output files are real files of their type (PNG, MP4, WAV, JSON)."""

from __future__ import annotations

import json
import struct
import zlib

import pytest

from reference import media


def png_chunks(data: bytes) -> list[tuple[bytes, bytes]]:
    """Parse a PNG, checking the signature and every chunk CRC."""
    assert data[:8] == b"\x89PNG\r\n\x1a\n"
    chunks, offset = [], 8
    while offset < len(data):
        (length,) = struct.unpack(">I", data[offset : offset + 4])
        kind = data[offset + 4 : offset + 8]
        body = data[offset + 8 : offset + 8 + length]
        (crc,) = struct.unpack(">I", data[offset + 8 + length : offset + 12 + length])
        assert crc == zlib.crc32(kind + body) & 0xFFFFFFFF, kind
        chunks.append((kind, body))
        offset += 12 + length
    return chunks


def assert_valid_png(data: bytes) -> None:
    chunks = png_chunks(data)
    kinds = [kind for kind, _ in chunks]
    assert kinds[0] == b"IHDR" and kinds[-1] == b"IEND" and b"IDAT" in kinds
    width, height, depth, colour = struct.unpack(">IIBB", chunks[0][1][:10])
    pixels = zlib.decompress(b"".join(body for kind, body in chunks if kind == b"IDAT"))
    # colour type 2 (RGB), 8 bits: one filter byte + 3 bytes per pixel per row.
    assert (depth, colour) == (8, 2)
    assert len(pixels) == height * (1 + 3 * width)


def mp4_boxes(data: bytes) -> dict[bytes, bytes]:
    """Top-level ISO BMFF boxes by type; sizes must tile the file exactly."""
    boxes, offset = {}, 0
    while offset < len(data):
        size, kind = struct.unpack(">I4s", data[offset : offset + 8])
        assert size >= 8 and offset + size <= len(data)
        boxes[kind] = data[offset + 8 : offset + size]
        offset += size
    assert offset == len(data)
    return boxes


def assert_valid_mp4(data: bytes) -> None:
    assert data[4:8] == b"ftyp"
    boxes = mp4_boxes(data)
    assert list(boxes)[:3] == [b"ftyp", b"moov", b"mdat"]
    assert boxes[b"ftyp"][:4] == b"isom"
    moov = boxes[b"moov"]
    assert b"mvhd" in moov and b"trak" in moov and b"vide" in moov
    # The chunk offset (stco) points at the first frame inside mdat.
    stco = moov[moov.index(b"stco") + 4 :]
    (_, count, chunk_offset) = struct.unpack(">III", stco[:12])
    assert count == 1
    assert data[chunk_offset - 8 : chunk_offset - 4] == struct.pack(">I", len(boxes[b"mdat"]) + 8)
    assert data[chunk_offset - 4 : chunk_offset] == b"mdat"
    (sample_size, samples) = struct.unpack(">II", moov[moov.index(b"stsz") + 8 :][:8])
    assert sample_size * samples == len(boxes[b"mdat"])


def assert_valid_wav(data: bytes) -> None:
    assert data[:4] == b"RIFF" and data[8:12] == b"WAVE"
    assert struct.unpack("<I", data[4:8])[0] == len(data) - 8
    assert data[12:16] == b"fmt "
    fmt, channels, rate, byte_rate, align, bits = struct.unpack("<HHIIHH", data[20:36])
    assert fmt == 1 and byte_rate == rate * channels * bits // 8 and align == channels * bits // 8
    assert data[36:40] == b"data"
    assert struct.unpack("<I", data[40:44])[0] == len(data) - 44 > 0


def test_png_is_valid() -> None:
    assert_valid_png(media.png("a red fox"))


def test_mp4_is_valid() -> None:
    assert_valid_mp4(media.mp4("a red fox"))


def test_wav_is_valid() -> None:
    assert_valid_wav(media.wav("a red fox"))


def test_agent_result_is_json() -> None:
    document = json.loads(media.agent_result("gen_1", "plan a trip", "agent-1"))
    assert document["generation_id"] == "gen_1" and document["steps"]


@pytest.mark.parametrize("kind", ["image", "video", "audio", "agent"])
def test_different_prompts_give_different_files(kind: str) -> None:
    assert media.render(kind, "g", "one", "m") != media.render(kind, "g", "two", "m")


def test_unknown_kind_is_refused() -> None:
    with pytest.raises(ValueError, match="no output renderer"):
        media.render("hologram", "g", "p", "m")
