"""The tenant business tools: their argument and result shapes, their contracts and handlers.

Every handler gets a :class:`~switchboard.tools.contracts.ToolCallContext` whose tenant (and
customer) came from the orchestrator's injection; every query filters on that tenant through
:class:`~switchboard.db.tenant_scope.TenantScope`. The model chooses only the fields of the input
models below. Descriptions and field docs are what the model reads.
"""

from __future__ import annotations

import math
import re
from datetime import UTC, datetime
from decimal import Decimal
from typing import Annotated, Any, Literal

from pydantic import BaseModel, ConfigDict, Field, StringConstraints, field_validator
from sqlalchemy import func, or_
from sqlmodel import col

from switchboard.db.models import (
    Customer,
    Lead,
    Meeting,
    MeetingSlot,
    Order,
    PendingAction,
    Product,
    Store,
)
from switchboard.db.tenant_scope import TenantScope
from switchboard.errors import ToolError
from switchboard.handoff.pending import stage_approval_requested
from switchboard.knowledge import EmbeddingFailed, search_chunks
from switchboard.knowledge.graph.explore import explore_entities
from switchboard.leads.capture import stage_lead_created
from switchboard.tools.contracts import (
    UNSTORABLE_PROBLEM,
    ToolCallContext,
    ToolContract,
    ToolPolicy,
    WriteResult,
    unstorable_field,
)
from switchboard.validation import check_datetime_range

__all__ = ["BUSINESS_TOOLS", "normalize_sku", "normalize_order_number", "haversine_km"]

TOOL_VERSION = "1.0"
_SKU_LIKE = re.compile(r"^[A-Za-z0-9][A-Za-z0-9._/-]*\d[A-Za-z0-9._/-]*$")
_COORDINATES = re.compile(r"^\s*(-?\d{1,2}(?:\.\d+)?)\s*[,; ]\s*(-?\d{1,3}(?:\.\d+)?)\s*$")
EARTH_RADIUS_KM = 6371.0088
"""Mean Earth radius (IUGG), for the haversine distance."""


def normalize_sku(value: str) -> str:
    """Trimmed, upper-case SKU (``" fvam-2050-b "`` → ``"FVAM-2050-B"``)."""
    return value.strip().upper()


def normalize_order_number(value: str) -> str:
    """Trimmed, upper-case order number without a leading ``#``."""
    return value.strip().lstrip("#").strip().upper()


def haversine_km(lat1: float, lon1: float, lat2: float, lon2: float) -> float:
    """Great-circle distance in kilometres between two WGS84 points given in degrees."""
    p1, p2 = math.radians(lat1), math.radians(lat2)
    dp, dl = p2 - p1, math.radians(lon2 - lon1)
    a = math.sin(dp / 2) ** 2 + math.cos(p1) * math.cos(p2) * math.sin(dl / 2) ** 2
    return 2 * EARTH_RADIUS_KM * math.asin(math.sqrt(a))


class _Args(BaseModel):
    model_config = ConfigDict(extra="forbid", str_strip_whitespace=True)

    @field_validator("*", mode="before")
    @classmethod
    def _storable(cls, value: Any) -> Any:
        """Text Postgres cannot store (NUL, unpaired surrogates) is an invalid argument, never a query."""
        if unstorable_field(value) is not None:
            raise ValueError(UNSTORABLE_PROBLEM)
        return value

    @field_validator("*", mode="after")
    @classmethod
    def _in_range(cls, value: Any) -> Any:
        """A date whose UTC time leaves the years 1-9999 is an invalid argument, never a query."""
        return check_datetime_range(value) if isinstance(value, datetime) else value


# --- search_knowledge_base ------------------------------------------------------------------------
class SearchKnowledgeArgs(_Args):
    query: str = Field(min_length=1, max_length=500, description="The customer's question, in their words.")
    mode: Literal["hybrid", "exact", "vector", "graph", "neighborhood"] = Field(
        "hybrid",
        description="'hybrid' for questions (also follows the product graph from what they name); "
        "'exact' to find a code such as a part number verbatim; 'graph' for questions whose answer "
        "connects several documents (a product, its material, a fluid); 'neighborhood' for the best "
        "passage and what is directly related to it.",
    )


