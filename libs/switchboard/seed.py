"""The demo tenant ``make run`` seeds into an empty database, so the system can be tried at once.

Its channel accounts use the fake identities of ``tests/fixtures/payloads`` (WhatsApp ``phone_number_id``
``106000000000001``, Instagram ``17841400000000001``, mailbox ``support@example.com``), so the real
payloads can be replayed against a fresh ``make run``.
"""

from __future__ import annotations

import uuid
from datetime import UTC, datetime, timedelta

from sqlmodel.ext.asyncio.session import AsyncSession

from switchboard.db.models import Tenant
from switchboard.settings import SANDBOX_API_BASE
from switchboard.tenant_settings import set_section
from switchboard.tenants import add_channel_account, count_tenants, create_tenant

__all__ = [
    "seed_demo_if_empty",
    "seed_demo_business",
    "seed_demo_knowledge",
    "DEMO_SLUG",
    "DEMO_WHATSAPP_PHONE_NUMBER_ID",
    "DEMO_CUSTOMER_BSUID",
    "demo_orders_csv",
    "DEMO_ADMIN_EMAIL",
    "seed_demo_admin",
]

DEMO_SLUG = "demo"
DEMO_WHATSAPP_PHONE_NUMBER_ID = "106000000000001"
DEMO_INSTAGRAM_ACCOUNT_ID = "17841400000000001"
DEMO_MAILBOX = "support@example.com"
DEMO_ADMIN_EMAIL = "admin@demo.example"
"""Console login of the demo tenant's admin; the password is generated at seeding and printed once."""
DEMO_CUSTOMER_BSUID = "US.10000000000000000001"
"""Business-scoped user id of the WhatsApp customer in ``tests/fixtures/payloads``: demo orders A-1001 and A-1002
are theirs (A-1003 belongs to ``wa_id`` 15550100098, A-1004 to ``switchboard simulate``'s demo customer)."""

DEMO_PRODUCTS_CSV = """sku,name,description,price,currency,stock,voltage
FVAM-2050-B,Ventilation fan FVAM 2050 (black),"Quiet 20 cm wall fan, 50 W, black housing",89.90,USD,14,230V
FVAM-2050-C,Ventilation fan FVAM 2050 (chrome),"Quiet 20 cm wall fan, 50 W, chrome housing",99.90,USD,0,230V
FVAM-3070-B,Ventilation fan FVAM 3070 (black),"30 cm wall fan, 70 W, black housing",129.00,USD,6,230V
HMD-100,Humidifier HMD 100,"Ultrasonic humidifier, 4 l tank, up to 30 m2",59.00,USD,22,
FLT-20,Replacement filter FLT 20,"Filter for FVAM 2050 fans, pack of 2",12.50,USD,120,
"""


def demo_orders_csv(now: datetime | None = None) -> str:
    """The demo orders, dated around ``now`` (default: this moment), so a shipped order is on its way
    and arrives in the coming days whenever the demo runs. A-1001 and A-1002 belong to
    :data:`DEMO_CUSTOMER_BSUID`, A-1003 to ``wa_id`` 15550100098, A-1004 to ``switchboard simulate``'s
    demo customer (the example of the Quick start asks about it)."""
    today = (now or datetime.now(UTC)).replace(minute=0, second=0, microsecond=0)

    def at(days: int, hour: int) -> str:
        return (today.replace(hour=hour) + timedelta(days=days)).strftime("%Y-%m-%dT%H:%M:%SZ")

    rows = [
        "order_number,customer,status,total,currency,items,carrier,tracking_number,placed_at,estimated_delivery",
        f"A-1001,{DEMO_CUSTOMER_BSUID},shipped,102.40,USD,FVAM-2050-B:1;FLT-20:1,UPS,1Z999AA10123456784,"
        f"{at(-4, 10)},{at(2, 18)}",
        f"A-1002,{DEMO_CUSTOMER_BSUID},delivered,59.00,USD,HMD-100:1,DHL,JD014600006281230,{at(-20, 15)},{at(-16, 18)}",
        f"A-1003,15550100098,paid,129.00,USD,FVAM-3070-B:1,,,{at(-1, 9)},",
        f"A-1004,{SIMULATED_CUSTOMER},shipped,89.90,USD,FVAM-2050-B:1,UPS,1Z999AA10123456785,{at(-3, 12)},{at(2, 18)}",
    ]
    return "\n".join(rows) + "\n"


SIMULATED_CUSTOMER = "simulate:demo-customer"
"""The customer of ``switchboard simulate`` without ``--customer`` (its external id)."""
DEMO_STORES_CSV = """name,address,city,country,phone,lat,lon,opening_hours
Demo Shop Downtown,12 Market Street,Springfield,US,+1 555 0100 010,39.7817,-89.6501,mon=09:00-19:00;tue=09:00-19:00;wed=09:00-19:00;thu=09:00-19:00;fri=09:00-19:00;sat=10:00-16:00;sun=closed
Demo Shop Riverside,400 River Road,Springfield,US,+1 555 0100 011,39.7500,-89.7000,mon=10:00-18:00;tue=10:00-18:00;wed=10:00-18:00;thu=10:00-18:00;fri=10:00-18:00;sat=closed;sun=closed
Demo Shop Lakeside,8 Shore Avenue,Chicago,US,+1 555 0100 012,41.8781,-87.6298,mon=09:00-20:00;tue=09:00-20:00;wed=09:00-20:00;thu=09:00-20:00;fri=09:00-20:00;sat=09:00-17:00;sun=11:00-15:00
"""


