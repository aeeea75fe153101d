"""Words the console shows for the agent settings form, in one place: each setting's label and its
one-line explanation (units in words), the groups of the form's "Advanced" part, and the model
providers with the inputs each one needs. Marked for the gettext catalog (``make i18n`` extracts only
literal strings); the templates translate them with ``_(...)``.

Keys are setting paths without row numbers: ``agent.name``, ``guardrails.input.threshold``, and
``deployment.<field>`` for every field of a model deployment (``llm.deployments.0.model`` and
``guardrails.input.deployments.1.model`` alike). ``tests/console/test_setting_words.py`` fails when a
setting has no label or explanation in English and Spanish.

Also here: the choices of every select in words (:data:`OPTION_WORDS`, :func:`option_words`), stored
values as the console shows them (:data:`VALUE_WORDS`: history, delivery states, the inbox's mode
filter) and the outcomes of turns and tool calls.
"""

from __future__ import annotations

from dataclasses import dataclass

from switchboard.i18n import N_

__all__ = [
    "SETTING_WORDS",
    "SettingWords",
    "ADVANCED_GROUPS",
    "group_of",
    "words_for",
    "setting_path",
    "PROVIDERS",
    "ProviderWords",
    "SECTION_WORDS",
    "NOTICE_WORDS",
    "VALUE_WORDS",
    "value_words",
    "OPTION_WORDS",
    "option_words",
    "ERROR_WORDS",
    "PATTERN_WORDS",
    "UNREADABLE_VALUE",
    "error_words",
    "MODE_WORDS",
    "OUTCOME_WORDS",
]


@dataclass(frozen=True)
class SettingWords:
    """A setting as the form shows it: ``label`` (a few words) and ``help`` (one line, units in words)."""

    label: str
    help: str


def _w(label: str, help: str) -> SettingWords:
    return SettingWords(label, help)


