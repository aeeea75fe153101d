"""Hostile admin input (NUL, over-long values) gets a 4xx from the API and one line with exit status 2
from the CLI: never a 500 or a traceback."""

from __future__ import annotations

import uuid

import httpx
import pytest

TOO_LONG_SLUG = "t" * 5000
BIG_CELL = "sku,name,price\nAB-1," + "x" * 140_000 + ",1.00\n"  # over csv's 131,072-character field limit


@pytest.fixture
async def admin(settings, make_tenant, orchestrator_url):  # type: ignore[no-untyped-def]
    tenant = await make_tenant()
    headers = {"Authorization": f"Bearer {settings.secret('admin_token')}"}
    async with httpx.AsyncClient(base_url=orchestrator_url, headers=headers) as http:
        yield http, f"/v1/admin/tenants/{tenant.slug}"


async def test_a_nul_or_over_long_tenant_slug_is_404(admin) -> None:  # type: ignore[no-untyped-def]
    http, _ = admin
    for slug in (
        "shop%00evil",
        TOO_LONG_SLUG,
        "%ED%A0%80",
    ):  # NUL; 5,000 characters; an encoded lone surrogate
        response = await http.get(f"/v1/admin/tenants/{slug}/tools")
        assert response.status_code == 404, (slug[:20], response.status_code, response.text[:200])


def _multipart(filename: bytes, data: bytes) -> tuple[bytes, str]:
    """A multipart body written by hand: httpx would percent-encode a NUL in the file name."""
    boundary = "hostile-boundary"
    body = (
        f"--{boundary}\r\n".encode()
        + b'Content-Disposition: form-data; name="file"; filename="'
        + filename
        + b'"\r\n'
        + b"Content-Type: text/plain\r\n\r\n"
        + data
        + f"\r\n--{boundary}--\r\n".encode()
    )
    return body, f"multipart/form-data; boundary={boundary}"


async def test_an_upload_with_a_bad_file_name_is_422(admin) -> None:  # type: ignore[no-untyped-def]
    http, prefix = admin
    for name in (b"n" * 600 + b".txt", b"faq\x00.txt"):
        body, content_type = _multipart(name, b"Opening hours: 9-17.")
        response = await http.post(
            f"{prefix}/knowledge/documents", content=body, headers={"Content-Type": content_type}
        )
        assert response.status_code == 422, response.text[:200]
        assert response.json()["detail"]["reason"] == "bad_filename"


async def test_an_agent_name_with_a_nul_or_too_long_is_422(admin) -> None:  # type: ignore[no-untyped-def]
    http, prefix = admin
    for name in ("Ana\x00", "A" * 201):
        response = await http.post(f"{prefix}/agents", json={"name": name, "phone": "+15550100555"})
        assert response.status_code == 422, response.text[:200]


async def test_a_csv_with_a_nul_or_a_cell_over_the_csv_field_limit_is_400(admin) -> None:  # type: ignore[no-untyped-def]
    http, prefix = admin
    headers = {"Content-Type": "text/csv"}
    nul = await http.post(
        f"{prefix}/data/products", headers=headers, content="sku,name,price\nAB-1,Fan\x00,1\n"
    )
    big = await http.post(f"{prefix}/data/products", headers=headers, content=BIG_CELL)
    assert (nul.status_code, big.status_code) == (400, 400)
    assert "field larger than field limit" in big.json()["detail"]


def test_the_cli_answers_hostile_input_in_one_line_with_exit_2(cli, tmp_path) -> None:  # type: ignore[no-untyped-def]
    slug = f"cli-{uuid.uuid4().hex[:8]}"
    assert cli.run("tenant", "create", "--slug", slug, "--name", "CLI Shop").exit_code == 0
    big = tmp_path / "products.csv"
    big.write_text(BIG_CELL)
    long_name = tmp_path / ("n" * 250 + ".txt")  # the file system's own limit is 255 bytes
    long_name.write_text("Opening hours: 9-17.")
    results = [
        cli.run("tools", "list", "--tenant", TOO_LONG_SLUG),
        cli.run("data", "import", "--tenant", slug, "--kind", "products", str(big)),
        cli.run("agents", "add", "--tenant", slug, "--name", "A" * 201, "--phone", "+15550100556"),
    ]
    for result in results:
        assert result.exit_code == 2, result.output
        assert len(result.stderr.strip().splitlines()) == 1 and result.stderr.startswith("error: ")
