"""Writes ROOT/{dark,light}/<i>.png, COUNT 32x32 RGB images per class, each its own colour (the
package test's tiny image_folder data set; tests/support/class_folders.h makes the same for the C++
tests with OpenCV). Python's standard library only: the package test needs no OpenCV or Pillow.

    dark_light_images.py ROOT COUNT
"""
import struct
import sys
import zlib
from pathlib import Path


def png(width: int, height: int, rgb: tuple) -> bytes:
    """A PNG file of one colour: 8-bit RGB, no interlace."""
    def chunk(kind: bytes, data: bytes) -> bytes:
        return struct.pack(">I", len(data)) + kind + data + struct.pack(">I", zlib.crc32(kind + data))
    row = b"\x00" + bytes(rgb) * width  # filter type 0 (none), then the pixels
    header = struct.pack(">IIBBBBB", width, height, 8, 2, 0, 0, 0)
    return (b"\x89PNG\r\n\x1a\n" + chunk(b"IHDR", header) + chunk(b"IDAT", zlib.compress(row * height))
            + chunk(b"IEND", b""))


def main() -> None:
    if len(sys.argv) != 3:
        sys.exit("usage: dark_light_images.py ROOT COUNT")
    root, count = Path(sys.argv[1]), int(sys.argv[2])
    for label, base in (("dark", 30), ("light", 200)):
        (root / label).mkdir(parents=True, exist_ok=True)
        for i in range(count):
            colour = (min(60 + 40 * i, 255), 90, min(base + 9 * i, 255))
            (root / label / f"{i}.png").write_bytes(png(32, 32, colour))


if __name__ == "__main__":
    main()