SETTING_WORDS: dict[str, SettingWords] = {
    # agent
    "agent.name": _w(N_("Agent's name"), N_("The name the assistant uses with customers.")),
    "agent.instructions": _w(
        N_("Instructions"), N_("What the assistant should do and how it should sound, in your own words.")
    ),
    "agent.system_prompt": _w(
        N_("Full system prompt"),
        N_(
            "Replaces the built-in prompt entirely; leave empty to use the built-in one with your instructions."
        ),
    ),
    "agent.typed_replies": _w(
        N_("Buttons and product cards"),
        N_("Let the assistant answer with buttons, lists and product cards where the channel shows them."),
    ),
    "agent.handoff_reply": _w(
        N_("Reply when handing over to a person"),
        N_("Sent when the assistant hands the conversation to your team and has no words of its own."),
    ),
    "agent.farewell_reply": _w(
        N_("Goodbye reply"), N_("Sent when the assistant ends a conversation and has no words of its own.")
    ),
    "agent.error_reply": _w(
        N_("Reply when no model answers"), N_("Sent when every model failed or the answer took too long.")
    ),
    "agent.waiting_reply": _w(
        N_("Reply while the model is down"),
        N_("Sent when every model failed; the question is kept and answered once a model answers again."),
    ),
    "agent.first_reply_deadline_s": _w(
        N_("Time before the holding reply"),
        N_("Seconds (3 to 120) a customer waits before getting the holding reply."),
    ),
    "agent.holding_reply": _w(
        N_("Holding reply"),
        N_("The short message sent when the answer is not ready in time; the answer follows."),
    ),
    # loop
    "loop.max_tool_iterations": _w(
        N_("Tool rounds per answer"),
        N_("How many times the model may call tools before it must answer in words."),
    ),
    "loop.turn_timeout_s": _w(
        N_("Time limit for one answer"), N_("Seconds the whole answer may take, tools included.")
    ),
    "loop.tool_timeout_s": _w(
        N_("Time limit for one tool call"), N_("Seconds one tool call may take before it counts as failed.")
    ),
    "loop.max_tool_result_chars": _w(
        N_("Tool result length"), N_("Characters of a tool's result the model reads; the rest is cut.")
    ),
    "loop.max_raw_tool_result_chars": _w(
        N_("Longest raw tool result"),
        N_("Characters of a tool's output kept at most, before anything else reads it."),
    ),
    "loop.per_tool_call_cap": _w(
        N_("Calls of one tool per answer"),
        N_("How many times the same tool may be called while answering one message."),
    ),
    "loop.always_on_tools": _w(
        N_("Tools without a call limit"),
        N_("Tool names, one per line, that the per-tool limit does not apply to."),
    ),
    "loop.max_tool_calls_per_turn": _w(
        N_("Tool calls per answer"), N_("How many tool calls in all one answer may make.")
    ),
    # llm
    "llm.deployments": _w(
        N_("Models"), N_("The models that answer, first one first; the next ones take over when it fails.")
    ),
    "llm.transcription": _w(
        N_("Voice message models"),
        N_("Models that write down customers' voice messages, first one first; none: the platform's."),
    ),
    "llm.vision": _w(
        N_("Picture models"),
        N_(
            "Models that describe customers' pictures, first one first; none: your models above that see pictures, else the platform's."
        ),
    ),
    "llm.allowed_fails": _w(
        N_("Failures before a pause"),
        N_("Failed calls in a minute after which a model is paused for a while."),
    ),
    "llm.cooldown_s": _w(
        N_("Pause after failures"), N_("Seconds a failing model is left alone before it is tried again.")
    ),
    "llm.request_timeout_s": _w(
        N_("Time limit for one model call"), N_("Seconds one call to a model may take.")
    ),
    "llm.connect_timeout_s": _w(
        N_("Time to connect to a model"), N_("Seconds to wait for a connection before trying the next model.")
    ),
    "llm.num_retries": _w(
        N_("Retries"), N_("How many times a call that failed for a passing reason is tried again (0 to 5).")
    ),
    "llm.max_retry_wait_s": _w(
        N_("Longest wait before a retry"),
        N_("Seconds; a provider asking for a longer wait is paused and the next model answers."),
    ),
    "llm.max_retry_after_cooldown_s": _w(
        N_("Longest pause asked by a provider"),
        N_("Seconds at most a model is paused when its provider asks to wait."),
    ),
    "llm.fallback_reserve_s": _w(
        N_("Time kept for the backup model"),
        N_("Seconds of each answer's time limit kept so a backup model can still answer."),
    ),
    "llm.trim_ratio": _w(
        N_("Share of the context window used"),
        N_("Between 0 and 1: older messages are left out beyond this share of the model's context window."),
    ),
    "llm.default_context_window_tokens": _w(
        N_("Context window of unknown models"),
        N_("Tokens (pieces of words) assumed when a model's window is not known."),
    ),
    "llm.max_output_tokens": _w(
        N_("Longest answer"),
        N_("Tokens (pieces of words) a model may write in one answer; empty: the model's own limit."),
    ),
    "llm.summarize_after_messages": _w(
        N_("Summarize after"), N_("Messages in a conversation after which the oldest ones are summarized.")
    ),
    "llm.keep_verbatim_messages": _w(
        N_("Messages kept word for word"),
        N_("The newest messages kept as they are when the older ones are summarized."),
    ),
    # one model deployment (llm.deployments and guardrails.input.deployments)
    "deployment.id": _w(
        N_("Name"),
        N_("A short name of your choice (letters, digits, - . _ :); the logs say which one answered."),
    ),
    "deployment.provider": _w(N_("Provider"), N_("Who runs the model.")),
    "deployment.model": _w(
        N_("Model"), N_("The model's name at the provider, e.g. gpt-4o-mini, claude-haiku-4-5, llama3.1.")
    ),
    "deployment.api_base": _w(
        N_("Server address"), N_("The address of the model's API, e.g. https://models.example.com/v1.")
    ),
    "deployment.api_key": _w(
        N_("API key"), N_("Never shown again once saved; leave empty to keep the stored key.")
    ),
    "deployment.priority": _w(
        N_("Order"), N_("Lower answers first; models with the same number share the load.")
    ),
    "deployment.max_input_tokens": _w(
        N_("Context window"),
        N_("Tokens (pieces of words) the model reads at most; empty: as the provider says."),
    ),
    "deployment.timeout_s": _w(
        N_("Time limit"), N_("Seconds one call of this model may take; empty: the general time limit.")
    ),
    # added sections: voice messages, closing, business hours, data retention, website chat
    "agent.unreadable_audio_reply": _w(
        N_("Reply to a voice message nobody could understand"),
        N_("Sent when a voice message could not be transcribed; the conversation then goes to a person."),
    ),
    "handoff.farewell": _w(
        N_("Goodbye when a person closes"),
        N_("Sent to the customer when a person closes the conversation; empty sends nothing."),
    ),
    "hours.enabled": _w(
        N_("Use business hours"),
        N_("When on, requests for a person outside the hours wait for the next opening."),
    ),
    "hours.timezone": _w(
        N_("Time zone of the hours"),
        N_("A time zone such as Europe/Madrid; empty uses the language and time setting."),
    ),
    "hours.schedule": _w(
        N_("Opening hours"), N_("When your team answers each week, one row per opening period.")
    ),
    "hours.schedule.day": _w(N_("Day"), N_("The day of the week of this period.")),
    "hours.schedule.opens": _w(N_("Opens"), N_("The time it opens, as 09:00.")),
    "hours.schedule.closes": _w(N_("Closes"), N_("The time it closes, as 18:00 (24:00 is midnight).")),
    "hours.holidays": _w(N_("Holidays"), N_("Whole days closed, one date per line as 2026-12-25.")),
    "hours.outside_hours": _w(
        N_("Outside the hours"),
        N_("Whether the AI keeps answering outside the hours, or the customer waits for a person."),
    ),
    "hours.out_of_hours_reply": _w(
        N_("Reply outside the hours"),
        N_("What the customer is told outside the hours; {opening} becomes the next opening."),
    ),
    "retention.messages_days": _w(
        N_("Keep messages"), N_("Days to keep messages and their files; empty keeps them.")
    ),
    "retention.memory_days": _w(
        N_("Keep memory"), N_("Days to keep what the assistant remembers about a customer; empty keeps it.")
    ),
    "retention.traces_days": _w(
        N_("Keep answer records"),
        N_("Days to keep the records of how each answer was made; empty keeps them."),
    ),
    "retention.leads_days": _w(N_("Keep sales leads"), N_("Days to keep sales leads; empty keeps them.")),
    "retention.event_deliveries_days": _w(
        N_("Keep webhook deliveries"),
        N_("Days to keep the record of events sent to your systems; empty keeps it."),
    ),
    "web.allowed_origins": _w(
        N_("Websites allowed"), N_("The addresses of the websites the chat widget may run on, one per line.")
    ),
    "web.colour": _w(N_("Widget colour"), N_("The chat widget's colour, as #1f6feb.")),
    "web.greeting_en": _w(
        N_("Greeting in English"), N_("The first line a visitor reads when your page is in English.")
    ),
    "web.greeting_es": _w(
        N_("Greeting in Spanish"), N_("The first line a visitor reads when your page is in Spanish.")
    ),
    "web.title": _w(N_("Chat title"), N_("The title of the chat panel; empty shows your business name.")),
    "csat.enabled": _w(
        N_("Ask for a rating"),
        N_("After a conversation closes, ask the customer once how it went, with the channel's own buttons."),
    ),
    "csat.question": _w(N_("Rating question"), N_("The question sent after a conversation closes.")),
    "csat.thanks_reply": _w(
        N_("Thanks for a rating"), N_("Sent once when the customer rates the conversation.")
    ),
    "csat.comment_question": _w(
        N_("Invitation to comment"),
        N_(
            "Sent after the thanks: the customer's next message is kept with the rating as their comment. "
            "Empty: no invitation."
        ),
    ),
    "csat.comment_window_s": _w(
        N_("Time to comment"), N_("Seconds after the rating during which a message counts as its comment.")
    ),
    "csat.comment_thanks": _w(N_("Thanks for a comment"), N_("Sent when the customer's comment is kept.")),
    "handoff.channel_teams": _w(
        N_("Team per channel"),
        N_(
            "One line per channel, as whatsapp = Billing: conversations from that channel handed to a person "
            "go to that team. Other channels use the default team."
        ),
    ),
    "handoff.default_team": _w(
        N_("Default team"),
        N_(
            "The name of a team (People page): conversations handed to a person go to its online agents. "
            "Empty: any online agent."
        ),
    ),
    # handoff
    "handoff.queue_reply": _w(
        N_("Reply when everyone is busy"),
        N_("Sent when no person is online and the conversation waits in the queue."),
    ),
    "handoff.agent_template_name": _w(
        N_("WhatsApp template for your team"),
        N_("An approved template used to alert a team member who has not written in the last 24 hours."),
    ),
    "handoff.agent_template_language": _w(
        N_("Language of that template"), N_("The template's language code, e.g. en or es.")
    ),
    "handoff.summary_max_chars": _w(
        N_("Length of the handover summary"),
        N_("Characters at most of the summary your team gets when a conversation is handed over."),
    ),
    "handoff.approval_timeout_s": _w(
        N_("Time to approve an action"),
        N_("Seconds an action waiting for your approval stays open (60 seconds to 7 days)."),
    ),
    "handoff.approval_expired_reply": _w(
        N_("Reply when an approval expires"),
        N_("Sent when nobody approved a pending action in time; nothing was done."),
    ),
    "handoff.button_payloads": _w(
        N_("Buttons that call a person"),
        N_("Button ids, one per line, that hand the conversation to a person at once."),
    ),
    # memory
    "memory.returning_customer_window_days": _w(
        N_("Returning customer within"),
        N_("Days: a customer whose last conversation closed within this many days is welcomed back."),
    ),
    "memory.inactivity_close_s": _w(
        N_("Close quiet conversations after"),
        N_("Seconds without messages after which a conversation is closed and remembered."),
    ),
    "memory.max_chars": _w(
        N_("Length of what is remembered"), N_("Characters at most of the summary kept about each customer.")
    ),
    # tools
    "tools.mutation_budget": _w(
        N_("Changes per answer"), N_("How many changes (orders, bookings) one answer may make; empty: one.")
    ),
    # knowledge
    "knowledge.embedding_model": _w(
        N_("Search model"),
        N_("The embedding model that indexes your documents; empty: the platform's choice."),
    ),
    "knowledge.embedding_api_base": _w(
        N_("Search model address"),
        N_("The address of an OpenAI-compatible embedding API; empty: the provider's own."),
    ),
    "knowledge.embedding_api_key": _w(
        N_("Search model key"), N_("Never shown again once saved; leave empty to keep the stored key.")
    ),
    "knowledge.min_similarity": _w(
        N_("How close a match must be"),
        N_("From -1 to 1: higher finds fewer but closer passages; empty: the platform's default."),
    ),
    "knowledge.chunk_size_chars": _w(
        N_("Passage length"),
        N_("Characters at most in each passage your documents are cut into; empty: the default."),
    ),
    "knowledge.chunk_overlap_chars": _w(
        N_("Passage overlap"), N_("Characters repeated between neighbouring passages; empty: the default.")
    ),
    # locale
    "locale.language": _w(N_("Language"), N_("The language of the fixed replies and of this console.")),
    "locale.timezone": _w(N_("Time zone"), N_("Where your days start, e.g. Europe/Madrid.")),
    # rate limits
    "rate_limits.customer_rate_limit": _w(
        N_("Messages per customer"),
        N_(
            "Messages one customer may send in the window below before being asked to slow down; empty: the platform's."
        ),
    ),
    "rate_limits.customer_rate_window_s": _w(
        N_("Customer window"), N_("Seconds of the per-customer limit; empty: the platform's.")
    ),
    "rate_limits.tenant_rate_limit": _w(
        N_("Messages for the whole business"),
        N_("Messages handled in the window below; more wait their turn; empty: the platform's."),
    ),
    "rate_limits.tenant_rate_window_s": _w(
        N_("Business window"), N_("Seconds of the limit for the whole business; empty: the platform's.")
    ),
    "rate_limits.slowdown_reply": _w(
        N_("Reply when writing too fast"), N_("Sent once to a customer over their limit.")
    ),
    # leads
    "leads.enabled": _w(
        N_("Find sales leads"), N_("After each answer, notice customers who want to buy and record them.")
    ),
    "leads.intent_window_messages": _w(
        N_("Messages read for leads"), N_("The newest messages read to notice a customer who wants to buy.")
    ),
    "leads.intent_check": _w(
        N_("How leads are noticed"),
        N_("Automatically: a model when you have one, else simple rules; or always one of the two."),
    ),
    # channels
    "whatsapp.opt_out_payloads": _w(
        N_("Opt-out buttons"),
        N_("Button ids, one per line, that unsubscribe a customer from marketing messages."),
    ),
    "whatsapp.opt_out_reply": _w(N_("Opt-out confirmation"), N_("Sent once after a customer unsubscribes.")),
    "instagram.fetch_profiles": _w(
        N_("Fetch customer names"), N_("Ask Instagram for each customer's name and username.")
    ),
    "gmail.auto_reply_cap": _w(
        N_("Automatic replies per e-mail thread"),
        N_("Replies one thread gets in the window below; the next e-mail goes to a person."),
    ),
    "gmail.auto_reply_window_s": _w(N_("E-mail reply window"), N_("Seconds of the automatic reply limit.")),
    "gmail.sender_name": _w(
        N_("Sender name"), N_("The name your e-mail replies come from, e.g. Example Support.")
    ),
    "feedback.app_key_sha256": _w(
        N_("Feedback app key fingerprint"),
        N_("Set by the command line when a feedback key is issued; the key itself is never stored."),
    ),
    # guardrails
    "guardrails.input": _w(
        N_("Check of incoming messages"),
        N_("A model scores each customer message before the assistant reads it."),
    ),
    "guardrails.input.enabled": _w(
        N_("Check incoming messages"),
        N_("Stop attacks and off-topic messages before they reach the assistant."),
    ),
    "guardrails.input.threshold": _w(
        N_("Lowest score let through"),
        N_("From 0 to 1: a message scored below it does not reach the assistant."),
    ),
    "guardrails.input.action": _w(
        N_("When a message is stopped"),
        N_("Answer with the redirect reply below, or hand the conversation to a person."),
    ),
    "guardrails.input.redirect_reply": _w(
        N_("Redirect reply"), N_("Sent instead of an answer when a message is stopped.")
    ),
    "guardrails.input.on_error": _w(
        N_("When the check fails"),
        N_("Let the message through, or treat it as stopped, when the check itself fails."),
    ),
    "guardrails.input.deployments": _w(
        N_("Checking models"), N_("Models that do the check; none: your cheapest model.")
    ),
    "guardrails.input.max_chars": _w(
        N_("Characters checked"), N_("Characters of the customer's message the check reads.")
    ),
    "guardrails.input.timeout_s": _w(
        N_("Time limit of the check"), N_("Seconds the check may take before it counts as failed.")
    ),
    "guardrails.output": _w(
        N_("Check of answers"), N_("Rules that stop an answer repeating your instructions.")
    ),
    "guardrails.output.enabled": _w(
        N_("Check answers"), N_("Stop answers that repeat your instructions word for word.")
    ),
    "guardrails.output.safe_reply": _w(
        N_("Reply instead of a stopped answer"), N_("Sent in place of an answer the check stopped.")
    ),
    "guardrails.output.min_leak_words": _w(
        N_("Words in a row that count as a leak"),
        N_("Consecutive words of your instructions an answer may not repeat."),
    ),
    # budget
    "budget.monthly_usd": _w(
        N_("Monthly budget"), N_("US dollars of model use per month; empty: no budget.")
    ),
    "budget.warn_ratio": _w(
        N_("Warn at"), N_("Between 0 and 1: the share of the budget at which a warning is logged.")
    ),
    "budget.action": _w(
        N_("Past the budget"),
        N_("Keep answering with your cheapest model, or send the reply below and hand over to a person."),
    ),
    "budget.holding_reply": _w(
        N_("Reply past the budget"), N_("Sent when the budget is spent and conversations go to a person.")
    ),
}
"""Every tenant setting's label and explanation, by path (see the module docstring)."""