class KnowledgePassage(BaseModel):
    text: str
    document: str
    page: int | None = None
    score: float


class KnowledgeResult(BaseModel):
    passages: list[KnowledgePassage]
    """Best first; empty when nothing relevant was found (then say you don't know)."""


async def search_knowledge_base(ctx: ToolCallContext, args: SearchKnowledgeArgs) -> KnowledgeResult:
    if ctx.settings is None:
        raise ToolError("knowledge search is not configured on this server", error_type="unavailable")
    limit = int(ctx.tool_config.get("limit", 5))
    try:
        hits = await search_chunks(
            ctx.session,
            tenant_id=ctx.tenant_id,
            query=args.query,
            mode=args.mode,
            limit=max(1, min(limit, 20)),
            settings=ctx.settings,
        )
    except EmbeddingFailed:
        raise ToolError(
            "the knowledge search is unavailable right now", error_type="unavailable", retryable=True
        ) from None
    return KnowledgeResult(
        passages=[
            KnowledgePassage(text=h.text, document=h.document, page=h.page, score=h.score) for h in hits
        ]
    )


# --- explore_knowledge_graph ----------------------------------------------------------------------
class ExploreGraphArgs(_Args):
    entities: list[Annotated[str, StringConstraints(strip_whitespace=True, min_length=1, max_length=100)]] = (
        Field(
            min_length=1,
            max_length=5,
            description="Names of products, part numbers, series, materials, fluids or standards, as the "
            "customer wrote them, e.g. ['V200', 'chlorine'].",
        )
    )
    hops: int = Field(
        1,
        ge=0,
        le=2,
        description="How far to follow relations: 0 = passages naming these only, 1 = and their direct "
        "neighbours (the series' seat material, a material's compatibility), 2 = one step further.",
    )


class GraphEntity(BaseModel):
    name: str
    kind: str
    """product, family, material, fluid, standard or range."""


class GraphRelation(BaseModel):
    subject: str
    relation: str
    """belongs_to_family, compatible_with, incompatible_with, rated_for, equivalent_of, replaces, made_of."""
    object: str
    document: str
    """The document the relation was read from."""


class GraphResult(BaseModel):
    entities: list[GraphEntity]
    """The named entities found in the documents; empty when none is known (then say you don't know)."""
    relations: list[GraphRelation]
    passages: list[KnowledgePassage]
    """Best first: quote these, not the relations alone."""


async def explore_knowledge_graph(ctx: ToolCallContext, args: ExploreGraphArgs) -> GraphResult:
    found = await explore_entities(
        ctx.session,
        tenant_id=ctx.tenant_id,
        names=args.entities,
        hops=args.hops,
        limit=max(1, min(int(ctx.tool_config.get("limit", 5)), 20)),
    )
    return GraphResult(
        entities=[GraphEntity(**e) for e in found.entities],
        relations=[GraphRelation(**r) for r in found.relations],
        passages=[KnowledgePassage(**c) for c in found.chunks],
    )


# --- lookup_product -------------------------------------------------------------------------------
class LookupProductArgs(_Args):
    sku_or_name: str = Field(
        min_length=1,
        max_length=200,
        description="An exact SKU (e.g. 'FVAM-2050-B') or words from the product name.",
    )


class ProductInfo(BaseModel):
    sku: str
    name: str
    description: str
    price: Decimal
    currency: str
    stock: int
    in_stock: bool
    attributes: dict[str, Any]


class ProductResult(BaseModel):
    match: Literal["exact_sku", "name", "none"]
    """``exact_sku``: exactly the product asked for; ``name``: candidates by name; ``none``: nothing."""
    products: list[ProductInfo]


def _product_info(p: Product) -> ProductInfo:
    return ProductInfo(
        sku=p.sku,
        name=p.name,
        description=p.description,
        price=p.price,
        currency=p.currency,
        stock=p.stock,
        in_stock=p.stock > 0,
        attributes=p.attributes,
    )