DEMO_FAQ_FILENAME = "demo-shop-faq.md"
DEMO_CHUNK_SIZE_CHARS = 400
"""The demo tenant's chunk size (its ``knowledge.chunk_size_chars``): one FAQ answer per chunk."""
DEMO_FAQ_MD = "\n\n".join(
    (  # one paragraph per answer, one line each (a quoted passage prints on one line)
        (
            "**What are your opening hours?** Our opening hours: Demo Shop Downtown is open Monday to Friday "
            "09:00-19:00 and Saturday 10:00-16:00. Demo Shop Riverside is open Monday to Friday 10:00-18:00. "
            "Demo Shop Lakeside is open Monday to Friday 09:00-20:00, Saturday 09:00-17:00 and Sunday "
            "11:00-15:00."
        ),
        (
            "**What is your returns policy?** Returns: you can return any product within 30 days of delivery "
            "for a full refund, unused and in its original packaging. Start a return by writing to us with "
            "your order number; the return label is free. Refunds reach your card within 5 business days."
        ),
        (
            "**How long does shipping take?** Shipping: orders placed before 14:00 leave our warehouse the "
            "same business day. Standard delivery takes 3 to 5 business days, express delivery 1 to 2 "
            "business days. Shipping is free on orders over 50 USD."
        ),
        (
            "**What warranty do your products have?** Warranty: every fan and humidifier has a 2-year "
            "manufacturer warranty covering defects. Filters and other consumables are not covered. For a "
            "warranty claim, send us your order number and a photo of the problem."
        ),
        (
            "**Does it come in another color? Is the blue one back in stock?** Colors and stock: the FVAM "
            "2050 fan comes in black, chrome and blue. The black one is in stock, the chrome one is sold out "
            "until mid-December, and the blue one is back in stock this week. The FVAM 3070 is black only."
        ),
        (
            "**How can I contact you?** Contact: write to us here at any time, email support@example.com, or "
            "call +1 555 0100 010 during the Downtown store's opening hours. A person answers within one "
            "business day."
        ),
        (
            "**¿Cuál es su horario?** Nuestro horario: Demo Shop Downtown abre de lunes a viernes de 09:00 a "
            "19:00 y el sábado de 10:00 a 16:00. Demo Shop Riverside abre de lunes a viernes de 10:00 a 18:00. "
            "Demo Shop Lakeside abre de lunes a viernes de 09:00 a 20:00, el sábado de 09:00 a 17:00 y el "
            "domingo de 11:00 a 15:00."
        ),
        (
            "**¿Cómo puedo devolver un producto?** Devoluciones: puede devolver cualquier producto en los 30 "
            "días siguientes a la entrega y le reembolsamos todo, sin usar y en su embalaje original. "
            "Escríbanos con su número de pedido; la etiqueta de devolución es gratuita."
        ),
        (
            "**¿Cuánto tarda el envío?** Envíos: los pedidos hechos antes de las 14:00 salen del almacén el "
            "mismo día hábil. La entrega estándar tarda de 3 a 5 días hábiles y la urgente de 1 a 2. El envío "
            "es gratuito en pedidos de más de 50 USD."
        ),
        (
            "**¿Qué garantía tienen sus productos?** Garantía: todos los ventiladores y humidificadores tienen "
            "2 años de garantía del fabricante contra defectos. Los filtros y otros consumibles no están "
            "cubiertos. Para reclamar, envíenos su número de pedido y una foto del problema."
        ),
        (
            "**¿Viene en otro color? ¿Vuelve a haber el azul?** Colores y existencias: el ventilador FVAM 2050 "
            "viene en negro, cromado y azul. El negro está disponible, el cromado está agotado hasta mediados "
            "de diciembre y el azul vuelve a estar disponible esta semana. El FVAM 3070 solo viene en negro."
        ),
        (
            "**¿Cómo puedo contactarles?** Contacto: escríbanos aquí cuando quiera, por correo a "
            "support@example.com, o llame al +1 555 0100 010 en el horario de la tienda Downtown. Una persona "
            "responde en un día hábil."
        ),
    )
)
"""The demo knowledge base: one FAQ document, in English and Spanish, so questions about hours, returns,
shipping, warranty, colors and stock, and contact find an answer in the customer's language (the demo in docs/getting-started.md and the payloads' questions)."""


