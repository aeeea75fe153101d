"""CSV import (validation, rejected-row report, atomicity), the admin API and the CLI for tools and data."""

from __future__ import annotations

import uuid

import httpx
import pytest
from sqlmodel import select
from switchboard.db.models import AuditLog, McpTenantTool, Order, Product
from switchboard.tools.importers import import_csv

GOOD_AND_BAD_PRODUCTS = """sku,name,price,stock,colour
ab-1,Fan A,10.00,3,red
AB-2,Fan B,-1,3,
AB-3,,5.00,x,
ab-1,Fan A again,11.00,1,
AB-4,Fan D,7.5,0,blue
"""


async def _products(sessions, tenant_id) -> list[Product]:
    async with sessions() as session:
        rows = (await session.exec(select(Product).where(Product.tenant_id == tenant_id))).all()
    return sorted(rows, key=lambda p: p.sku)


async def test_file_with_rejected_rows_imports_nothing_and_reports_each(sessions, make_tenant):
    tenant = await make_tenant()
    async with sessions() as session, session.begin():
        report = await import_csv(session, tenant_id=tenant.id, kind="products", data=GOOD_AND_BAD_PRODUCTS)
    assert report.committed is False and report.imported == 0 and report.rows == 5
    by_line = {r.line: r.reasons for r in report.rejected}
    assert sorted(by_line) == [3, 4, 5]
    assert any(reason.startswith("price:") for reason in by_line[3])
    assert any(r.startswith("name:") for r in by_line[4]) and any(r.startswith("stock:") for r in by_line[4])
    assert by_line[5] == ["duplicate of line 2"]
    assert await _products(sessions, tenant.id) == []


async def test_skip_invalid_imports_valid_rows_once_and_reimport_changes_nothing(sessions, make_tenant):
    tenant = await make_tenant()
    for _ in range(2):
        async with sessions() as session, session.begin():
            report = await import_csv(
                session, tenant_id=tenant.id, kind="products", data=GOOD_AND_BAD_PRODUCTS, skip_invalid=True
            )
        assert report.committed is True and report.imported == 2 and len(report.rejected) == 3
    products = await _products(sessions, tenant.id)
    assert [(p.sku, p.name, str(p.price), p.stock) for p in products] == [
        ("AB-1", "Fan A", "10.00", 3),
        ("AB-4", "Fan D", "7.50", 0),
    ]
    assert products[0].attributes == {"colour": "red"}


async def test_orders_stores_and_slots_validate_their_own_fields(sessions, make_tenant):
    tenant = await make_tenant()
    orders = (
        "order_number,customer,status,total,items\n"
        "#b-1,+1 (555) 010-0099,shipped,10,FVAM-2050-B:2\n"
        "B-2,x@example.com,lost,10,\n"
        "B-3,x@example.com,paid,10,FVAM:zero\n"
    )
    async with sessions() as session, session.begin():
        report = await import_csv(session, tenant_id=tenant.id, kind="orders", data=orders, skip_invalid=True)
    assert [(r.line, r.reasons[0].split(":")[0]) for r in report.rejected] == [(3, "status"), (4, "items")]
    async with sessions() as session:
        order = (await session.exec(select(Order).where(Order.tenant_id == tenant.id))).one()
    assert order.order_number == "B-1" and order.customer_ref == "15550100099"
    assert order.items == [{"sku": "FVAM-2050-B", "quantity": 2}]

    stores = "name,address,city,lat,lon,opening_hours\nX,1 St,Town,95,0,\nY,2 St,Town,1,1,mon=9-5\n"
    slots = "starts_at,duration_min\nnot-a-date,30\n2030-01-01T10:00:00,1000\n"
    async with sessions() as session, session.begin():
        store_report = await import_csv(session, tenant_id=tenant.id, kind="stores", data=stores)
        slot_report = await import_csv(session, tenant_id=tenant.id, kind="slots", data=slots)
    assert [r.reasons[0].split(":")[0] for r in store_report.rejected] == ["lat", "opening_hours"]
    assert [r.reasons[0].split(":")[0] for r in slot_report.rejected] == ["starts_at", "duration_min"]

    with pytest.raises(ValueError, match="unknown import kind"):
        async with sessions() as session:
            await import_csv(session, tenant_id=tenant.id, kind="customers", data="a\n1\n")
    with pytest.raises(ValueError, match=r"^the file is not CSV text \(a spreadsheet or other binary file"):
        async with sessions() as session:
            await import_csv(session, tenant_id=tenant.id, kind="products", data=b"PK\x03\x04\x14\x00sku")