SECTION_WORDS: dict[str, str] = {
    "agent": N_("Agent"),
    "loop": N_("Tool use"),
    "llm": N_("Model"),
    "handoff": N_("Human handoff"),
    "memory": N_("Memory"),
    "tools": N_("Tools"),
    "knowledge": N_("Knowledge"),
    "locale": N_("Language and time"),
    "rate_limits": N_("Message limits"),
    "leads": N_("Sales leads"),
    "whatsapp": N_("WhatsApp"),
    "instagram": N_("Instagram"),
    "gmail": N_("Gmail"),
    "guardrails": N_("Guardrails"),
    "budget": N_("Budget"),
    "feedback": N_("Feedback app"),
    "hours": N_("Business hours"),
    "retention": N_("Keeping customer data"),
    "web": N_("Website chat"),
    "csat": N_("Customer satisfaction"),
}
"""Section names in words (the changes table and save notices)."""

ADVANCED_GROUPS: tuple[tuple[str, str, tuple[str, ...]], ...] = (
    (
        "conversation",
        N_("Conversation"),
        (
            "agent.name",
            "agent.instructions",
            "agent.system_prompt",
            "agent.typed_replies",
            "locale",
            "agent.first_reply_deadline_s",
        ),
    ),
    (
        "replies",
        N_("Fixed replies"),
        (
            "agent",
            "rate_limits.slowdown_reply",
            "whatsapp.opt_out_reply",
            "budget.holding_reply",
            "handoff.queue_reply",
            "handoff.approval_expired_reply",
        ),
    ),
    ("handoff", N_("Human handoff"), ("handoff", "leads", "hours", "csat")),
    ("memory", N_("Memory"), ("memory", "llm.summarize_after_messages", "llm.keep_verbatim_messages")),
    ("knowledge", N_("Knowledge"), ("knowledge",)),
    ("guardrails", N_("Guardrails"), ("guardrails",)),
    ("limits", N_("Limits and costs"), ("loop", "tools", "rate_limits", "budget")),
    ("model", N_("Model connection"), ("llm",)),
    ("data", N_("Customer data"), ("retention",)),
    ("channels", N_("Channels"), ("whatsapp", "instagram", "gmail", "web", "feedback")),
)
"""The groups of "Advanced": ``(id, title, paths)``; a setting goes to the first group naming its path
exactly, else to the first naming its section."""


