"""Turn uploaded bytes into text sections: the file type is sniffed from the bytes, never trusted.

Each parser returns :class:`Section` objects (text plus the page or sheet it came from) and a
report of what was skipped. A file that yields no text at all (encrypted, corrupt, empty,
image-only) raises :class:`DocumentRejected` with a reason an uploader can act on.

Formats: PDF (pypdf, one section per page), DOCX (python-docx: paragraphs and tables in document
order), XLSX (openpyxl: one section per row, ``Header: value; ...``, with the row's key columns in
``Section.attributes``), CSV (header-aware, same shape, dialect sniffed), TXT and Markdown (UTF-16 with BOM, UTF-8, Windows-1252 or Latin-1:
:mod:`switchboard.textfiles`).

Customer uploads are hostile until parsed: :mod:`switchboard.knowledge.isolation` runs
:func:`parse_document` in a child process with a wall-clock timeout and a memory cap. Within the
parser, a DOCX/XLSX whose parts would unpack to more than ``max_unpacked_bytes`` (a ZIP bomb) is
refused before anything is decompressed, XLSX XML is read through ``defusedxml`` (openpyxl uses it
when installed: entity declarations, the "billion laughs", are refused), and pypdf's own
decompression limits apply. Each of these ends in :class:`DocumentTooComplex`.
"""

from __future__ import annotations

import csv
import io
import re
import zipfile
from dataclasses import dataclass, field
from enum import StrEnum
from typing import Any

from switchboard.errors import SwitchboardError
from switchboard.i18n import N_
from switchboard.textfiles import decode_text, looks_like_text, sniff_csv_dialect

__all__ = [
    "DEFAULT_MAX_UNPACKED_BYTES",
    "DocumentKind",
    "DocumentRejected",
    "DocumentTooComplex",
    "ParsedDocument",
    "Section",
    "parse_document",
    "sniff_kind",
]

MIB = 1024 * 1024
DEFAULT_MAX_UNPACKED_BYTES = 512 * MIB
"""Largest total uncompressed size of a DOCX/XLSX's parts (the default memory cap of a parse)."""

_OLE_MAGIC = b"\xd0\xcf\x11\xe0\xa1\xb1\x1a\xe1"
"""Compound File Binary header: legacy .doc/.xls, and password-protected .docx/.xlsx (MS-OFFCRYPTO)."""
_IMAGE_MAGICS = {
    b"\x89PNG\r\n\x1a\n": "PNG image",
    b"\xff\xd8\xff": "JPEG image",
    b"GIF87a": "GIF image",
    b"GIF89a": "GIF image",
    b"RIFF": "RIFF (WebP image or WAV audio)",
}
_RESOURCE_ERRORS = (MemoryError, RecursionError)
"""Never reported as a corrupt file: the parse ran out of room (see :func:`parse_document`)."""


class DocumentKind(StrEnum):
    """What a file is, decided from its bytes (the extension only picks among text flavours)."""

    pdf = "pdf"
    docx = "docx"
    xlsx = "xlsx"
    csv = "csv"
    markdown = "markdown"
    text = "text"


CONTENT_TYPES: dict[DocumentKind, str] = {
    DocumentKind.pdf: "application/pdf",
    DocumentKind.docx: "application/vnd.openxmlformats-officedocument.wordprocessingml.document",
    DocumentKind.xlsx: "application/vnd.openxmlformats-officedocument.spreadsheetml.sheet",
    DocumentKind.csv: "text/csv",
    DocumentKind.markdown: "text/markdown",
    DocumentKind.text: "text/plain",
}
"""The content type recorded for each sniffed kind."""


PLAIN_WORDS: dict[str, str] = {
    "unsupported": N_(
        "This kind of file cannot be read. Upload a PDF, DOCX, XLSX, CSV, TXT or Markdown file."
    ),
    "encrypted": N_("The file is protected by a password. Remove the password and upload it again."),
    "corrupt": N_(
        "The file is damaged and cannot be opened. Save or export it again and upload the new copy."
    ),
    "empty": N_("The file has no text in it."),
    "no_text": N_("The file holds only pictures (a scan?), no text to read. Upload a version with text."),
    "too_large": N_("The file is larger than the upload limit."),
    "too_complex": N_("The file takes too long to read. Split it into smaller files and upload those."),
    "embedding_failed": N_(
        "The text could not be indexed: the embedding model did not answer. Try again later."
    ),
    "bad_filename": N_("The file's name cannot be stored. Rename the file and upload it again."),
    "no_file": N_("Choose a file first."),
}
"""What an uploader reads for each :attr:`DocumentRejected.reason` (catalog msgids): what went wrong and
what to do, without the parser's own words. The admin API keeps the technical message."""


