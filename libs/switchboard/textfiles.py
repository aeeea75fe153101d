"""Reading text files that people export from spreadsheets and editors: encoding and CSV dialect.

Knowledge uploads (TXT, Markdown, CSV) and business-data imports (CSV) read files the same way:

* **encoding**: UTF-16 with a byte-order mark, else UTF-8 (with or without BOM), else Windows-1252,
  else Latin-1. Excel on Windows saves "CSV" in the ANSI code page, which in Western Europe and
  the Americas is cp1252: it has €, curly quotes and dashes at bytes 0x80-0x9F, where Latin-1 has
  invisible control characters. Latin-1 stays the last resort because it decodes any byte (the
  five bytes cp1252 leaves undefined, for instance).
* **CSV dialect**: sniffed from the first 4 KiB among ``,`` ``;`` tab and ``|`` (a European Excel
  export separates with ``;``), else tab for ``.tsv`` and comma for everything else.
"""

from __future__ import annotations

import csv

__all__ = ["decode_text", "looks_like_text", "sniff_csv_dialect"]

_SNIFF_CHARS = 4096
"""How much of a CSV the dialect sniffer reads."""
_CSV_DELIMITERS = ",;\t|"
_TEXT_CONTROL_BYTES = set(range(0, 9)) | {11, 12} | set(range(14, 32)) - {27}
"""Bytes that never occur in text in a single-byte or UTF-8 encoding (tab, newlines, ESC excepted)."""
_SAMPLE_BYTES = 8192


def looks_like_text(data: bytes) -> bool:
    """Whether ``data`` is text: a UTF-16/UTF-8 byte-order mark, or no control bytes in its first 8 KiB."""
    if data.startswith((b"\xff\xfe", b"\xfe\xff", b"\xef\xbb\xbf")):
        return True
    return not any(byte in _TEXT_CONTROL_BYTES for byte in data[:_SAMPLE_BYTES])


def decode_text(data: bytes) -> str:
    """The text of ``data`` (see the module docstring for the order of encodings tried).

    Never fails: every byte string decodes as Latin-1.
    """
    if data.startswith((b"\xff\xfe", b"\xfe\xff")):
        return data.decode("utf-16")
    for encoding in ("utf-8-sig", "cp1252"):
        try:
            return data.decode(encoding)
        except UnicodeDecodeError:
            continue
    return data.decode("latin-1")


def sniff_csv_dialect(text: str, filename: str = "") -> type[csv.Dialect] | csv.Dialect:
    """The CSV dialect of ``text`` (delimiter and quoting), for :func:`csv.reader` / ``DictReader``."""
    try:
        return csv.Sniffer().sniff(text[:_SNIFF_CHARS], delimiters=_CSV_DELIMITERS)
    except csv.Error:
        return csv.excel_tab if filename.lower().endswith(".tsv") else csv.excel
