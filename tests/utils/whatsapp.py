"""Real WhatsApp payloads from ``shared/payloads/whatsapp`` for tests: load, retarget, refresh, sign."""

from __future__ import annotations

import copy
import json
import os
import time
from pathlib import Path
from typing import Any


def _payload_root() -> Path:
    """``SWITCHBOARD_PAYLOADS``, else the workplace's ``../shared/payloads`` beside the repository,
    else the copy in ``tests/fixtures/payloads`` (taken from shared/ on 2026-11-30), so a plain
    clone still runs every payload test."""
    if os.environ.get("SWITCHBOARD_PAYLOADS"):
        return Path(os.environ["SWITCHBOARD_PAYLOADS"])
    repo = Path(__file__).resolve().parents[2]
    shared = repo.parent / "shared" / "payloads"
    return shared if (shared / "whatsapp").is_dir() else repo / "tests" / "fixtures" / "payloads"


PAYLOAD_DIR = _payload_root() / "whatsapp"


def payload_path(name: str) -> Path:
    return PAYLOAD_DIR / name


def load_payload(
    name: str, *, phone_number_id: str | None = None, refresh: bool = True, shift_s: int = 0
) -> dict[str, Any]:
    """The parsed payload ``name`` (``text.json``...).

    Args:
        phone_number_id: rewrite every ``metadata.phone_number_id`` to this test's account.
        refresh: move every message/status timestamp to now (keeping their relative order).
        shift_s: extra seconds added to refreshed timestamps (negative = in the past).
    """
    body = json.loads(payload_path(name).read_text())
    return retarget(body, phone_number_id=phone_number_id, refresh=refresh, shift_s=shift_s)


def retarget(
    body: dict[str, Any], *, phone_number_id: str | None, refresh: bool = True, shift_s: int = 0
) -> dict[str, Any]:
    body = copy.deepcopy(body)
    stamps = []
    for entry in body.get("entry", []):
        for change in entry.get("changes", []):
            value = change.get("value", {})
            if phone_number_id:
                value.setdefault("metadata", {})["phone_number_id"] = phone_number_id
            for key in ("messages", "statuses", "message_echoes"):
                stamps += [item for item in value.get(key, []) if "timestamp" in item]
    if refresh and stamps:
        newest = max(int(item["timestamp"]) for item in stamps)
        now = int(time.time()) + shift_s
        for item in stamps:
            item["timestamp"] = str(now - (newest - int(item["timestamp"])))
    return body


def text_body(
    *, phone_number_id: str, wamid: str, text: str, wa_id: str = "15550100099", name: str = "Test Customer",
    bsuid: str | None = None, timestamp: int | None = None,
) -> dict[str, Any]:  # fmt: skip
    """A minimal real-shaped text delivery (shape of ``text.json``)."""
    contact: dict[str, Any] = {"profile": {"name": name}, "wa_id": wa_id}
    message: dict[str, Any] = {
        "from": wa_id, "id": wamid, "timestamp": str(timestamp or int(time.time())), "type": "text",
        "text": {"body": text},
    }  # fmt: skip
    if bsuid:
        contact["user_id"] = bsuid
    return {
        "object": "whatsapp_business_account",
        "entry": [
            {
                "id": "102000000000001",
                "changes": [
                    {
                        "value": {
                            "messaging_product": "whatsapp",
                            "metadata": {
                                "display_phone_number": "15550100001",
                                "phone_number_id": phone_number_id,
                            },
                            "contacts": [contact],
                            "messages": [message],
                        },
                        "field": "messages",
                    }
                ],
            }
        ],
    }


def encode(body: dict[str, Any]) -> bytes:
    """Bytes as Meta sends them (escaped non-ASCII, compact separators)."""
    return json.dumps(body, separators=(",", ":")).encode()