async def test_a_semicolon_separated_windows_1252_excel_export_imports(sessions, make_tenant):
    """What Excel on a European Windows saves as "CSV": ``;`` between fields, ``,`` in decimals is
    not ours to guess (prices use ``.``), and cp1252 bytes for €, curly quotes and en dashes."""
    tenant = await make_tenant()
    export = "sku;name;price;description\r\nAB-1;Caf\u00e9 \u201cCrema\u201d \u2013 1 kg;12.50;\u20ac12,50 in store\r\n"
    async with sessions() as session, session.begin():
        report = await import_csv(session, tenant_id=tenant.id, kind="products", data=export.encode("cp1252"))
    assert (report.committed, report.imported, report.rejected) == (True, 1, [])
    [product] = await _products(sessions, tenant.id)
    assert (product.sku, product.name, str(product.price), product.description) == (
        "AB-1",
        "Caf\u00e9 \u201cCrema\u201d \u2013 1 kg",
        "12.50",
        "\u20ac12,50 in store",
    )


async def test_a_comma_file_with_semicolons_in_values_keeps_its_columns(sessions, make_tenant):
    tenant = await make_tenant()
    data = 'sku,name,price\nAB-1,"Gasket; black; 2 mm",4.90\nAB-2,"Lid; blue",2.00\n'
    async with sessions() as session, session.begin():
        report = await import_csv(session, tenant_id=tenant.id, kind="products", data=data.encode())
    assert (report.committed, report.imported) == (True, 2)
    assert [(p.sku, p.name) for p in await _products(sessions, tenant.id)] == [
        ("AB-1", "Gasket; black; 2 mm"),
        ("AB-2", "Lid; blue"),
    ]


async def test_admin_api_toolbox_and_import(settings, sessions, make_tenant, orchestrator_url):
    tenant = await make_tenant()
    admin = {"Authorization": f"Bearer {settings.secret('admin_token')}"}
    async with httpx.AsyncClient(base_url=orchestrator_url) as http:
        prefix = f"/v1/admin/tenants/{tenant.slug}"
        assert (await http.get(f"{prefix}/tools")).status_code == 401
        listed = (await http.get(f"{prefix}/tools", headers=admin)).json()
        assert {t["tool_name"]: t["enabled"] for t in listed}["lookup_product"] is False

        enabled = await http.put(f"{prefix}/tools/create_lead", headers=admin, json={"enabled": True})
        assert enabled.status_code == 200 and enabled.json()["enabled"] is True
        configured = await http.put(
            f"{prefix}/tools/create_lead", headers=admin, json={"custom_config": {"needs_approval": True}}
        )
        assert configured.json() == {
            "tool_name": "create_lead",
            "enabled": True,
            "custom_config": {"needs_approval": True},
            "kind": "write",
        }
        assert (
            await http.put(f"{prefix}/tools/rm_rf", headers=admin, json={"enabled": True})
        ).status_code == 404
        assert (await http.get("/v1/admin/tenants/no-such-tenant/tools", headers=admin)).status_code == 404

        csv_headers = {**admin, "Content-Type": "text/csv"}
        rejected = await http.post(
            f"{prefix}/data/products", headers=csv_headers, content=GOOD_AND_BAD_PRODUCTS
        )
        assert rejected.status_code == 422 and rejected.json()["committed"] is False
        assert [r["line"] for r in rejected.json()["rejected"]] == [3, 4, 5]
        accepted = await http.post(
            f"{prefix}/data/products?skip_invalid=true", headers=csv_headers, content=GOOD_AND_BAD_PRODUCTS
        )
        assert accepted.status_code == 200 and accepted.json()["imported"] == 2
        assert (
            await http.post(f"{prefix}/data/spaceships", headers=csv_headers, content="a\n")
        ).status_code == 404
        assert (
            await http.post(f"{prefix}/data/products", headers=csv_headers, content="")
        ).status_code == 400

    assert [p.sku for p in await _products(sessions, tenant.id)] == ["AB-1", "AB-4"]
    async with sessions() as session:
        actions = (
            await session.exec(
                select(AuditLog.action).where(AuditLog.tenant_id == tenant.id, AuditLog.actor == "admin")
            )
        ).all()
    assert sorted(actions) == ["tool_configured", "tool_enabled"]