class DocumentRejected(SwitchboardError):
    """A file cannot be ingested; nothing of it is stored. The uploader fixes the file.

    Attributes:
        filename: the file's name as uploaded.
        reason: short machine-readable cause: ``unsupported``, ``encrypted``, ``corrupt``, ``empty``,
            ``no_text`` (image-only/scanned), ``too_large``, ``too_complex``, ``embedding_failed``,
            ``bad_filename`` (a NUL in the name, or over 512 characters), ``no_file`` (an upload
            form without a file).
        detail: the message without the filename.
    """

    def __init__(self, filename: str, reason: str, message: str) -> None:
        self.filename = filename
        self.reason = reason
        self.detail = message
        super().__init__(f"{filename}: {message}")

    @property
    def plain_words(self) -> str:
        """The reason in an uploader's words (a msgid of :data:`PLAIN_WORDS`; translate it to show it)."""
        return PLAIN_WORDS.get(self.reason, PLAIN_WORDS["corrupt"])


class DocumentTooComplex(DocumentRejected):
    """Parsing the file needs more time or memory than allowed, or it is built to (a ZIP bomb, an XML
    entity bomb, a PDF that takes minutes): reason ``too_complex``, message ``file too complex: ...``.
    """

    def __init__(self, filename: str, why: str) -> None:
        super().__init__(filename, "too_complex", f"file too complex: {why}")


@dataclass(frozen=True, kw_only=True)
class Section:
    """A run of text from one place in a document; chunks never span two sections."""

    text: str
    page: int | None = None
    """1-based PDF page."""
    sheet: str | None = None
    """Spreadsheet sheet name (XLSX)."""
    attributes: dict[str, Any] = field(default_factory=dict)
    """A table row's place and key columns, ``{"row": 2, "keys": {"SKU": "AB-100"}}`` (CSV, XLSX:
    each data row is a section of its own, so it becomes its own chunk); ``{}`` elsewhere."""


@dataclass(kw_only=True)
class ParsedDocument:
    """What a parser found: its sections and a report of what it skipped."""

    kind: DocumentKind
    sections: list[Section]
    details: dict[str, Any] = field(default_factory=dict)
    """Pages/sheets/rows counted and parts skipped, with why (stored in ``knowledge_sources.details``)."""


def sniff_kind(data: bytes, filename: str) -> DocumentKind:
    """Decide the document kind from the leading bytes (and, for plain text, the extension).

    Raises:
        DocumentRejected: ``empty`` (0 bytes), ``encrypted`` (an Office file with a password, or a
            legacy .doc/.xls), ``unsupported`` (images, archives, other binaries).
    """
    if not data.strip():
        raise DocumentRejected(filename, "empty", "the file is empty")
    if data.startswith(b"%PDF-") or data[:1024].lstrip().startswith(b"%PDF-"):
        return DocumentKind.pdf
    if data.startswith(_OLE_MAGIC):
        raise DocumentRejected(
            filename,
            "encrypted",
            "password-protected Office file (or legacy .doc/.xls): save it without a password as .docx/.xlsx",
        )
    if data.startswith(b"PK\x03\x04"):
        try:
            with zipfile.ZipFile(io.BytesIO(data)) as archive:
                names = set(archive.namelist())
        except zipfile.BadZipFile:
            raise DocumentRejected(
                filename, "corrupt", "corrupt ZIP container (damaged .docx/.xlsx?)"
            ) from None
        if "word/document.xml" in names:
            return DocumentKind.docx
        if "xl/workbook.xml" in names:
            return DocumentKind.xlsx
        raise DocumentRejected(filename, "unsupported", "a ZIP archive that is neither .docx nor .xlsx")
    for magic, what in _IMAGE_MAGICS.items():
        if data.startswith(magic):
            raise DocumentRejected(
                filename, "unsupported", f"{what}: upload PDF, DOCX, XLSX, CSV, TXT or Markdown"
            )
    if not looks_like_text(data):
        raise DocumentRejected(filename, "unsupported", "binary file of an unsupported type")
    lower = filename.lower()
    if lower.endswith((".csv", ".tsv")):
        return DocumentKind.csv
    if lower.endswith((".md", ".markdown")):
        return DocumentKind.markdown
    return DocumentKind.text