def setting_path(form_name: str) -> str:
    """The words key of a form input name: ``llm.deployments.0.model`` (and ``llm.transcription.0.model``,
    ``llm.vision.0.model``) -> ``deployment.model``, ``guardrails.input.threshold`` unchanged."""
    parts = form_name.split(".")
    for index, part in enumerate(parts[:-1]):
        is_list = part == "deployments" or (
            index == 1 and parts[0] == "llm" and part in ("transcription", "vision")
        )
        if is_list and index + 1 < len(parts) and parts[index + 1].isdigit():
            return ".".join(["deployment", *parts[index + 2 :]])
    return ".".join(p for p in parts if not p.isdigit())


MEDIA_MODEL_WORDS: dict[str, dict[str, SettingWords]] = {
    "transcription": {
        "model": _w(
            N_("Model"),
            N_("The speech-to-text model's name at the provider, e.g. whisper-1 or gpt-4o-mini-transcribe."),
        ),
    },
    "vision": {
        "model": _w(
            N_("Model"),
            N_(
                "A model that sees pictures, e.g. gpt-4o-mini, claude-haiku-4-5, gemini-2.0-flash, or llava on Ollama."
            ),
        ),
    },
}
"""Inputs of a voice or picture model row whose words differ from a chat model row's, by list
(``llm.transcription``, ``llm.vision``) and input: the model hint names models that do that job."""


