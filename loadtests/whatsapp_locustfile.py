"""Locust scenario: customers sending signed WhatsApp webhooks to the ``whatsapp`` service.

Each virtual user is one customer (its own phone number) posting real-shaped text deliveries
(the shape of ``tests/fixtures/payloads/whatsapp/text.json``) signed with ``X-Hub-Signature-256``; one in
ten posts is an exact redelivery of the previous body (Meta's at-least-once delivery), which must
be acknowledged but not stored again.

Environment: ``LOADTEST_APP_SECRET`` (the service's META_APP_SECRET), ``LOADTEST_PHONE_NUMBER_ID``
(a connected number). Run through ``loadtests/whatsapp_webhooks.py``, which sets everything up on
loopback and prints the figures; or by hand:
``locust -f loadtests/whatsapp_locustfile.py --headless -u 50 -r 50 -t 20s --host http://127.0.0.1:8101``.
"""

from __future__ import annotations

import hashlib
import hmac
import itertools
import json
import os
import random
import time
import uuid

from locust import FastHttpUser, between, task

APP_SECRET = os.environ.get("LOADTEST_APP_SECRET", "")
PHONE_NUMBER_ID = os.environ.get("LOADTEST_PHONE_NUMBER_ID", "106000000000001")
_customers = itertools.count(1)


def _body(wa_id: str, text: str) -> bytes:
    wamid = "wamid.LOAD" + uuid.uuid4().hex.upper()
    body = {
        "object": "whatsapp_business_account",
        "entry": [
            {
                "id": "102000000000001",
                "changes": [
                    {
                        "field": "messages",
                        "value": {
                            "messaging_product": "whatsapp",
                            "metadata": {
                                "display_phone_number": "15550100001",
                                "phone_number_id": PHONE_NUMBER_ID,
                            },
                            "contacts": [{"profile": {"name": "Load Tester"}, "wa_id": wa_id}],
                            "messages": [
                                {
                                    "from": wa_id,
                                    "id": wamid,
                                    "timestamp": str(int(time.time())),
                                    "type": "text",
                                    "text": {"body": text},
                                }
                            ],
                        },
                    }
                ],
            }
        ],
    }
    return json.dumps(body, separators=(",", ":")).encode()


class WhatsAppCustomer(FastHttpUser):
    """One customer writing every 0.5-1.5 s."""

    wait_time = between(0.5, 1.5)

    def on_start(self) -> None:
        self.wa_id = f"1555{next(_customers):07d}"
        self.last: bytes | None = None

    def _post(self, raw: bytes, name: str) -> None:
        signature = "sha256=" + hmac.new(APP_SECRET.encode(), raw, hashlib.sha256).hexdigest()
        with self.client.post(
            "/webhooks/whatsapp",
            data=raw,
            name=name,
            catch_response=True,
            headers={"Content-Type": "application/json", "X-Hub-Signature-256": signature},
        ) as response:
            if response.status_code != 200:
                response.failure(f"HTTP {response.status_code}")

    @task(9)
    def send_text(self) -> None:
        self.last = _body(
            self.wa_id, random.choice(["Where is my order?", "Do you ship to Spain? 🇪🇸", "مرحبا", "thanks!"])
        )
        self._post(self.last, "webhook: new message")

    @task(1)
    def redeliver(self) -> None:
        if self.last is not None:
            self._post(self.last, "webhook: redelivery")
