"""Parsers on real generated files: PDF pages, DOCX tables, XLSX/CSV rows with headers, bad files."""

from __future__ import annotations

import pytest
from switchboard.knowledge import DocumentKind, DocumentRejected, parse_document

from tests.utils.documents import (
    PARTS,
    RETURNS_POLICY,
    SHIPPING,
    WARRANTY,
    corrupt,
    make_csv,
    make_docx,
    make_encrypted_pdf,
    make_image_only_pdf,
    make_pdf,
    make_xlsx,
    make_zip,
)

HEADER = ["Part", "Name", "Price EUR"]


def test_pdf_gives_one_section_per_page_with_its_number():
    parsed = parse_document(make_pdf([RETURNS_POLICY, "", SHIPPING]), "faq.pdf")
    assert parsed.kind is DocumentKind.pdf
    assert [section.page for section in parsed.sections] == [1, 3]
    assert "30 days" in parsed.sections[0].text
    assert "9.90 EUR" in parsed.sections[1].text
    assert parsed.details["pages"] == 3
    assert parsed.details["skipped"] == [{"pages": [2], "why": "no extractable text (image-only page?)"}]


def test_docx_keeps_paragraphs_and_tables_in_order():
    data = make_docx([WARRANTY, "Spare parts:"], table=[HEADER, *[list(p) for p in PARTS]])
    parsed = parse_document(data, "manual.docx")
    assert parsed.kind is DocumentKind.docx
    text = parsed.sections[0].text
    assert text.index("24 month warranty") < text.index("Spare parts:") < text.index("FVAM-2050-B")
    assert "Part: FVAM-2050-C; Name: Steam wand gasket, chrome; Price EUR: 6.40" in text.splitlines()
    assert parsed.details["tables"] == 1


def test_xlsx_gives_one_section_per_row_with_header_names_and_key_columns():
    data = make_xlsx({"Parts": [HEADER, *PARTS], "Empty": [], "Hours": [["Day", "Open"], ["Monday", "9-19"]]})
    parsed = parse_document(data, "catalog.xlsx")
    assert parsed.kind is DocumentKind.xlsx
    assert [section.sheet for section in parsed.sections] == ["Parts", "Parts", "Parts", "Hours"]
    assert [section.text for section in parsed.sections] == [
        "Part: FVAM-2050-B; Name: Steam wand gasket, black; Price EUR: 4.90",
        "Part: FVAM-2050-C; Name: Steam wand gasket, chrome; Price EUR: 6.40",
        "Part: FVAM-3100-A; Name: Water tank lid; Price EUR: 12.00",
        "Day: Monday; Open: 9-19",
    ]
    assert parsed.sections[1].attributes == {
        "row": 3,
        "keys": {"Part": "FVAM-2050-C", "Name": "Steam wand gasket, chrome"},
    }
    assert parsed.sections[3].attributes == {"row": 2, "keys": {"Day": "Monday"}}
    assert parsed.details["sheets"] == {"Parts": 3, "Empty": 0, "Hours": 1}
    assert parsed.details["skipped"] == [{"sheet": "Empty", "why": "empty sheet"}]


def test_csv_is_header_aware_skips_blank_cells_and_gives_one_section_per_row():
    data = make_csv([["SKU", "Product", "Note"], ["AB-100", "Descaler", ""], ["AB-200", "Brush", "soft"]])
    parsed = parse_document(data, "prices.csv")
    assert parsed.kind is DocumentKind.csv
    assert [(section.text, section.attributes) for section in parsed.sections] == [
        ("SKU: AB-100; Product: Descaler", {"row": 2, "keys": {"SKU": "AB-100", "Product": "Descaler"}}),
        (
            "SKU: AB-200; Product: Brush; Note: soft",
            {"row": 3, "keys": {"SKU": "AB-200", "Product": "Brush"}},
        ),
    ]
    assert parsed.details["rows"] == 2