def _check_unpacked_size(data: bytes, filename: str, max_unpacked_bytes: int) -> None:
    """Refuse a ZIP container whose parts would unpack to more than ``max_unpacked_bytes``.

    The sizes come from the central directory; :mod:`zipfile` never returns more bytes than a part
    declares (a part that lies fails its CRC check and reads as corrupt), so this bounds what
    python-docx and openpyxl can decompress.
    """
    with zipfile.ZipFile(io.BytesIO(data)) as archive:
        unpacked = sum(info.file_size for info in archive.infolist())
    if unpacked > max_unpacked_bytes:
        raise DocumentTooComplex(
            filename,
            f"its parts unpack to {unpacked / MIB:.0f} MiB, over the {max_unpacked_bytes / MIB:.0f} MiB "
            "limit (a ZIP bomb?)",
        )


def parse_document(
    data: bytes, filename: str, *, max_unpacked_bytes: int = DEFAULT_MAX_UNPACKED_BYTES
) -> ParsedDocument:
    """Parse ``data`` (a whole file) into sections, in this process.

    CPU- and memory-bound, with no time limit: for uploads use
    :func:`switchboard.knowledge.isolation.parse_isolated`, which runs this in a child process.

    Args:
        data: the file's bytes.
        filename: the uploaded name (reports; picks CSV/Markdown/TXT among text files).
        max_unpacked_bytes: largest total uncompressed size of a DOCX/XLSX's parts.

    Returns:
        The sections in document order (at least one, each with non-blank text).

    Raises:
        DocumentTooComplex: a ZIP bomb, an XML entity bomb, a PDF stream over pypdf's limits.
        DocumentRejected: encrypted, corrupt, empty, image-only or unsupported file.
    """
    kind = sniff_kind(data, filename)
    if kind in (DocumentKind.docx, DocumentKind.xlsx):
        _check_unpacked_size(data, filename, max_unpacked_bytes)
    parser = {
        DocumentKind.pdf: _parse_pdf,
        DocumentKind.docx: _parse_docx,
        DocumentKind.xlsx: _parse_xlsx,
        DocumentKind.csv: _parse_csv,
        DocumentKind.markdown: _parse_text,
        DocumentKind.text: _parse_text,
    }[kind]
    try:
        parsed = parser(data, filename)
    except RecursionError:
        raise DocumentTooComplex(filename, "its structure is nested too deeply") from None
    parsed.kind = kind
    parsed.sections = [s for s in parsed.sections if s.text.strip()]
    if not parsed.sections:
        if kind is DocumentKind.pdf:
            raise DocumentRejected(
                filename, "no_text", "no extractable text (image-only or scanned PDF? run OCR first)"
            )
        raise DocumentRejected(filename, "empty", "the document contains no text")
    return parsed