def words_for(form_name: str) -> SettingWords | None:
    """The label and explanation of form input ``form_name``, ``None`` for an unknown setting."""
    parts = form_name.split(".")
    if len(parts) == 4 and parts[0] == "llm" and parts[2].isdigit():
        media = MEDIA_MODEL_WORDS.get(parts[1], {}).get(parts[3])
        if media is not None:
            return media
    return SETTING_WORDS.get(setting_path(form_name))


def group_of(path: str) -> str:
    """The id of the "Advanced" group a top-level setting (``section.key``) belongs to."""
    section = path.split(".", 1)[0]
    for group, _title, members in ADVANCED_GROUPS:
        if path in members:
            return group
    for group, _title, members in ADVANCED_GROUPS:
        if section in members:
            return group
    return ADVANCED_GROUPS[-1][0]


@dataclass(frozen=True)
class ProviderWords:
    """A model provider in the form: its name in words and the deployment inputs it needs."""

    label: str
    needs: frozenset[str]
    hint: str = ""


_ALWAYS = frozenset({"id", "provider", "model", "priority", "max_input_tokens", "timeout_s"})

PROVIDERS: dict[str, ProviderWords] = {
    "openai": ProviderWords(N_("OpenAI"), _ALWAYS | {"api_key"}),
    "anthropic": ProviderWords(N_("Anthropic"), _ALWAYS | {"api_key"}),
    "azure": ProviderWords(
        N_("Azure OpenAI"),
        _ALWAYS | {"api_key", "api_base"},
        N_("Model: your Azure deployment's name. Server address: https://NAME.openai.azure.com."),
    ),
    "gemini": ProviderWords(N_("Google Gemini"), _ALWAYS | {"api_key"}),
    "openai_compatible": ProviderWords(
        N_("OpenAI-compatible server (vLLM, LM Studio, ...)"),
        _ALWAYS | {"api_key", "api_base"},
        N_("Server address: the API's base, usually ending in /v1. The key only if the server asks for one."),
    ),
    "ollama": ProviderWords(
        N_("Ollama"), _ALWAYS | {"api_base"}, N_("Server address: e.g. http://ollama.example.com:11434.")
    ),
    "offline": ProviderWords(
        N_("Offline demo model"),
        _ALWAYS | {"api_base"},
        N_(
            "For trying things out; leave the server address empty: the platform's offline model server answers."
        ),
    ),
}
"""Every provider of :data:`switchboard.llm.config.Provider`, in the order the form offers them."""