def test_row_numbers_count_the_header_as_row_1_and_skip_blank_rows():
    """What docs/knowledge-base.md says: spreadsheet numbering (the header is row 1, the
    first data row is row 2), except that blank rows are not counted."""
    rows = [["SKU", "Product"], ["AB-100", "Descaler"], [], ["AB-200", "Brush"]]
    for data, name in ((make_csv(rows), "prices.csv"), (make_xlsx({"Prices": rows}), "prices.xlsx")):
        parsed = parse_document(data, name)
        assert [section.attributes["row"] for section in parsed.sections] == [2, 3], name


def test_csv_with_semicolons_is_sniffed():
    parsed = parse_document(b"SKU;Price\nAB-1;3,50\n", "semi.csv")
    assert parsed.sections[0].text == "SKU: AB-1; Price: 3,50"


def test_text_and_markdown_by_extension_latin1_fallback():
    assert parse_document("# Title\n\nCaf\u00e9 hours".encode(), "notes.md").kind is DocumentKind.markdown
    parsed = parse_document("Caf\u00e9 ouvert".encode("latin-1"), "notes.txt")
    assert parsed.kind is DocumentKind.text
    assert parsed.sections[0].text == "Caf\u00e9 ouvert"
    # 0x81 is undefined in Windows-1252: such a file is read as Latin-1
    assert parse_document(b"Caf\xe9 \x81", "odd.txt").sections[0].text == "Caf\u00e9 \x81"


def test_windows_1252_excel_export_keeps_euro_and_curly_quotes():
    text = "Product;Price\r\n\u201cCrema\u201d \u2013 1 kg;\u20ac12,50\r\n"
    parsed = parse_document(text.encode("cp1252"), "export.csv")
    assert parsed.sections[0].text == "Product: \u201cCrema\u201d \u2013 1 kg; Price: \u20ac12,50"
    notes = parse_document("Opening \u2018soon\u2019 \u2014 \u20ac5 off".encode("cp1252"), "notes.txt")
    assert notes.sections[0].text == "Opening \u2018soon\u2019 \u2014 \u20ac5 off"


def test_type_is_sniffed_from_bytes_not_the_name():
    parsed = parse_document(make_docx(["Actually a Word file."]), "looks-like.pdf")
    assert parsed.kind is DocumentKind.docx
    assert parsed.sections[0].text == "Actually a Word file."


@pytest.mark.parametrize(
    ("filename", "data", "reason", "message_part"),
    [
        ("locked.pdf", make_encrypted_pdf("secret prices"), "encrypted", "password"),
        ("scan.pdf", make_image_only_pdf(), "no_text", "image-only"),
        ("broken.pdf", corrupt(make_pdf([WARRANTY])), "corrupt", "corrupt PDF"),
        ("broken.docx", corrupt(make_docx([WARRANTY])), "corrupt", "corrupt"),
        ("broken.xlsx", make_zip({"xl/workbook.xml": b"<not-xml"}), "corrupt", "corrupt XLSX"),
        ("empty.txt", b"", "empty", "empty"),
        ("blank.docx", make_docx([]), "empty", "no text"),
        ("header-only.csv", make_csv([["SKU", "Price"]]), "empty", ""),
        ("photo.pdf", b"\x89PNG\r\n\x1a\n" + b"\x00" * 64, "unsupported", "PNG image"),
        ("protected.docx", b"\xd0\xcf\x11\xe0\xa1\xb1\x1a\xe1" + b"\x00" * 512, "encrypted", "password"),
        ("archive.zip", make_zip({"a.txt": b"hello"}), "unsupported", "neither .docx nor .xlsx"),
        ("program.bin", bytes(range(256)), "unsupported", "binary"),
    ],
)
def test_bad_files_are_rejected_with_a_reason(filename, data, reason, message_part):
    with pytest.raises(DocumentRejected) as caught:
        parse_document(data, filename)
    assert caught.value.reason == reason
    assert caught.value.filename == filename
    assert message_part in str(caught.value)
