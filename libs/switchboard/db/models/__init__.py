"""All tables of the data model (DESIGN.md, "Data"). Importing this package registers them."""

from switchboard.db.models.agents import AgentStatus, HumanAgent
from switchboard.db.models.base import TenantOwned, utcnow
from switchboard.db.models.business import (
    Lead,
    Meeting,
    MeetingSlot,
    Order,
    PendingAction,
    PendingActionStatus,
    Product,
    Store,
)
from switchboard.db.models.conversations import (
    Conversation,
    ConversationStatus,
    Customer,
    InboundState,
    Message,
    MessageDirection,
    MessageRole,
    Outbox,
    OutboxPurpose,
    OutboxStatus,
)
from switchboard.db.models.knowledge import (
    EMBEDDING_DIMS,
    KnowledgeDocument,
    KnowledgeSource,
    KnowledgeSourceFile,
    SourceStatus,
)
from switchboard.db.models.tenancy import Channel, ChannelAccount, Organization, Tenant
from switchboard.db.models.tools import AuditLog, McpTenantTool, SecurityAlert, ToolReceipt, UserMemory
from switchboard.db.models.turns import Turn, TurnStatus

__all__ = [
    "AgentStatus",
    "AuditLog",
    "Channel",
    "ChannelAccount",
    "Conversation",
    "ConversationStatus",
    "Customer",
    "EMBEDDING_DIMS",
    "HumanAgent",
    "InboundState",
    "KnowledgeDocument",
    "KnowledgeSource",
    "KnowledgeSourceFile",
    "Lead",
    "McpTenantTool",
    "Meeting",
    "MeetingSlot",
    "Message",
    "MessageDirection",
    "MessageRole",
    "Order",
    "Organization",
    "Outbox",
    "OutboxPurpose",
    "OutboxStatus",
    "PendingAction",
    "PendingActionStatus",
    "Product",
    "SecurityAlert",
    "SourceStatus",
    "Store",
    "Tenant",
    "TenantOwned",
    "ToolReceipt",
    "Turn",
    "TurnStatus",
    "UserMemory",
    "utcnow",
]
