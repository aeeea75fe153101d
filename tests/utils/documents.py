"""Builders of real document files for knowledge-base tests (PDF, DOCX, XLSX, CSV) and sample texts."""

from __future__ import annotations

import io
import textwrap
import zipfile

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
