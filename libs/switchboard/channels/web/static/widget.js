/* Switchboard website chat widget: one file, no framework, no third-party requests.
 *
 * <script src="https://CHAT-HOST/widget.js" data-key="wk_..." async></script>
 * Optional, for a signed-in user (the hash is computed by the business's backend):
 *   data-user-id="42" data-user-hash="<hex HMAC-SHA256(widget secret, user id)>" data-user-name="Ana"
 *
 * Everything a visitor or the business writes is drawn with textContent: no HTML is ever rendered.
 */
(function () {
  "use strict";
  var script = document.currentScript;
  if (!script || window.__switchboardChat) return;
  window.__switchboardChat = true;

  var KEY = script.getAttribute("data-key") || "";
  var BASE = script.src.replace(/\/widget\.js(\?.*)?$/, "");
  var USER = {
    id: script.getAttribute("data-user-id") || "",
    hash: script.getAttribute("data-user-hash") || "",
    name: script.getAttribute("data-user-name") || ""
  };
  var LANG = /^es\b/i.test(document.documentElement.lang || "") ? "es" : "en";
  var WORDS = {
    en: {
      open: "Open chat", close: "Close chat", send: "Send", attach: "Attach an image or a PDF",
      placeholder: "Write a message…", label: "Your message", typing: "Typing…", sent: "Sent",
      delivered: "Delivered", read: "Read", sending: "Sending…", failed: "Not sent. Tap to retry.",
      tooLong: "This message is too long.", tooBig: "This file is too large.",
      badType: "Send an image (JPEG, PNG, GIF, WebP) or a PDF document.", busy: "Too many messages; please wait a moment.",
      offline: "Reconnecting…", refused: "This chat is not available on this website.", you: "You", them: "Reply",
      file: "File", messages: "Messages",
      closed: "We're closed now; we open {when}. Leave a message and we'll reply.",
      closedNoTime: "We're closed now. Leave a message and we'll reply."
    },
    es: {
      open: "Abrir el chat", close: "Cerrar el chat", send: "Enviar", attach: "Adjuntar una imagen o un PDF",
      placeholder: "Escriba un mensaje…", label: "Su mensaje", typing: "Escribiendo…", sent: "Enviado",
      delivered: "Entregado", read: "Leído", sending: "Enviando…", failed: "No se envió. Pulse para reintentar.",
      tooLong: "Este mensaje es demasiado largo.", tooBig: "Este archivo es demasiado grande.",
      badType: "Envíe una imagen (JPEG, PNG, GIF, WebP) o un documento PDF.", busy: "Demasiados mensajes; espere un momento, por favor.",
      offline: "Reconectando…", refused: "Este chat no está disponible en este sitio web.", you: "Usted", them: "Respuesta",
      file: "Archivo", messages: "Mensajes",
      closed: "Ahora estamos cerrados; abrimos {when}. Deje un mensaje y le responderemos.",
      closedNoTime: "Ahora estamos cerrados. Deje un mensaje y le responderemos."
    }
  }[LANG];

  function randomId(bytes) {
    var a = new Uint8Array(bytes);
    (window.crypto || window.msCrypto).getRandomValues(a);
    var s = "";
    for (var i = 0; i < a.length; i++) s += String.fromCharCode(a[i]);
    return btoa(s).replace(/\+/g, "-").replace(/\//g, "_").replace(/=+$/, "");
  }
  var store = window.localStorage;
  var VISITOR_KEY = "switchboard-chat-visitor:" + KEY;
  var visitor = null;
  try { visitor = store.getItem(VISITOR_KEY); } catch (e) { visitor = null; }
  if (!visitor || !/^[A-Za-z0-9_-]{22,64}$/.test(visitor)) {
    visitor = randomId(18);
    try { store.setItem(VISITOR_KEY, visitor); } catch (e) { /* private mode: one visit */ }
  }

  function identity(params) {
    params.visitor = visitor;
    if (USER.id && USER.hash) { params.user_id = USER.id; params.user_hash = USER.hash; }
    if (USER.name) params.name = USER.name;
    return params;
  }
  function query(params) {
    var parts = [];
    for (var k in params) if (params[k] !== undefined && params[k] !== "") parts.push(encodeURIComponent(k) + "=" + encodeURIComponent(params[k]));
    return parts.join("&");
  }
  function el(tag, attrs, text) {
    var node = document.createElement(tag);
    for (var k in attrs || {}) node.setAttribute(k, attrs[k]);
    if (text !== undefined && text !== null) node.textContent = String(text);
    return node;
  }

  var config = null, lastSeq = 0, lastReplySeq = 0, source = null, open = false, typingTimer = null;
  var bubbles = {}, pendingStatuses = [], statusTimer = null, reported = {};
  var host = el("div", { id: "switchboard-chat" });
  var root = host.attachShadow ? host.attachShadow({ mode: "open" }) : host;
  var ui = {};

  function css(colour) {
    return ":host{all:initial}*{box-sizing:border-box;font-family:system-ui,-apple-system,'Segoe UI',Roboto,sans-serif}" +
      ".launcher{position:fixed;right:20px;bottom:20px;width:56px;height:56px;border-radius:50%;border:0;background:" + colour +
      ";color:#fff;cursor:pointer;box-shadow:0 4px 14px rgba(0,0,0,.25);z-index:2147483646;font-size:24px}" +
      ".launcher:focus-visible,button:focus-visible,textarea:focus-visible{outline:3px solid #111;outline-offset:2px}" +
      ".panel{position:fixed;right:20px;bottom:88px;width:360px;max-width:calc(100vw - 40px);height:520px;max-height:calc(100vh - 110px);" +
      "background:#fff;color:#111;border-radius:12px;box-shadow:0 8px 30px rgba(0,0,0,.3);display:flex;flex-direction:column;overflow:hidden;z-index:2147483647}" +
      ".panel[hidden]{display:none}.head{background:" + colour + ";color:#fff;padding:12px 14px;display:flex;align-items:center;justify-content:space-between}" +
      ".head h2{font-size:16px;margin:0}.head button{background:transparent;border:0;color:#fff;font-size:20px;cursor:pointer}" +
      ".log{flex:1;overflow-y:auto;padding:12px;display:flex;flex-direction:column;gap:8px;background:#f6f7f9}" +
      ".msg{max-width:85%;padding:8px 10px;border-radius:10px;white-space:pre-wrap;overflow-wrap:anywhere;font-size:14px;line-height:1.4}" +
      ".them{align-self:flex-start;background:#fff;border:1px solid #e3e5e8}.me{align-self:flex-end;background:" + colour + ";color:#fff}" +
      ".state{display:block;font-size:11px;opacity:.8;margin-top:2px;text-align:right}.failed{cursor:pointer;text-decoration:underline}" +
      ".choices{display:flex;flex-wrap:wrap;gap:6px;margin-top:6px;padding:0;list-style:none}.choices button{border:1px solid " + colour +
      ";color:" + colour + ";background:#fff;border-radius:16px;padding:5px 10px;cursor:pointer;font-size:13px}" +
      ".choices.list{flex-direction:column}.choices.list button{border-radius:8px;text-align:left;width:100%}" +
      ".card img{max-width:100%;border-radius:6px}.card a{color:" + colour + "}.media img{max-width:100%;border-radius:6px;display:block}" +
      ".typing{font-size:12px;color:#555;padding:0 12px 6px;min-height:18px;background:#f6f7f9}" +
      ".note{font-size:12px;color:#8a1c1c;padding:4px 12px;min-height:0}" +
      ".hours{margin:0;font-size:13px;background:#fff8e1;color:#5c4400;padding:8px 12px;border-bottom:1px solid #f0dfa8}" +
      "form{display:flex;gap:6px;padding:8px;border-top:1px solid #e3e5e8;align-items:flex-end}" +
      "textarea{flex:1;resize:none;border:1px solid #c9ccd1;border-radius:8px;padding:8px;font-size:14px;max-height:120px}" +
      ".send,.attach{border:0;border-radius:8px;background:" + colour + ";color:#fff;padding:8px 10px;cursor:pointer;font-size:14px}" +
      ".attach{background:#e9ebee;color:#111}.sr{position:absolute;width:1px;height:1px;overflow:hidden;clip:rect(0 0 0 0)}";
  }

  function build() {
    var colour = /^#[0-9a-fA-F]{6}$/.test(config.colour) ? config.colour : "#1f6feb";
    root.appendChild(el("style", {}, css(colour)));
    ui.launcher = el("button", { "class": "launcher", type: "button", "aria-label": WORDS.open, "aria-expanded": "false", "aria-controls": "sb-panel" }, "💬");
    ui.panel = el("div", { "class": "panel", id: "sb-panel", role: "dialog", "aria-label": config.title, hidden: "" });
    var head = el("div", { "class": "head" });
    head.appendChild(el("h2", {}, config.title));
    ui.close = el("button", { type: "button", "aria-label": WORDS.close }, "×");
    head.appendChild(ui.close);
    ui.log = el("div", { "class": "log", role: "log", "aria-live": "polite", "aria-label": WORDS.messages, tabindex: "0" });
    ui.typing = el("div", { "class": "typing", role: "status", "aria-live": "polite" });
    ui.note = el("div", { "class": "note", role: "alert" });
    ui.form = el("form", { "aria-label": WORDS.label });
    ui.input = el("textarea", { rows: "1", placeholder: WORDS.placeholder, "aria-label": WORDS.label, maxlength: String(config.max_text_chars) });
    ui.file = el("input", { type: "file", "class": "sr", accept: config.file_types.join(","), tabindex: "-1", "aria-hidden": "true" });
    ui.attach = el("button", { "class": "attach", type: "button", "aria-label": WORDS.attach, title: WORDS.attach }, "📎");
    ui.send = el("button", { "class": "send", type: "submit" }, WORDS.send);
    ui.form.appendChild(ui.attach); ui.form.appendChild(ui.file); ui.form.appendChild(ui.input); ui.form.appendChild(ui.send);
    ui.panel.appendChild(head);
    var hours = config.availability || {};
    if (hours.open === false) {
      var when = (hours.opens || {})[LANG];
      ui.panel.appendChild(el("p", { "class": "hours", role: "status" }, when ? WORDS.closed.replace("{when}", when) : WORDS.closedNoTime));
    }
    ui.panel.appendChild(ui.log); ui.panel.appendChild(ui.typing); ui.panel.appendChild(ui.note); ui.panel.appendChild(ui.form);
    root.appendChild(ui.launcher); root.appendChild(ui.panel);
    var greeting = (config.greeting || {})[LANG];
    if (greeting) ui.log.appendChild(el("div", { "class": "msg them" }, greeting));

    ui.launcher.addEventListener("click", function () { toggle(!open); });
    ui.close.addEventListener("click", function () { toggle(false); });
    ui.panel.addEventListener("keydown", function (e) { if (e.key === "Escape") toggle(false); });
    ui.form.addEventListener("submit", function (e) { e.preventDefault(); sendText(); });
    ui.input.addEventListener("keydown", function (e) {
      if (e.key === "Enter" && !e.shiftKey) { e.preventDefault(); sendText(); }
    });
    ui.attach.addEventListener("click", function () { ui.file.click(); });
    ui.file.addEventListener("change", function () { if (ui.file.files[0]) sendFile(ui.file.files[0]); ui.file.value = ""; });
    document.addEventListener("visibilitychange", reportRead);
    document.body.appendChild(host);
  }

  function toggle(show) {
    open = show;
    if (show) ui.panel.removeAttribute("hidden"); else ui.panel.setAttribute("hidden", "");
    ui.launcher.setAttribute("aria-expanded", String(show));
    ui.launcher.setAttribute("aria-label", show ? WORDS.close : WORDS.open);
    if (show) { ui.input.focus(); scrollDown(); reportRead(); } else ui.launcher.focus();
  }
  function scrollDown() { ui.log.scrollTop = ui.log.scrollHeight; }
  function note(words) { ui.note.textContent = words || ""; }
  function setTyping(on) {
    clearTimeout(typingTimer);
    ui.typing.textContent = on ? WORDS.typing : "";
    if (on) typingTimer = setTimeout(function () { ui.typing.textContent = ""; }, 60000);
  }

  function stateLine(bubble, words, failed) {
    var line = bubble.querySelector(".state");
    if (!line) { line = el("span", { "class": "state" }); bubble.appendChild(line); }
    line.textContent = words;
    line.className = "state" + (failed ? " failed" : "");
  }

  /* a message of the visitor only moves forward: sending, sent, read (never "Sent" after "Read") */
  var OWN_RANK = { sending: 0, sent: 1, read: 2 };
  function ownState(bubble, state) {
    var now = bubble.getAttribute("data-state");
    if (now && OWN_RANK[now] >= OWN_RANK[state]) return;
    bubble.setAttribute("data-state", state);
    stateLine(bubble, WORDS[state]);
  }

  function safeUrl(url) {
    if (typeof url !== "string") return null;
    if (/^https:\/\//i.test(url) || url.indexOf(BASE + "/") === 0) return url;
    return null;
  }

  function drawMedia(bubble, media) {
    (media || []).forEach(function (m) {
      var url = safeUrl(m.url);
      var box = el("div", { "class": "media" });
      if (url && /^image\//.test(m.mime || "")) box.appendChild(el("img", { src: url, alt: m.filename || WORDS.file, loading: "lazy" }));
      else if (url) { var a = el("a", { href: url, target: "_blank", rel: "noopener noreferrer" }, m.filename || WORDS.file); box.appendChild(a); }
      else box.appendChild(el("span", {}, "📎 " + (m.filename || WORDS.file)));
      bubble.appendChild(box);
    });
  }

  function drawChoices(bubble, body) {
    var list = el("ul", { "class": "choices" + (body.kind === "list" ? " list" : ""), role: "list" });
    (body.options || []).forEach(function (o) {
      var item = el("li", {});
      var b = el("button", { type: "button" }, o.title);
      if (o.description) b.setAttribute("title", o.description);
      b.addEventListener("click", function () { sendMessage(o.title, o.id); });
      item.appendChild(b); list.appendChild(item);
    });
    bubble.appendChild(list);
  }

  function drawCard(bubble, body) {
    var card = el("div", { "class": "card" });
    var img = safeUrl(body.image_url);
    if (img) card.appendChild(el("img", { src: img, alt: body.title || "" }));
    card.appendChild(el("strong", {}, body.title || ""));
    if (body.description) card.appendChild(el("div", {}, body.description));
    if (body.price !== undefined && body.price !== null) card.appendChild(el("div", {}, body.price + " " + (body.currency || "")));
    var cta = body.cta || {};
    if (cta.url && safeUrl(cta.url)) card.appendChild(el("a", { href: cta.url, target: "_blank", rel: "noopener noreferrer" }, cta.title));
    else if (cta.id) { var list = el("ul", { "class": "choices", role: "list" }); var li = el("li", {}); var b = el("button", { type: "button" }, cta.title); b.addEventListener("click", function () { sendMessage(cta.title, cta.id); }); li.appendChild(b); list.appendChild(li); card.appendChild(list); }
    bubble.appendChild(card);
  }

  function drawReply(event) {
    var bubble = el("div", { "class": "msg them", "data-id": event.id });
    var body = event.interactive;
    if (event.text && !(body && body.kind === "product")) bubble.appendChild(el("span", {}, event.text));
    drawMedia(bubble, event.media);
    if (body && (body.kind === "buttons" || body.kind === "list")) drawChoices(bubble, body);
    else if (body && body.kind === "product") drawCard(bubble, body);
    ui.log.appendChild(bubble);
    setTyping(false);
    scrollDown();
    queueStatus(event.id, "delivered");
    reportRead();
  }

  function drawOwn(event) {
    var bubble = bubbles[event.id];
    if (!bubble) {
      bubble = el("div", { "class": "msg me", "data-id": event.id });
      bubble.appendChild(el("span", {}, event.text || ""));
      drawMedia(bubble, event.media);
      ui.log.appendChild(bubble);
      bubbles[event.id] = bubble;
    }
    bubble.setAttribute("data-seq", String(event.seq));
    ownState(bubble, event.read ? "read" : "sent");
    scrollDown();
  }

  function onEvent(e) {
    var event;
    try { event = JSON.parse(e.data); } catch (err) { return; }
    if (!event.seq || event.seq <= lastSeq) return; /* never twice */
    lastSeq = event.seq;
    if (event.type === "visitor") drawOwn(event); else { lastReplySeq = event.seq; drawReply(event); }
  }

  function connect() {
    if (source) source.close();
    var url = BASE + "/v1/stream?" + query(identity({ key: KEY, after: lastSeq }));
    source = new EventSource(url);
    source.onmessage = onEvent;
    source.addEventListener("hello", function () { note(""); });
    source.addEventListener("seen", function (e) {
      var data = JSON.parse(e.data), bubble = bubbles[data.id];
      if (bubble) ownState(bubble, "read");
      /* read means an answer is on its way, unless it came already (a "seen" may arrive after it) */
      if (bubble && Number(bubble.getAttribute("data-seq")) > lastReplySeq) setTyping(true);
    });
    source.addEventListener("typing", function () { setTyping(true); });
    source.onerror = function () {
      note(WORDS.offline);
      if (source.readyState === 2) setTimeout(connect, 2000); /* closed for good: start again after lastSeq */
    };
  }

  function post(path, body, isForm) {
    var init = { method: "POST", mode: "cors", credentials: "omit", body: isForm ? body : JSON.stringify(body) };
    if (!isForm) init.headers = { "Content-Type": "application/json" };
    return fetch(BASE + path, init).then(function (r) {
      if (r.ok) return r.json();
      var words = r.status === 429 ? WORDS.busy : r.status === 413 ? WORDS.tooLong : r.status === 415 ? WORDS.badType : r.status === 403 ? WORDS.refused : WORDS.failed;
      throw new Error(words);
    });
  }

  function pendingBubble(id, text) {
    var bubble = el("div", { "class": "msg me", "data-id": id });
    bubble.appendChild(el("span", {}, text));
    ui.log.appendChild(bubble);
    bubbles[id] = bubble;
    ownState(bubble, "sending");
    scrollDown();
    return bubble;
  }

  function sendMessage(text, payload, retryId) {
    text = (text || "").trim();
    if (!text) return;
    if (text.length > config.max_text_chars) { note(WORDS.tooLong); return; }
    note("");
    var id = retryId || randomId(16);
    var bubble = bubbles[id] || pendingBubble(id, text);
    var message = { id: id, text: text };
    if (payload) message.payload = payload;
    post("/v1/messages", identity({ key: KEY, messages: [message] })).then(function (answer) {
      if ((answer.too_long || []).indexOf(id) >= 0) { stateLine(bubble, WORDS.tooLong, true); return; }
      ownState(bubble, "sent");
      setTyping(true);
    }, function (err) {
      stateLine(bubble, err.message, true);
      bubble.querySelector(".state").onclick = function () { sendMessage(text, payload, id); };
    });
  }

  function sendText() {
    var text = ui.input.value;
    if (!text.trim()) return;
    ui.input.value = "";
    sendMessage(text);
  }

  function sendFile(file) {
    if (config.file_types.indexOf(file.type) < 0) { note(WORDS.badType); return; }
    if (file.size > config.max_file_bytes) { note(WORDS.tooBig); return; }
    note("");
    var id = randomId(16), form = new FormData(), params = identity({ key: KEY, id: id });
    for (var k in params) form.append(k, params[k]);
    form.append("file", file, file.name);
    var bubble = pendingBubble(id, "📎 " + file.name);
    post("/v1/files", form, true).then(function () { ownState(bubble, "sent"); setTyping(true); },
      function (err) { stateLine(bubble, err.message, true); });
  }

  function queueStatus(id, status) {
    if (!id || reported[id + status]) return;
    reported[id + status] = true;
    pendingStatuses.push({ id: id, status: status });
    clearTimeout(statusTimer);
    statusTimer = setTimeout(flushStatuses, 300);
  }
  function flushStatuses() {
    if (!pendingStatuses.length) return;
    var batch = pendingStatuses; pendingStatuses = [];
    post("/v1/messages", identity({ key: KEY, statuses: batch })).catch(function () { /* a courtesy */ });
  }
  function reportRead() {
    if (!open || document.visibilityState === "hidden") return;
    var replies = ui.log.querySelectorAll(".them[data-id]");
    for (var i = 0; i < replies.length; i++) queueStatus(replies[i].getAttribute("data-id"), "read");
  }

  function start() {
    fetch(BASE + "/v1/config?key=" + encodeURIComponent(KEY), { mode: "cors", credentials: "omit" })
      .then(function (r) { if (!r.ok) throw new Error(String(r.status)); return r.json(); })
      .then(function (c) { config = c; build(); connect(); })
      .catch(function () { /* not allowed on this site, or no such widget: show nothing */ });
  }
  if (document.readyState === "loading") document.addEventListener("DOMContentLoaded", start); else start();
})();
