"""Locust scenario of ``e2e_load.py``: customers on WhatsApp, Instagram and Gmail against a running system.

Every virtual user is one customer (its own wa_id, IGSID or mail address; weights 2:2:1). Each turn it
posts, signed and real-shaped (the shapes of ``tests/fixtures/payloads``), one of:

* a text (45 %), mixing languages and emoji;
* media (20 %): a WhatsApp image or voice note (media ids the driver stored in the Graph sandbox), an
  Instagram image or audio (assets on the Instagram sandbox's CDN), a Gmail mail with an image attached;
* an interactive tap (15 %): a WhatsApp button or list reply, an Instagram quick reply or ice-breaker
  postback (Gmail: a plain mail);
* a burst (20 %): 2-3 messages 0.2-0.6 s apart, inside the worker's debounce window (Gmail: two mails in
  one thread), which the product answers with one reply;

and then, one turn in seven, redelivers its last body unchanged (Meta's at-least-once delivery; for
Gmail the same Pub/Sub push again), which must be acknowledged and answered at most once. Between turns
it thinks ``LOADTEST_THINK`` seconds (``lo-hi``). Gmail mail is put into the sandbox mailbox with
``/_control/deliver`` (not timed as a webhook) and its push posted to ``/webhooks/gmail``: the
acknowledgement timed for Gmail is that push.

Every post is appended as one JSON line to ``LOADTEST_RECORDS`` (``channel``, ``customer``,
``message_id``, ``posted_at`` epoch s, ``ack_ms``, ``status``, ``kind``, ``redelivery``): the driver
matches them with the sandboxes' send logs (:mod:`loadtests.e2e_accounting`). Configuration: the
``LOADTEST_*`` variables ``e2e_load.py`` sets (see ``_env``).
"""

from __future__ import annotations

import base64
import hashlib
import hmac
import itertools
import json
import os
import random
import time
import uuid

from locust import FastHttpUser, between, events, task  # locust patches time.sleep to yield (gevent)


def _env(name: str, default: str = "") -> str:
    return os.environ.get(f"LOADTEST_{name}", default)


RUN = _env("RUN", "0")
_think = [float(x) for x in _env("THINK", "15-30").split("-")]
_numbers = itertools.count(1)
_records = open(_env("RECORDS", os.devnull), "a", buffering=1)  # noqa: SIM115 (one line per post, all run long)

TEXTS = [
    "Do you ship to Spain? 🇪🇸",
    "What are your opening hours?",
    "How long does shipping take?",
    "What is your returns policy?",
    "Is the FVAM 2050 fan in stock?",
    "¿Tienen garantía los humidificadores?",
    "مرحبا، هل لديكم توصيل؟",
    "thanks! 🙏",
    "Wo ist meine Bestellung?",
    "Can I return a filter I did not open?",
]
WA_TAPS = [
    {"type": "button_reply", "button_reply": {"id": "shipping_info", "title": "Shipping times"}},
    {"type": "button_reply", "button_reply": {"id": "opening_hours", "title": "Opening hours"}},
    {"type": "list_reply", "list_reply": {"id": "returns", "title": "Returns", "description": "Our policy"}},
]
IG_TAPS = [
    {"quick_reply": {"payload": "SHIPPING"}, "text": "Shipping times"},
    {"postback": {"title": "Opening hours", "payload": "ICEBREAKER_HOURS"}},
]


@events.quitting.add_listener
def _close_records(**_kwargs: object) -> None:
    _records.close()


def _record(
    channel: str,
    customer: str,
    message_id: str,
    posted_at: float,
    ack_ms: float,
    status: int,
    kind: str,
    redelivery: bool,
) -> None:
    _records.write(
        json.dumps(
            {
                "channel": channel,
                "customer": customer,
                "message_id": message_id,
                "posted_at": posted_at,
                "ack_ms": ack_ms,
                "status": status,
                "kind": kind,
                "redelivery": redelivery,
            }
        )
        + "\n"
    )


def _signed(raw: bytes, secret: str) -> dict[str, str]:
    signature = "sha256=" + hmac.new(secret.encode(), raw, hashlib.sha256).hexdigest()
    return {"Content-Type": "application/json", "X-Hub-Signature-256": signature}


