"""Builders of real document files for knowledge-base tests (PDF, DOCX, XLSX, CSV) and sample texts."""

from __future__ import annotations

import io
import struct
import textwrap
import zipfile
import zlib
from collections.abc import Callable

RETURNS_POLICY = (
    "Returns and refunds. You can return any unused product within 30 days of delivery for a full "
    "refund. Start a return from your account page or write to our support team with your order number. "
    "Refunds are paid to the original payment method within 5 business days after we receive the parcel."
)
SHIPPING = (
    "Shipping times. Orders placed before 2 pm ship the same day. Standard delivery takes 2 to 4 "
    "business days within the country; express delivery arrives the next business day and costs 9.90 EUR."
)
WARRANTY = (
    "Warranty. Every espresso machine carries a 24 month warranty covering the pump, the boiler and the "
    "electronics. Descaling damage caused by hard water is not covered; descale the machine every month."
)
OPENING_HOURS = (
    "Store opening hours. Our showroom in Lisbon is open Monday to Saturday from 9:00 to 19:00 and closed "
    "on Sundays and public holidays."
)
PARTS = [
    ("FVAM-2050-B", "Steam wand gasket, black", "4.90"),
    ("FVAM-2050-C", "Steam wand gasket, chrome", "6.40"),
    ("FVAM-3100-A", "Water tank lid", "12.00"),
]
UNRELATED_QUESTIONS = [
    "Who won the football world cup in 1998?",
    "What is the capital city of Australia?",
    "How do I bake sourdough bread at home?",
    "Explain quantum entanglement to a child",
    "Recommend a good science fiction novel",
]
RELATED_QUESTIONS = [
    ("How many days do I have to return a product?", "return"),
    ("How long does standard delivery take?", "delivery"),
    ("Is the pump covered by the warranty?", "warranty"),
    ("When is the Lisbon showroom open?", "showroom"),
]


def make_pdf(pages: list[str]) -> bytes:
    """A real PDF with one text page per string (Helvetica, hand-built objects; text extractable)."""
    objects: list[bytes] = []
    page_ids = []
    font_id = 3
    objects.append(b"<< /Type /Catalog /Pages 2 0 R >>")
    objects.append(b"")  # pages tree, filled below
    objects.append(b"<< /Type /Font /Subtype /Type1 /BaseFont /Helvetica >>")
    for text in pages:
        lines = textwrap.wrap(text, width=90) or [""]
        ops = [b"BT /F1 10 Tf 40 800 Td 12 TL"]
        for line in lines:
            escaped = line.replace("\\", "\\\\").replace("(", "\\(").replace(")", "\\)")
            ops.append(b"(" + escaped.encode("latin-1") + b") Tj T*")
        ops.append(b"ET")
        stream = b"\n".join(ops)
        objects.append(b"<< /Length %d >>\nstream\n" % len(stream) + stream + b"\nendstream")
        content_id = len(objects)
        objects.append(
            b"<< /Type /Page /Parent 2 0 R /MediaBox [0 0 595 842] /Contents %d 0 R "
            b"/Resources << /Font << /F1 %d 0 R >> >> >>" % (content_id, font_id)
        )
        page_ids.append(len(objects))
    kids = b" ".join(b"%d 0 R" % pid for pid in page_ids)
    objects[1] = b"<< /Type /Pages /Kids [" + kids + b"] /Count %d >>" % len(page_ids)
    return _assemble_pdf(objects)


def make_image_only_pdf() -> bytes:
    """A valid one-page PDF whose page draws only a filled rectangle (no text at all)."""
    stream = b"0 0 1 rg 100 100 300 300 re f"
    objects = [
        b"<< /Type /Catalog /Pages 2 0 R >>",
        b"<< /Type /Pages /Kids [3 0 R] /Count 1 >>",
        b"<< /Type /Page /Parent 2 0 R /MediaBox [0 0 595 842] /Contents 4 0 R >>",
        b"<< /Length %d >>\nstream\n" % len(stream) + stream + b"\nendstream",
    ]
    return _assemble_pdf(objects)


def _assemble_pdf(objects: list[bytes]) -> bytes:
    out = io.BytesIO()
    out.write(b"%PDF-1.4\n")
    offsets = []
    for number, body in enumerate(objects, start=1):
        offsets.append(out.tell())
        out.write(b"%d 0 obj\n" % number + body + b"\nendobj\n")
    xref = out.tell()
    out.write(b"xref\n0 %d\n0000000000 65535 f \n" % (len(objects) + 1))
    for offset in offsets:
        out.write(b"%010d 00000 n \n" % offset)
    out.write(b"trailer\n<< /Size %d /Root 1 0 R >>\nstartxref\n%d\n%%%%EOF\n" % (len(objects) + 1, xref))
    return out.getvalue()


