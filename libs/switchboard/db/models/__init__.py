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
from switchboard.db.models.console import ApiToken, ConsoleSession, ConsoleUser, ConversationRead, Role
from switchboard.db.models.conversations import (
    ActorType,
    Conversation,
    ConversationEvent,
    ConversationStatus,
    Customer,
    CustomerIdentity,
    IdentityKind,
    InboundState,
    Message,
    MessageDirection,
    MessageRole,
    Outbox,
    OutboxPurpose,
    OutboxStatus,
)
from switchboard.db.models.events import DeliveryState, EventOutbox, WebhookDelivery, WebhookEndpoint
from switchboard.db.models.feedback import Feedback
from switchboard.db.models.gmail import GmailMailbox, GmailPushNotification, GmailSentMessage, MailboxStatus
from switchboard.db.models.knowledge import (
    EMBEDDING_DIMS,
    KnowledgeDocument,
    KnowledgeSource,
    KnowledgeSourceFile,
    SourceStatus,
)
from switchboard.db.models.settings_audit import SettingsChange
from switchboard.db.models.tenancy import Channel, ChannelAccount, Organization, Tenant
from switchboard.db.models.tools import AuditLog, McpTenantTool, SecurityAlert, ToolReceipt, UserMemory
from switchboard.db.models.turns import Turn, TurnStatus

__all__ = [
    "ApiToken",
    "ConsoleSession",
    "ConsoleUser",
    "ConversationRead",
    "Role",
    "Feedback",
    "ActorType",
    "AgentStatus",
    "AuditLog",
    "Channel",
    "ChannelAccount",
    "Conversation",
    "ConversationEvent",
    "ConversationStatus",
    "Customer",
    "CustomerIdentity",
    "DeliveryState",
    "EMBEDDING_DIMS",
    "EventOutbox",
    "GmailMailbox",
    "GmailPushNotification",
    "GmailSentMessage",
    "HumanAgent",
    "IdentityKind",
    "InboundState",
    "KnowledgeDocument",
    "KnowledgeSource",
    "KnowledgeSourceFile",
    "Lead",
    "MailboxStatus",
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
    "SettingsChange",
    "SourceStatus",
    "Store",
    "Tenant",
    "TenantOwned",
    "ToolReceipt",
    "Turn",
    "TurnStatus",
    "UserMemory",
    "WebhookDelivery",
    "WebhookEndpoint",
    "utcnow",
]