VALUE_WORDS: dict[str, dict[str, str]] = {
    "actor": {
        "customer": N_("by the customer"),
        "ai": N_("by the AI"),
        "agent": N_("by a team member"),
        "business_app": N_("from the WhatsApp Business app"),
        "system": N_("automatically"),
        "api": N_("through the API"),
        "console_user": N_("from the console"),
    },
    "status": {"ai": N_("AI"), "human": N_("a person"), "closed": N_("closed"), "waiting": N_("waiting")},
    "delivery": {
        "pending": N_("pending"),
        "sending": N_("sending"),
        "sent": N_("sent"),
        "delivered": N_("delivered"),
        "read": N_("read"),
        "played": N_("played"),
        "failed": N_("failed"),
    },
    "tool_kind": {"read": N_("reads"), "write": N_("changes"), "handoff": N_("hands over")},
    "mode": {
        "ai": N_("The AI is answering"),
        "human": N_("With a person"),
        "waiting": N_("Waiting for a person"),
        "closed": N_("Closed"),
    },
    "search_mode": {
        "hybrid": N_("meaning and words"),
        "vector": N_("meaning"),
        "exact": N_("exact words"),
        "graph": N_("related facts"),
        "neighborhood": N_("around a fact"),
    },
}
"""Values the code stores, as the console shows them (``words("delivery", "read")``): conversation
history (who, which state), delivery states, tool kinds, the inbox's mode filter
(:class:`switchboard.console.inbox.Mode`), knowledge search modes."""