async def lookup_product(ctx: ToolCallContext, args: LookupProductArgs) -> ProductResult:
    scope = TenantScope(ctx.session, ctx.tenant_id)
    exact = await scope.first(Product, Product.sku == normalize_sku(args.sku_or_name), col(Product.is_active))
    if exact is not None:
        return ProductResult(match="exact_sku", products=[_product_info(exact)])
    if _SKU_LIKE.match(args.sku_or_name) and " " not in args.sku_or_name:
        # a code that is not ours: never offer a near neighbour (FVAM-2050-C for FVAM-2050-B)
        return ProductResult(match="none", products=[])
    words = [w for w in re.findall(r"\w+", args.sku_or_name.lower()) if len(w) > 1]
    if not words:
        return ProductResult(match="none", products=[])
    conditions = [func.lower(Product.name).contains(w) for w in words]
    rows = await scope.all(Product, col(Product.is_active), or_(*conditions))
    ranked = sorted(rows, key=lambda p: (-sum(w in p.name.lower() for w in words), p.name))[:5]
    return ProductResult(match="name" if ranked else "none", products=[_product_info(p) for p in ranked])


# --- check_order_status ---------------------------------------------------------------------------
class CheckOrderArgs(_Args):
    order_number: str = Field(
        min_length=1, max_length=64, description="The order reference the customer gave."
    )


class OrderStatus(BaseModel):
    found: bool
    order_number: str
    status: str | None = None
    total: Decimal | None = None
    currency: str | None = None
    items: list[dict[str, Any]] = Field(default_factory=list)
    carrier: str | None = None
    tracking_number: str | None = None
    placed_at: datetime | None = None
    estimated_delivery: datetime | None = None


async def check_order_status(ctx: ToolCallContext, args: CheckOrderArgs) -> OrderStatus:
    if ctx.customer_id is None:
        raise ToolError("this tool needs the conversation's customer", error_type="missing_customer")
    scope = TenantScope(ctx.session, ctx.tenant_id)
    customer = await scope.get(Customer, ctx.customer_id)
    if customer is None:
        raise ToolError("unknown customer for this tenant", error_type="missing_customer")
    identities = {v for v in (customer.external_user_id, customer.phone, customer.email) if v}
    number = normalize_order_number(args.order_number)
    owner = Order.customer_id == customer.id
    if identities:
        owner = or_(owner, col(Order.customer_ref).in_(identities))
    order = await scope.first(Order, Order.order_number == number, owner)
    if order is None:
        # the same answer whether the number does not exist or belongs to someone else
        return OrderStatus(found=False, order_number=number)
    return OrderStatus(
        found=True,
        order_number=order.order_number,
        status=order.status,
        total=order.total,
        currency=order.currency,
        items=order.items,
        carrier=order.carrier,
        tracking_number=order.tracking_number,
        placed_at=order.placed_at,
        estimated_delivery=order.estimated_delivery,
    )


# --- find_store -----------------------------------------------------------------------------------
class FindStoreArgs(_Args):
    city_or_coordinates: str = Field(
        min_length=1,
        max_length=200,
        description="A city name, or 'latitude,longitude' in degrees (e.g. '40.4,-3.7').",
    )


class StoreInfo(BaseModel):
    name: str
    address: str
    city: str
    phone: str | None
    opening_hours: dict[str, Any]
    distance_km: float | None = None


class StoreResult(BaseModel):
    stores: list[StoreInfo]
    """Nearest first (by coordinates) or all stores of the city; empty when none match."""


async def find_store(ctx: ToolCallContext, args: FindStoreArgs) -> StoreResult:
    scope = TenantScope(ctx.session, ctx.tenant_id)
    limit = int(ctx.tool_config.get("limit", 3))
    coordinates = _COORDINATES.match(args.city_or_coordinates)
    if coordinates:
        lat, lon = float(coordinates.group(1)), float(coordinates.group(2))
        if not (-90 <= lat <= 90 and -180 <= lon <= 180):
            raise ToolError(
                "coordinates out of range",
                error_type="invalid_arguments",
                diagnostics=[
                    {"field": "city_or_coordinates", "problem": "latitude -90..90, longitude -180..180"}
                ],
            )
        stores = await scope.all(Store)
        nearest = sorted(((haversine_km(lat, lon, s.lat, s.lon), s) for s in stores), key=lambda x: x[0])
        return StoreResult(stores=[_store_info(s, round(d, 1)) for d, s in nearest[:limit]])
    city = args.city_or_coordinates.strip().lower()
    stores = await scope.all(Store, func.lower(Store.city) == city)
    if not stores:
        stores = await scope.all(Store, func.lower(Store.city).contains(city))
    return StoreResult(stores=[_store_info(s, None) for s in sorted(stores, key=lambda s: s.name)[:limit]])


