"""Reading a user's text file (a case, a partition CSV, a TOML file, a learning CSV and its bounds, a profile table,
a cost file, a zone's load file): UTF-8, whatever the locale.

:func:`read_utf8` decodes the file as UTF-8 (a leading byte-order mark, as some editors write, is dropped),
independently of the locale (``LC_ALL=C`` would otherwise mean ASCII). A file that is not UTF-8 is refused
with the byte, the line and the column (:class:`NotUTF8`), not as "not a text file". :func:`read_csv_utf8` is
pandas' CSV reader on that text: every CSV a user hands powerdp goes through it, so every one is refused alike.
"""

from __future__ import annotations

import codecs
from pathlib import Path

__all__ = ["NotUTF8", "read_csv_utf8", "read_utf8"]


class NotUTF8(ValueError):
    """A file that is not UTF-8 text; the message names the first bad byte, its line and its column."""


def read_utf8(path: str | Path) -> str:
    """The text of ``path`` decoded as UTF-8 (a leading BOM dropped); :class:`NotUTF8` if it is not UTF-8.
    ``OSError`` (a missing or unreadable file) passes through."""
    return _decode(Path(path).read_bytes())


def _decode(data: bytes) -> str:
    if data.startswith(codecs.BOM_UTF8):
        data = data[len(codecs.BOM_UTF8):]
    try:
        return data.decode("utf-8")
    except UnicodeDecodeError as exc:
        at = exc.start
        line = data.count(b"\n", 0, at) + 1
        column = at - (data.rfind(b"\n", 0, at) + 1) + 1
        raise NotUTF8(f"not UTF-8 text: byte 0x{data[at]:02x} at line {line}, column {column} "
                      "(save the file as UTF-8)") from None


def read_csv_utf8(path: str | Path, **options):
    """``pandas.read_csv`` of the UTF-8 text of ``path`` (:func:`read_utf8`: :class:`NotUTF8` names the first byte
    that is not UTF-8, its line and column); ``options`` go to pandas. A ``.gz`` file is decompressed first."""
    import io

    import pandas as pd

    p = Path(path)
    if p.name.lower().endswith(".gz"):
        import gzip

        with gzip.open(p, "rb") as fh:
            data = fh.read()
        text = _decode(data)
    else:
        text = read_utf8(p)
    return pd.read_csv(io.StringIO(text), **options)