class _Customer(FastHttpUser):
    abstract = True
    wait_time = between(_think[0], _think[-1])
    channel = ""

    def on_start(self) -> None:
        self.number = next(_numbers)
        self.last: tuple[bytes, str, str] | None = None  # body, message id, kind

    def post_webhook(
        self,
        url: str,
        raw: bytes,
        headers: dict[str, str],
        *,
        customer: str,
        message_id: str,
        kind: str,
        redelivery: bool = False,
    ) -> None:
        posted_at = time.time()
        started = time.perf_counter()
        name = f"{self.channel}: {'redelivery' if redelivery else kind}"
        with self.client.post(url, data=raw, headers=headers, name=name, catch_response=True) as response:
            ack_ms = (time.perf_counter() - started) * 1000
            if response.status_code != 200:
                response.failure(f"HTTP {response.status_code}")
        _record(self.channel, customer, message_id, posted_at, ack_ms, response.status_code, kind, redelivery)

    def choose(self) -> str:
        return random.choices(["text", "media", "tap", "burst"], weights=[45, 20, 15, 20])[0]

    def send_one(self, kind: str) -> None:
        raise NotImplementedError

    @task
    def turn(self) -> None:
        kind = self.choose()
        if kind == "burst":
            for i in range(random.randint(2, 3)):
                if i:
                    time.sleep(random.uniform(0.2, 0.6))
                self.send_one("burst")
        else:
            self.send_one(kind)
        if self.last is not None and random.random() < 1 / 7:
            time.sleep(random.uniform(0.05, 0.5))
            self.redeliver()

    def redeliver(self) -> None:
        raise NotImplementedError


class WhatsAppCustomer(_Customer):
    """A WhatsApp customer of the demo number."""

    weight = 2
    channel = "whatsapp"
    host = _env("WA_HOST", "http://127.0.0.1:9401")

    def on_start(self) -> None:
        super().on_start()
        self.wa_id = f"1{int(RUN) % 10000:04d}{self.number:06d}"

    def send_one(self, kind: str) -> None:
        wamid = f"wamid.LOAD{uuid.uuid4().hex.upper()}="
        message: dict = {"from": self.wa_id, "id": wamid, "timestamp": str(int(time.time()))}
        if kind == "media":
            if random.random() < 0.5:
                message |= {
                    "type": "image",
                    "image": {
                        "caption": "This arrived broken 😞",
                        "mime_type": "image/jpeg",
                        "sha256": "FAKE",
                        "id": _env("WA_IMAGE_ID"),
                    },
                }
            else:
                message |= {
                    "type": "audio",
                    "audio": {
                        "mime_type": "audio/ogg; codecs=opus",
                        "sha256": "FAKE",
                        "id": _env("WA_AUDIO_ID"),
                        "voice": True,
                    },
                }
        elif kind == "tap":
            message |= {
                "type": "interactive",
                "interactive": random.choice(WA_TAPS),
                "context": {"from": "15550100001", "id": "wamid.LOADCONTEXT"},
            }
        else:
            message |= {"type": "text", "text": {"body": random.choice(TEXTS)}}
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
                                    "phone_number_id": _env("WA_PHONE_ID"),
                                },
                                "contacts": [
                                    {"profile": {"name": f"Load {self.number}"}, "wa_id": self.wa_id}
                                ],
                                "messages": [message],
                            },
                        }
                    ],
                }
            ],
        }
        raw = json.dumps(body, separators=(",", ":")).encode()
        self.last = (raw, wamid, kind)
        self.post_webhook(
            "/webhooks/whatsapp",
            raw,
            _signed(raw, _env("WA_SECRET")),
            customer=self.wa_id,
            message_id=wamid,
            kind=kind,
        )

    def redeliver(self) -> None:
        assert self.last is not None
        raw, wamid, kind = self.last
        self.post_webhook(
            "/webhooks/whatsapp",
            raw,
            _signed(raw, _env("WA_SECRET")),
            customer=self.wa_id,
            message_id=wamid,
            kind=kind,
            redelivery=True,
        )