def _store_info(store: Store, distance_km: float | None) -> StoreInfo:
    return StoreInfo(
        name=store.name,
        address=store.address,
        city=store.city,
        phone=store.phone,
        opening_hours=store.opening_hours,
        distance_km=distance_km,
    )


# --- schedule_meeting (write) ---------------------------------------------------------------------
class ScheduleMeetingArgs(_Args):
    slot: datetime = Field(
        description="Start of a free slot, ISO 8601 with time zone (e.g. '2026-12-02T10:00:00Z')."
    )
    topic: str = Field(min_length=1, max_length=500, description="What the meeting is about, in a few words.")


class MeetingResult(WriteResult):
    meeting_id: str | None = None
    starts_at: datetime | None = None
    duration_min: int | None = None
    free_slots: list[datetime] = Field(default_factory=list)
    """When the slot asked for is not free: the next free ones."""


async def schedule_meeting(ctx: ToolCallContext, args: ScheduleMeetingArgs) -> MeetingResult:
    assert ctx.idempotency_key is not None  # the server refuses writes without one
    scope = TenantScope(ctx.session, ctx.tenant_id)
    done = await scope.first(Meeting, Meeting.idempotency_key == ctx.idempotency_key)
    if done is not None:
        slot = await scope.get(MeetingSlot, done.slot_id)
        return MeetingResult(
            status="done",
            message="meeting already booked",
            meeting_id=str(done.id),
            replayed=True,
            starts_at=slot.starts_at if slot else None,
            duration_min=slot.duration_min if slot else None,
        )
    starts_at = args.slot if args.slot.tzinfo else args.slot.replace(tzinfo=UTC)
    slot = (
        await ctx.session.exec(
            scope.select(
                MeetingSlot, MeetingSlot.starts_at == starts_at, col(MeetingSlot.is_booked).is_(False)
            )
            .limit(1)
            .with_for_update(skip_locked=True)
        )
    ).first()
    if slot is None:
        upcoming = await scope.all(
            MeetingSlot, col(MeetingSlot.is_booked).is_(False), MeetingSlot.starts_at > datetime.now(UTC)
        )
        free = sorted(s.starts_at for s in upcoming)[:5]
        return MeetingResult(
            status="done", message="that slot is not free; offer one of free_slots", free_slots=free
        )
    slot.is_booked = True
    meeting = scope.add(
        Meeting(
            tenant_id=ctx.tenant_id,
            slot_id=slot.id,
            customer_id=ctx.customer_id,
            conversation_id=ctx.conversation_id,
            topic=args.topic,
            idempotency_key=ctx.idempotency_key,
        )
    )
    await ctx.session.flush()
    ctx.audit(
        "schedule_meeting",
        target_type="meeting_slot",
        target_id=str(slot.id),
        before={"is_booked": False},
        after={"is_booked": True, "meeting_id": str(meeting.id), "topic": args.topic},
    )
    return MeetingResult(
        status="done",
        message="meeting booked",
        meeting_id=str(meeting.id),
        starts_at=slot.starts_at,
        duration_min=slot.duration_min,
    )


# --- create_lead (write) --------------------------------------------------------------------------
class CreateLeadArgs(_Args):
    interest: str = Field(min_length=1, max_length=500, description="What the customer is interested in.")
    notes: str = Field(
        "", max_length=2000, description="Anything a salesperson should know (budget, timing...)."
    )


class LeadResult(WriteResult):
    lead_id: str | None = None


async def create_lead(ctx: ToolCallContext, args: CreateLeadArgs) -> LeadResult:
    assert ctx.idempotency_key is not None
    scope = TenantScope(ctx.session, ctx.tenant_id)
    done = await scope.first(Lead, Lead.idempotency_key == ctx.idempotency_key)
    if done is not None:
        return LeadResult(status="done", message="lead already recorded", lead_id=str(done.id), replayed=True)
    lead = scope.add(
        Lead(
            tenant_id=ctx.tenant_id,
            customer_id=ctx.customer_id,
            conversation_id=ctx.conversation_id,
            interest=args.interest,
            notes=args.notes,
            idempotency_key=ctx.idempotency_key,
        )
    )
    await ctx.session.flush()
    stage_lead_created(ctx.session, lead)
    ctx.audit(
        "create_lead",
        target_type="lead",
        target_id=str(lead.id),
        before=None,
        after={"interest": args.interest, "notes": args.notes},
    )
    return LeadResult(
        status="done", message="lead recorded; a salesperson will follow up", lead_id=str(lead.id)
    )