def test_cli_tools_and_data_import(cli, tmp_path):
    slug = f"cli-{uuid.uuid4().hex[:8]}"
    assert cli.run("tenant", "create", "--slug", slug, "--name", "CLI Shop").exit_code == 0

    enable = cli.run("tools", "enable", "--tenant", slug, "lookup_product")
    assert enable.exit_code == 0 and "lookup_product enabled" in enable.stdout
    configure = cli.run("tools", "configure", "--tenant", slug, "find_store", "--config", '{"limit": 2}')
    assert configure.exit_code == 0, configure.output
    listed = cli.run("tools", "list", "--tenant", slug).stdout.splitlines()
    assert any(line.split()[:3] == ["lookup_product", "enabled", "read"] for line in listed)
    assert any(
        line.startswith("find_store") and "disabled" in line and '{"limit": 2}' in line for line in listed
    )
    bad = cli.run("tools", "enable", "--tenant", slug, "nope")
    assert bad.exit_code == 2 and "unknown tool 'nope'" in bad.stderr

    csv_file = tmp_path / "products.csv"
    csv_file.write_text(GOOD_AND_BAD_PRODUCTS)
    refused = cli.run("data", "import", "--tenant", slug, "--kind", "products", str(csv_file))
    assert refused.exit_code == 1 and "nothing imported: 3 of 5 rows rejected" in refused.stderr
    assert "line 5: duplicate of line 2" in refused.stderr
    done = cli.run(
        *["data", "import", "--tenant", slug, "--kind", "products", "--skip-invalid", str(csv_file)]
    )
    assert done.exit_code == 0 and "imported 2 of 5 products rows (3 rejected)" in done.stdout


async def test_seeded_demo_business_enables_every_tool(sessions, make_tenant):
    from switchboard.seed import seed_demo_business
    from switchboard.tools.toolbox import KNOWN_TOOLS

    tenant = await make_tenant()
    async with sessions() as session, session.begin():
        await seed_demo_business(session, tenant.id)
    async with sessions() as session:
        rows = (await session.exec(select(McpTenantTool).where(McpTenantTool.tenant_id == tenant.id))).all()
    assert sorted(r.tool_name for r in rows if r.enabled) == sorted(KNOWN_TOOLS)
    assert {p.sku for p in await _products(sessions, tenant.id)} >= {"FVAM-2050-B", "FVAM-2050-C"}


def test_cli_import_reports_skipped_rows_missing_columns_and_empty_fields(cli, tmp_path):
    slug = f"cli-{uuid.uuid4().hex[:8]}"
    assert cli.run("tenant", "create", "--slug", slug, "--name", "CLI Shop").exit_code == 0
    mixed = tmp_path / "mixed.csv"
    mixed.write_text("sku,name,price\nAB-1,Fan A,10.00\nAB-2,,5.00\nAB-3,Fan C,-1\n")
    done = cli.run("data", "import", "--tenant", slug, "--kind", "products", "--skip-invalid", str(mixed))
    assert done.exit_code == 0, done.output
    lines = [line for line in done.stdout.splitlines() if "import_done" not in line]  # minus the log line
    assert lines[0] == "imported 1 of 3 products rows (2 rejected)"
    assert lines[1] == "  skipped line 3: name: is empty"
    assert lines[2].startswith("  skipped line 4: price: Input should be greater than or equal to 0")

    wrong_header = tmp_path / "wrong.csv"
    wrong_header.write_text("code,title,cost\nAB-1,Fan A,10.00\nAB-2,Fan B,5.00\n")
    refused = cli.run("data", "import", "--tenant", slug, "--kind", "products", str(wrong_header))
    assert refused.exit_code == 2
    assert refused.stderr.strip() == (
        "error: missing columns: sku, name, price (the header row has: code, title, cost)"
    )
    assert "Field required" not in refused.output


async def test_blank_optional_cells_take_their_defaults(sessions, make_tenant):
    """A spreadsheet export with empty optional cells imports; an empty required cell is named."""
    tenant = await make_tenant()
    data = "sku,name,price,description,currency,stock,color\nNU-101,Water bottle,9.50,,,,green\nNU-102,,3.00,,,,\n"
    async with sessions() as session, session.begin():
        report = await import_csv(session, tenant_id=tenant.id, kind="products", data=data)
    assert report.committed is False
    assert [(r.line, r.reasons) for r in report.rejected] == [(3, ["name: is empty"])]
    async with sessions() as session, session.begin():
        report = await import_csv(
            session,
            tenant_id=tenant.id,
            kind="products",
            data=data.splitlines(True)[0] + data.splitlines(True)[1],
        )
    assert report.committed is True and report.imported == 1
    (product,) = await _products(sessions, tenant.id)
    assert (product.description, product.currency, product.stock) == ("", "USD", 0)
    assert product.attributes == {"color": "green"}