def demo_slots_csv(now: datetime | None = None, days: int = 5) -> str:
    """Free 30-minute slots at 10:00 and 15:00 UTC on the next ``days`` days after ``now``."""
    start = (now or datetime.now(UTC)).replace(hour=0, minute=0, second=0, microsecond=0)
    lines = ["starts_at,duration_min,resource"]
    for day in range(1, days + 1):
        for hour in (10, 15):
            when = start + timedelta(days=day, hours=hour)
            lines.append(f"{when.isoformat()},30,advisor")
    return "\n".join(lines) + "\n"


async def seed_demo_business(session: AsyncSession, tenant_id: uuid.UUID) -> None:
    """Give a tenant the demo catalog, orders, stores and free slots, and enable every tool.

    Raises:
        ValueError: a bundled demo file failed validation (a programming error).
    """
    from switchboard.tools.importers import import_csv
    from switchboard.tools.toolbox import enable_all

    for kind, data in (
        ("products", DEMO_PRODUCTS_CSV),
        ("orders", demo_orders_csv()),
        ("stores", DEMO_STORES_CSV),
        ("slots", demo_slots_csv()),
    ):
        report = await import_csv(session, tenant_id=tenant_id, kind=kind, data=data, actor="system")
        if not report.committed:
            raise ValueError(f"demo {kind} rejected: {report.rejected}")
    await enable_all(session, tenant_id)


async def seed_demo_knowledge(session: AsyncSession, tenant: Tenant) -> None:
    """Pin ``tenant`` to the offline lexical embedding and ingest the demo FAQ in this transaction.

    Pinned so the FAQ's vectors and the questions' vectors come from the same model even when a
    provider key is set (``switchboard kb reindex --tenant demo --model ...`` switches later).
    Chunks are one FAQ answer each (400 characters, no overlap), so a search quotes the right one.

    Raises:
        DocumentRejected: the bundled FAQ failed to parse (a programming error).
    """
    from switchboard.knowledge import EmbeddingConfig, ingest_in_session
    from switchboard.llm.lexical import LEXICAL_MODEL_NAME

    # stored on the tenant, so `kb reindex` splits the FAQ exactly as here (not at KB_CHUNK_SIZE_CHARS)
    set_section(
        tenant,
        "knowledge",
        embedding_model=LEXICAL_MODEL_NAME,
        chunk_size_chars=DEMO_CHUNK_SIZE_CHARS,
        chunk_overlap_chars=0,
    )
    session.add(tenant)
    await ingest_in_session(
        session,
        tenant_id=tenant.id,
        filename=DEMO_FAQ_FILENAME,
        data=DEMO_FAQ_MD.encode(),
        config=EmbeddingConfig(model=LEXICAL_MODEL_NAME),
        chunk_size=DEMO_CHUNK_SIZE_CHARS,
        overlap=0,
    )


async def seed_demo_if_empty(session: AsyncSession) -> Tenant | None:
    """Create the ``demo`` tenant with its channel accounts, business data and FAQ document when no
    tenant exists.

    Returns:
        The new tenant, or ``None`` when the database already had tenants (nothing is changed).
    """
    if await count_tenants(session) > 0:
        return None
    tenant = await create_tenant(
        session, slug=DEMO_SLUG, name="Demo Shop", organization_name="Demo Organization"
    )
    set_section(
        tenant,
        "agent",
        name="Sam",
        instructions="You are Sam, the friendly support agent of Demo Shop. Answer briefly and only from "
        "what the tools return; when unsure, say so and offer a human.",
    )
    await add_channel_account(
        session,
        tenant=tenant,
        channel="whatsapp",
        external_account_id=DEMO_WHATSAPP_PHONE_NUMBER_ID,
        display_name="Demo Shop WhatsApp (+1 555-0100-001)",
        api_base_url=SANDBOX_API_BASE,
    )
    await add_channel_account(
        session,
        tenant=tenant,
        channel="instagram",
        external_account_id=DEMO_INSTAGRAM_ACCOUNT_ID,
        display_name="Demo Shop Instagram",
        api_base_url=SANDBOX_API_BASE,
    )
    await add_channel_account(
        session,
        tenant=tenant,
        channel="gmail",
        external_account_id=DEMO_MAILBOX,
        display_name="Demo Shop support mailbox",
    )
    await session.flush()
    await seed_demo_business(session, tenant.id)
    await seed_demo_knowledge(session, tenant)
    return tenant


async def seed_demo_admin(session: AsyncSession, tenant: Tenant) -> tuple[str, str]:
    """The demo tenant's console admin (:data:`DEMO_ADMIN_EMAIL`) with a generated password.

    Returns:
        ``(email, password)``: the password exists only in this return value (``switchboard run``
        prints it once); ``switchboard users passwd`` sets a new one.
    """
    from switchboard.users import create_user, generate_password

    password = generate_password()
    await create_user(
        session,
        email=DEMO_ADMIN_EMAIL,
        password=password,
        role="tenant_admin",
        tenant_id=tenant.id,
        name="Demo admin",
    )
    return DEMO_ADMIN_EMAIL, password