def value_words(kind: str, value: str | None) -> str:
    """The msgid of stored ``value`` of ``kind`` (a key of :data:`VALUE_WORDS`); an unknown value as it is."""
    if value is None:
        return ""
    return VALUE_WORDS.get(kind, {}).get(value, value)


NOTICE_WORDS = (N_("Settings saved: %(what)s."),)
"""Save notices built at run time."""

_DATE = N_("Write a date as 2026-12-25.")

ERROR_WORDS: dict[str, str] = {
    "string_pattern_mismatch": N_("This is not written as expected."),
    "date_type": _DATE,
    "date_parsing": _DATE,
    "date_from_datetime_parsing": _DATE,
    "date_from_datetime_inexact": _DATE,
}
"""Refusals whose library text would show internals (a regular expression, parser words), by pydantic
error ``type``: the sentence the settings form shows instead."""

PATTERN_WORDS: dict[str, str] = {
    "deployment.id": N_("Use only letters, digits and - . _ : in a name, without spaces."),
}
"""A setting with a pattern, by path: what it accepts in words (else :data:`ERROR_WORDS`' sentence and
the setting's explanation)."""

UNREADABLE_VALUE = N_("This value cannot be used here.")
"""A refusal with no words of its own (a library's English): followed by the setting's explanation."""