async def request_approval(ctx: ToolCallContext, tool_name: str, args: BaseModel) -> PendingAction:
    """Record a write for a person to approve instead of running it (idempotent on the key)."""
    scope = TenantScope(ctx.session, ctx.tenant_id)
    existing = await scope.first(PendingAction, PendingAction.idempotency_key == ctx.idempotency_key)
    if existing is not None:
        return existing
    action = scope.add(
        PendingAction(
            tenant_id=ctx.tenant_id,
            tool_name=tool_name,
            arguments=args.model_dump(mode="json"),
            customer_id=ctx.customer_id,
            conversation_id=ctx.conversation_id,
            trace_id=ctx.trace_id,
            idempotency_key=ctx.idempotency_key or "",
        )
    )
    await ctx.session.flush()
    stage_approval_requested(ctx.session, action)
    ctx.audit(
        "pending_action_created",
        target_type="pending_action",
        target_id=str(action.id),
        before=None,
        after={"tool_name": tool_name, "arguments": action.arguments},
    )
    return action


_READ = ToolPolicy(kind="read", call_limit=3)
_WRITE = ToolPolicy(kind="write", call_limit=1)

BUSINESS_TOOLS: tuple[ToolContract, ...] = (
    ToolContract(
        name="search_knowledge_base",
        version=TOOL_VERSION,
        policy=_READ,
        description="Search the business's documents (FAQ, policies, manuals, price lists) for passages "
        "that answer the customer's question. Answer only from the passages returned.",
        input_model=SearchKnowledgeArgs,
        result_model=KnowledgeResult,
        handler=search_knowledge_base,
    ),
    ToolContract(
        name="explore_knowledge_graph",
        version=TOOL_VERSION,
        policy=_READ,
        description="Follow the business's product knowledge graph from things the customer named "
        "(part numbers, series, materials, fluids, standards): what they are made of, compatible or "
        "incompatible with, rated for, replaced by, and the passages that say so. Use it when an answer "
        "connects several documents, e.g. a valve series, its seat material and a fluid.",
        input_model=ExploreGraphArgs,
        result_model=GraphResult,
        handler=explore_knowledge_graph,
    ),
    ToolContract(
        name="lookup_product",
        version=TOOL_VERSION,
        policy=_READ,
        description="Look up a product in the catalog by exact SKU or by name: price, stock, description. "
        "An exact SKU returns only that product.",
        input_model=LookupProductArgs,
        result_model=ProductResult,
        handler=lookup_product,
    ),
    ToolContract(
        name="check_order_status",
        version=TOOL_VERSION,
        policy=_READ,
        description="Status, items, carrier and tracking of one of this customer's orders, by order number.",
        input_model=CheckOrderArgs,
        result_model=OrderStatus,
        handler=check_order_status,
    ),
    ToolContract(
        name="find_store",
        version=TOOL_VERSION,
        policy=_READ,
        description="Find stores near a city or coordinates, with address, phone and opening hours.",
        input_model=FindStoreArgs,
        result_model=StoreResult,
        handler=find_store,
    ),
    ToolContract(
        name="schedule_meeting",
        version=TOOL_VERSION,
        policy=_WRITE,
        description="Book a free meeting slot for this customer. Confirm the time with the customer first.",
        input_model=ScheduleMeetingArgs,
        result_model=MeetingResult,
        handler=schedule_meeting,
    ),
    ToolContract(
        name="create_lead",
        version=TOOL_VERSION,
        policy=_WRITE,
        description="Record a sales lead for this customer (what they want, notes for a salesperson).",
        input_model=CreateLeadArgs,
        result_model=LeadResult,
        handler=create_lead,
    ),
)
"""Every tool the MCP server offers, in the order it lists them."""