def make_encrypted_pdf(text: str, password: str = "s3cret") -> bytes:
    """A PDF encrypted with a user password (pypdf's writer)."""
    from pypdf import PdfReader, PdfWriter

    writer = PdfWriter(clone_from=PdfReader(io.BytesIO(make_pdf([text]))))
    writer.encrypt(user_password=password, owner_password=password, algorithm="AES-128")
    out = io.BytesIO()
    writer.write(out)
    return out.getvalue()


def make_docx(paragraphs: list[str], table: list[list[str]] | None = None) -> bytes:
    import docx

    document = docx.Document()
    for paragraph in paragraphs:
        document.add_paragraph(paragraph)
    if table:
        grid = document.add_table(rows=len(table), cols=len(table[0]))
        for r, row in enumerate(table):
            for c, value in enumerate(row):
                grid.cell(r, c).text = value
    out = io.BytesIO()
    document.save(out)
    return out.getvalue()


def make_xlsx(sheets: dict[str, list[list[object]]]) -> bytes:
    import openpyxl

    workbook = openpyxl.Workbook()
    workbook.remove(workbook.active)
    for title, rows in sheets.items():
        sheet = workbook.create_sheet(title)
        for row in rows:
            sheet.append(row)
    out = io.BytesIO()
    workbook.save(out)
    return out.getvalue()


def make_csv(rows: list[list[str]]) -> bytes:
    import csv

    out = io.StringIO()
    csv.writer(out).writerows(rows)
    return out.getvalue().encode()