def error_words(form_name: str, error_type: str | None, *, has_words: bool) -> tuple[str, bool] | None:
    """The msgid the settings form shows for a refused setting ``form_name`` (``hours.holidays``,
    ``llm.deployments.0.id``) and whether the setting's explanation should follow it; ``None`` when
    the refusal's own message is already words (``has_words``: the catalog translates it)."""
    path = setting_path(form_name)
    if error_type == "string_pattern_mismatch" and path in PATTERN_WORDS:
        return PATTERN_WORDS[path], False
    if error_type in ERROR_WORDS:
        return ERROR_WORDS[error_type], error_type == "string_pattern_mismatch"
    if error_type is not None and not has_words:
        return UNREADABLE_VALUE, True
    return None


MODE_WORDS = (N_("ai"), N_("human"), N_("waiting"), N_("closed"))
"""A conversation's mode as its badge shows it (inbox rows, the conversation page); the inbox's mode
filter says more (``VALUE_WORDS["mode"]``)."""

OPTION_WORDS: dict[str, dict[str, str]] = {
    "locale.language": {"en": N_("English"), "es": N_("Spanish")},
    "leads.intent_check": {
        "auto": N_("Automatically: a model if there is one, else simple rules"),
        "model": N_("Always with a model"),
        "heuristic": N_("Always with simple rules"),
    },
    "hours.schedule.day": {
        "mon": N_("Monday"),
        "tue": N_("Tuesday"),
        "wed": N_("Wednesday"),
        "thu": N_("Thursday"),
        "fri": N_("Friday"),
        "sat": N_("Saturday"),
        "sun": N_("Sunday"),
    },
    "hours.outside_hours": {
        "ai": N_("The AI keeps answering"),
        "person": N_("The customer waits for a person"),
    },
    "guardrails.input.action": {
        "redirect": N_("Answer with the redirect reply"),
        "handoff": N_("Hand it to a person"),
    },
    "guardrails.input.on_error": {
        "allow": N_("Let the message through"),
        "block": N_("Treat it as stopped"),
    },
    "budget.action": {
        "cheaper_group": N_("Answer with the cheapest model"),
        "handoff": N_("Hand over to a person"),
    },
}
"""The choices of each select of the settings form in words, by setting path (as :data:`SETTING_WORDS`);
a model provider's choices are :data:`PROVIDERS`' labels."""


def option_words(form_name: str, value: str) -> str:
    """The msgid of choice ``value`` of the settings select ``form_name`` (``hours.schedule.0.day``,
    ``llm.deployments.1.provider``): a provider's label for any ``*.provider`` select, else
    :data:`OPTION_WORDS`; an unknown choice as it is (``tests/console/test_select_words.py`` fails on one)."""
    path = setting_path(form_name)
    if path.rsplit(".", 1)[-1] == "provider" and value in PROVIDERS:
        return PROVIDERS[value].label
    return OPTION_WORDS.get(path, {}).get(value, value)


OUTCOME_WORDS = (
    N_("answered"),
    N_("silent"),
    N_("degraded"),
    N_("blocked"),
    N_("skipped"),
    N_("ok"),
    N_("error"),
    N_("rejected"),
    N_("timeout"),
)
"""A turn's outcome (:data:`switchboard.agent.loop.Outcome`, ``skipped``) and a tool call's
(:data:`switchboard.tools.receipts.Outcome`), shown on the conversation page."""