def _parse_pdf(data: bytes, filename: str) -> ParsedDocument:
    from pypdf import PdfReader
    from pypdf.errors import LimitReachedError, PdfReadError, PyPdfError

    try:
        reader = PdfReader(io.BytesIO(data))
        if reader.is_encrypted:
            # Many PDFs are "encrypted" with an empty user password (printing restrictions only).
            try:
                opened = reader.decrypt("")
            except (
                PyPdfError,
                NotImplementedError,
            ) as exc:  # pypdf: unsupported cipher (e.g. AES without cryptography)
                raise DocumentRejected(filename, "encrypted", f"encrypted PDF ({exc})") from None
            if not opened:
                raise DocumentRejected(filename, "encrypted", "password-protected PDF: remove the password")
        sections: list[Section] = []
        blank_pages: list[int] = []
        for number, page in enumerate(reader.pages, start=1):
            text = (page.extract_text() or "").strip()
            if text:
                sections.append(Section(text=text, page=number))
            else:
                blank_pages.append(number)
        page_count = len(reader.pages)
    except DocumentRejected:
        raise
    except LimitReachedError as exc:  # pypdf's decompression and size limits
        raise DocumentTooComplex(filename, f"over pypdf's limits ({exc})") from None
    except (PdfReadError, PyPdfError, ValueError, KeyError, TypeError, AttributeError) as exc:
        raise DocumentRejected(filename, "corrupt", f"corrupt PDF ({type(exc).__name__}: {exc})") from None
    details: dict[str, Any] = {"pages": page_count}
    if blank_pages:
        details["skipped"] = [{"pages": blank_pages, "why": "no extractable text (image-only page?)"}]
    return ParsedDocument(kind=DocumentKind.pdf, sections=sections, details=details)


def _cell_text(value: Any) -> str:
    if value is None:
        return ""
    if isinstance(value, float) and value.is_integer():
        return str(int(value))
    return str(value).strip()


def _row_line(headers: list[str], cells: list[str]) -> str:
    """``Header: value; Header2: value2`` for non-empty cells (a bare value where the header is blank)."""
    parts = []
    for index, cell in enumerate(cells):
        if not cell:
            continue
        header = headers[index] if index < len(headers) else ""
        parts.append(f"{header}: {cell}" if header else cell)
    return "; ".join(parts)


def _table_lines(rows: list[list[str]], *, lone_row_is_text: bool = False) -> list[str]:
    """First non-empty row is the header; each later row becomes one line.

    A table of one row is a header without data (nothing), except in Word documents
    (``lone_row_is_text``), where one-row tables are used for layout.
    """
    rows = [row for row in rows if any(row)]
    if not rows or (len(rows) == 1 and not lone_row_is_text):
        return []
    if len(rows) == 1:
        return [" | ".join(cell for cell in rows[0] if cell)]
    headers = rows[0]
    return [line for line in (_row_line(headers, row) for row in rows[1:]) if line]


_KEY_HEADER = re.compile(
    r"\b(sku|part|item|code|article|art|model|ref|reference|id|no|nr|number|product|name|series|family"
    r"|material|fluid|medium|media|chemical|type|standard)\b",
    re.IGNORECASE,
)
"""Headers whose column identifies a row (the first column always does)."""
MAX_KEY_COLUMNS = 6


def key_columns(headers: list[str]) -> list[int]:
    """Indexes of a table's key columns: the first, then those whose header names an id, a name or a kind."""
    keys = [0] if headers else []
    for index, header in enumerate(headers[1:], start=1):
        if header and _KEY_HEADER.search(header.replace("_", " ")) and len(keys) < MAX_KEY_COLUMNS:
            keys.append(index)
    return keys


def _row_sections(rows: list[list[str]], *, sheet: str | None = None) -> list[Section]:
    """One section per data row (the first non-empty row is the header), with its key columns.

    The text is the row as ``Header: value; ...`` (:func:`_row_line`); ``attributes`` holds
    ``row`` (1-based, the header is row 1 of the non-empty rows) and ``keys`` (header → value of
    the key columns, :func:`key_columns`). So exact mode for one SKU returns that row alone.
    """
    rows = [row for row in rows if any(row)]
    if len(rows) < 2:
        return []
    headers = rows[0]
    keys = key_columns(headers)
    sections = []
    for number, row in enumerate(rows[1:], start=2):
        line = _row_line(headers, row)
        if not line:
            continue
        values = {(headers[i] or f"column {i + 1}"): row[i] for i in keys if i < len(row) and row[i]}
        sections.append(Section(text=line, sheet=sheet, attributes={"row": number, "keys": values}))
    return sections