def corrupt(data: bytes) -> bytes:
    """The first half of a file: a truncated upload."""
    return data[: len(data) // 2]


def make_zip(files: dict[str, bytes]) -> bytes:
    out = io.BytesIO()
    with zipfile.ZipFile(out, "w") as archive:
        for name, data in files.items():
            archive.writestr(name, data)
    return out.getvalue()


# --- hostile files (tests/knowledge/test_hostile_documents.py) -------------------------------

MIB = 1024 * 1024


def _deflate_with_spaces(data: bytes, mib: int, checksum: Callable[[bytes, int], int]) -> tuple[bytes, int]:
    """Raw deflate of ``data`` followed by ``mib`` MiB of spaces, and ``checksum`` (``zlib.crc32`` for
    ZIP, ``zlib.adler32`` for zlib streams) of all of it.

    About a thousand times smaller than what it unpacks to, and cheap to build: after a full flush
    every MiB of spaces compresses to the same block, so the block is compressed once and repeated.
    """
    chunk = b" " * MIB
    packer = zlib.compressobj(9, zlib.DEFLATED, -15)
    head = packer.compress(data) + packer.flush(zlib.Z_FULL_FLUSH)
    block = packer.compress(chunk) + packer.flush(zlib.Z_FULL_FLUSH)
    assert packer.compress(chunk) + packer.flush(zlib.Z_FULL_FLUSH) == block
    total = checksum(data, 1 if checksum is zlib.adler32 else 0)
    for _ in range(mib):
        total = checksum(chunk, total)
    return head + block * mib + packer.flush(), total


def make_zip_bomb(base: bytes, member: str, unpacked_mib: int) -> bytes:
    """``base`` (a DOCX or XLSX) with ``member`` followed by ``unpacked_mib`` MiB of spaces: still a
    valid file (XML allows trailing whitespace) that unpacks to a thousand times its size."""
    entries = []
    with zipfile.ZipFile(io.BytesIO(base)) as archive:
        for info in archive.infolist():
            data = archive.read(info.filename)
            spaces = unpacked_mib if info.filename == member else 0
            stream, crc = _deflate_with_spaces(data, spaces, zlib.crc32)
            entries.append((info.filename, stream, crc, len(data) + spaces * MIB))
    return _zip_deflated(entries)


def _zip_deflated(entries: list[tuple[str, bytes, int, int]]) -> bytes:
    """A ZIP archive of already-deflated members ``(name, raw deflate stream, crc32, unpacked size)``."""
    out = io.BytesIO()
    central = []
    for name, stream, crc, size in entries:
        offset, encoded = out.tell(), name.encode()
        out.write(
            struct.pack(
                "<IHHHHHIIIHH", 0x04034B50, 20, 0, 8, 0, 0x21, crc, len(stream), size, len(encoded), 0
            )
        )
        out.write(encoded + stream)
        central.append(
            struct.pack(
                "<IHHHHHHIIIHHHHHII",
                0x02014B50,
                20,
                20,
                0,
                8,
                0,
                0x21,
                crc,
                len(stream),
                size,
                len(encoded),
                0,
                0,
                0,
                0,
                0,
                offset,
            )
            + encoded
        )
    directory = b"".join(central)
    start = out.tell()
    out.write(directory)
    out.write(
        struct.pack("<IHHHHIIH", 0x06054B50, 0, 0, len(entries), len(entries), len(directory), start, 0)
    )
    return out.getvalue()


def replace_member(base: bytes, member: str, data: bytes) -> bytes:
    """A copy of the ZIP container ``base`` with ``member``'s content replaced by ``data``."""
    out = io.BytesIO()
    with (
        zipfile.ZipFile(io.BytesIO(base)) as source,
        zipfile.ZipFile(out, "w", zipfile.ZIP_DEFLATED) as target,
    ):
        for info in source.infolist():
            target.writestr(info, data if info.filename == member else source.read(info.filename))
    return out.getvalue()


def make_billion_laughs_xlsx() -> bytes:
    """An XLSX whose first sheet defines ten nested entities: ``&lol9;`` would expand to 10^9 "lol"s."""
    entities = ['<!ENTITY lol "lol">'] + [
        f'<!ENTITY lol{n} "{("&lol" + (str(n - 1) if n > 1 else "") + ";") * 10}">' for n in range(1, 10)
    ]
    sheet = (
        '<?xml version="1.0" encoding="UTF-8"?>\n<!DOCTYPE worksheet [' + "".join(entities) + "]>\n"
        '<worksheet xmlns="http://schemas.openxmlformats.org/spreadsheetml/2006/main"><sheetData>'
        '<row r="1"><c r="A1" t="inlineStr"><is><t>Question</t></is></c></row>'
        '<row r="2"><c r="A2" t="inlineStr"><is><t>&lol9;</t></is></c></row>'
        "</sheetData></worksheet>"
    )
    return replace_member(
        make_xlsx({"Sheet": [["Question"], ["ok"]]}), "xl/worksheets/sheet1.xml", sheet.encode()
    )


def make_sparse_xlsx() -> bytes:
    """A tiny XLSX with two cells, A1 and XFD1048576: read row by row it is 2^20 rows x 2^14 columns."""
    import openpyxl

    workbook = openpyxl.Workbook()
    workbook.active["A1"] = "Header"
    workbook.active["XFD1048576"] = "far away"
    out = io.BytesIO()
    workbook.save(out)
    return out.getvalue()


def make_slow_pdf(operators: int) -> bytes:
    """A one-page PDF whose (compressed) content stream draws ``operators`` one-letter strings:
    a few kilobytes that keep pypdf's text extraction busy for about ``operators / 40_000`` seconds."""
    return _one_page_pdf(b"BT /F1 10 Tf 40 800 Td " + b"(a) Tj " * operators + b"ET")


def make_deflate_bomb_pdf(unpacked_mib: int) -> bytes:
    """A one-page PDF whose content stream unpacks to ``unpacked_mib`` MiB more than it shows."""
    raw, adler = _deflate_with_spaces(b"BT /F1 10 Tf 40 800 Td (a) Tj ET", unpacked_mib, zlib.adler32)
    return _one_page_pdf(stream=b"\x78\xda" + raw + struct.pack(">I", adler))  # zlib wrapper around deflate


def _one_page_pdf(content: bytes = b"", *, stream: bytes | None = None) -> bytes:
    stream = stream if stream is not None else zlib.compress(content, 1)
    return _assemble_pdf(
        [
            b"<< /Type /Catalog /Pages 2 0 R >>",
            b"<< /Type /Pages /Kids [3 0 R] /Count 1 >>",
            b"<< /Type /Page /Parent 2 0 R /MediaBox [0 0 595 842] /Contents 4 0 R "
            b"/Resources << /Font << /F1 5 0 R >> >> >>",
            b"<< /Length %d /Filter /FlateDecode >>\nstream\n" % len(stream) + stream + b"\nendstream",
            b"<< /Type /Font /Subtype /Type1 /BaseFont /Helvetica >>",
        ]
    )