class InstagramCustomer(_Customer):
    """An Instagram customer of the demo professional account."""

    weight = 2
    channel = "instagram"
    host = _env("IG_HOST", "http://127.0.0.1:9402")

    def on_start(self) -> None:
        super().on_start()
        self.igsid = f"9{int(RUN) % 10000:04d}{self.number:011d}"

    def send_one(self, kind: str) -> None:
        account = _env("IG_ACCOUNT")
        mid = f"aWdfLOAD{uuid.uuid4().hex}"
        now_ms = int(time.time() * 1000)
        event: dict = {"sender": {"id": self.igsid}, "recipient": {"id": account}, "timestamp": now_ms}
        if kind == "media":
            asset = random.choice(["image", "audio"])
            url = f"{_env('IG_CDN')}/_cdn/{_env('IG_ASSET_' + asset.upper())}"
            event["message"] = {"mid": mid, "attachments": [{"type": asset, "payload": {"url": url}}]}
        elif kind == "tap":
            tap = random.choice(IG_TAPS)
            if "postback" in tap:
                event["postback"] = {"mid": mid, **tap["postback"]}
            else:
                event["message"] = {"mid": mid, **tap}
        else:
            event["message"] = {"mid": mid, "text": random.choice(TEXTS)}
        body = {"object": "instagram", "entry": [{"id": account, "time": now_ms, "messaging": [event]}]}
        raw = json.dumps(body, separators=(",", ":")).encode()
        self.last = (raw, mid, kind)
        self.post_webhook(
            "/webhooks/instagram",
            raw,
            _signed(raw, _env("IG_SECRET")),
            customer=self.igsid,
            message_id=mid,
            kind=kind,
        )

    def redeliver(self) -> None:
        assert self.last is not None
        raw, mid, kind = self.last
        self.post_webhook(
            "/webhooks/instagram",
            raw,
            _signed(raw, _env("IG_SECRET")),
            customer=self.igsid,
            message_id=mid,
            kind=kind,
            redelivery=True,
        )


class GmailCustomer(_Customer):
    """A customer writing to the demo mailbox: the mail lands in the Gmail sandbox, the push is timed."""

    weight = 1
    channel = "gmail"
    host = _env("GMAIL_HOST", "http://127.0.0.1:9403")

    def on_start(self) -> None:
        super().on_start()
        self.address = f"customer{self.number}.run{RUN}@example.net"
        self.thread: str | None = None

    def send_one(self, kind: str) -> None:
        spec: dict = {
            "to": _env("MAILBOX"),
            "from": self.address,
            "from_name": f"Load {self.number}",
            "subject": random.choice(["Question", "My order", "Shipping"]),
            "text": random.choice(TEXTS),
            "message_id": f"<load-{uuid.uuid4().hex}@example.net>",
        }
        if kind == "media":
            spec["attachments"] = [
                {
                    "filename": "photo.jpg",
                    "mime": "image/jpeg",
                    "data_b64": base64.b64encode(b"\xff\xd8\xffjpeg").decode(),
                }
            ]
        if kind == "burst" and self.thread is not None:
            spec["thread_id"] = self.thread  # the second mail of a burst: the same thread
        with self.client.post(
            f"{_env('GMAIL_SANDBOX')}/_control/deliver",
            json=spec,
            headers={"Authorization": f"Bearer {_env('ADMIN_TOKEN')}"},
            name="gmail sandbox: deliver (not an ack)",
            catch_response=True,
        ) as answer:
            if answer.status_code != 200:
                answer.failure(f"HTTP {answer.status_code}")
                return
            delivered = answer.json()
        self.thread = delivered["threadId"] if kind == "burst" else None
        data = json.dumps({"emailAddress": _env("MAILBOX"), "historyId": int(delivered["historyId"])})
        envelope = {
            "message": {
                "data": base64.b64encode(data.encode()).decode(),
                "messageId": f"{RUN}{uuid.uuid4().int % 10**12:012d}",
                "publishTime": time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime()),
            },
            "subscription": "projects/load/subscriptions/gmail-push",
        }
        raw = json.dumps(envelope).encode()
        self.last = (raw, delivered["id"], kind)
        self._push(raw, delivered["threadId"], delivered["id"], kind, redelivery=False)

    def _push(self, raw: bytes, thread: str, message_id: str, kind: str, *, redelivery: bool) -> None:
        self.post_webhook(
            _env("GMAIL_PUSH_PATH"),
            raw,
            {"Content-Type": "application/json"},
            customer=thread,
            message_id=message_id,
            kind=kind,
            redelivery=redelivery,
        )
        self.last_thread = thread

    def redeliver(self) -> None:
        assert self.last is not None
        raw, message_id, kind = self.last
        self._push(raw, self.last_thread, message_id, kind, redelivery=True)