def _parse_docx(data: bytes, filename: str) -> ParsedDocument:
    import docx
    from docx.table import Table
    from docx.text.paragraph import Paragraph

    try:
        document = docx.Document(io.BytesIO(data))
        blocks: list[str] = []
        tables = 0
        for item in document.iter_inner_content():
            if isinstance(item, Paragraph):
                if item.text.strip():
                    blocks.append(item.text.strip())
            elif isinstance(item, Table):
                tables += 1
                rows = [[cell.text.strip() for cell in row.cells] for row in item.rows]
                lines = _table_lines(rows, lone_row_is_text=True)
                if lines:
                    blocks.append("\n".join(lines))
    except (KeyError, ValueError, zipfile.BadZipFile) as exc:
        raise DocumentRejected(filename, "corrupt", f"corrupt DOCX ({type(exc).__name__}: {exc})") from None
    except _RESOURCE_ERRORS:
        raise
    except Exception as exc:  # lxml parse errors and friends: log-worthy, reported as corrupt
        raise DocumentRejected(filename, "corrupt", f"corrupt DOCX ({type(exc).__name__})") from None
    text = "\n\n".join(blocks)
    return ParsedDocument(
        kind=DocumentKind.docx,
        sections=[Section(text=text)],
        details={"paragraphs_and_tables": len(blocks), "tables": tables},
    )


def _raise_if_xml_bomb(exc: BaseException, filename: str) -> None:
    """Raise :class:`DocumentTooComplex` when defusedxml refused the XML (openpyxl wraps its error)."""
    from defusedxml import DefusedXmlException

    seen: BaseException | None = exc
    while seen is not None:
        if isinstance(seen, DefusedXmlException):
            raise DocumentTooComplex(filename, f"XML entity declarations (an XML bomb?): {seen}") from None
        seen = seen.__cause__ or seen.__context__


def _parse_xlsx(data: bytes, filename: str) -> ParsedDocument:
    import openpyxl

    if not openpyxl.DEFUSEDXML:  # OPENPYXL_DEFUSEDXML=False in the environment: refuse, never parse unsafely
        raise DocumentRejected(
            filename,
            "unsupported",
            "XLSX is switched off: openpyxl is not using defusedxml (OPENPYXL_DEFUSEDXML)",
        )
    try:
        workbook = openpyxl.load_workbook(io.BytesIO(data), read_only=True, data_only=True)
    except _RESOURCE_ERRORS:
        raise
    except Exception as exc:  # openpyxl raises a variety (InvalidFileException, KeyError, lxml errors)
        _raise_if_xml_bomb(exc, filename)
        raise DocumentRejected(filename, "corrupt", f"corrupt XLSX ({type(exc).__name__})") from None
    sections: list[Section] = []
    sheets: dict[str, int] = {}
    skipped: list[dict[str, Any]] = []
    try:
        for worksheet in workbook.worksheets:
            rows = [[_cell_text(value) for value in row] for row in worksheet.iter_rows(values_only=True)]
            row_sections = _row_sections(rows, sheet=worksheet.title)
            sheets[worksheet.title] = len(row_sections)
            if row_sections:
                sections.extend(row_sections)
            else:
                skipped.append({"sheet": worksheet.title, "why": "empty sheet"})
    except _RESOURCE_ERRORS:
        raise
    except Exception as exc:  # read-only mode parses each sheet's XML while iterating: ParseError, bombs
        _raise_if_xml_bomb(exc, filename)
        raise DocumentRejected(filename, "corrupt", f"corrupt XLSX ({type(exc).__name__})") from None
    finally:
        workbook.close()
    details: dict[str, Any] = {"sheets": sheets}
    if skipped:
        details["skipped"] = skipped
    return ParsedDocument(kind=DocumentKind.xlsx, sections=sections, details=details)


def _parse_csv(data: bytes, filename: str) -> ParsedDocument:
    text = decode_text(data)
    dialect = sniff_csv_dialect(text, filename)
    try:
        rows = [[cell.strip() for cell in row] for row in csv.reader(io.StringIO(text), dialect)]
    except csv.Error as exc:
        raise DocumentRejected(filename, "corrupt", f"malformed CSV ({exc})") from None
    sections = _row_sections(rows)
    return ParsedDocument(kind=DocumentKind.csv, sections=sections, details={"rows": len(sections)})


def _parse_text(data: bytes, filename: str) -> ParsedDocument:
    text = decode_text(data).replace("\r\n", "\n").replace("\r", "\n")
    return ParsedDocument(
        kind=DocumentKind.text, sections=[Section(text=text.strip())], details={"characters": len(text)}
    )
