// Switchboard console: live updates. The server streams the tenant's conversation events (SSE, fed
// from Redis pub/sub); each one becomes a DOM event that htmx elements listen to:
//   sb:changed        on <body>, for the inbox list (hx-trigger="sb:changed from:body")
//   sb:thread         on <body>, when the event is about the conversation this page shows
//   ended             the session is over: the stream stops and the page reloads (to the login page)
// Bursts are coalesced (one reload per 300 ms). The CSRF header of htmx requests is set on <body>.
(function () {
  "use strict";
  var timers = {};
  function fire(name, detail) {
    clearTimeout(timers[name]);
    timers[name] = setTimeout(function () {
      document.body.dispatchEvent(new CustomEvent(name, { bubbles: true, detail: detail }));
    }, 300);
  }
  function connect() {
    var url = document.body.getAttribute("data-events");
    if (!url || !window.EventSource) return;
    var source = new EventSource(url);
    source.addEventListener("ready", function () { document.body.setAttribute("data-live", "on"); });
    source.addEventListener("conversation", function (event) {
      var data = {};
      try { data = JSON.parse(event.data); } catch (e) { return; }
      fire("sb:changed", data);
      var shown = document.body.getAttribute("data-conversation");
      if (shown && data.conversation_id === shown) fire("sb:thread", data);
    });
    // the session ended (logout, expiry, password change): stop, and reload to reach the login page
    source.addEventListener("ended", function () {
      source.close();
      document.body.setAttribute("data-live", "off");
      window.location.reload();
    });
    source.onerror = function () { document.body.setAttribute("data-live", "off"); };
  }
  document.addEventListener("DOMContentLoaded", connect);
})();
// Copy buttons: <button data-copy="#input-id"> copies that input's value (the clipboard API where the
// page is a secure context, else the browser's copy command on the selected text).
(function () {
  "use strict";
  document.addEventListener("click", function (event) {
    var button = event.target.closest ? event.target.closest("button[data-copy]") : null;
    if (!button) return;
    var field = document.querySelector(button.getAttribute("data-copy"));
    if (!field) return;
    field.select();
    if (navigator.clipboard && window.isSecureContext) {
      navigator.clipboard.writeText(field.value);
    } else {
      document.execCommand("copy");
    }
    button.setAttribute("data-copied", "yes");
  });
})();
// Unread: the navigation's badge (#nav-unread, reloaded by htmx on every live event) also leads the
// page title, "(3) Inbox · Switchboard", so a person sees it from another tab.
(function () {
  "use strict";
  var title = null;
  function show() {
    var badge = document.getElementById("nav-unread");
    if (!badge) return;
    if (title === null) title = document.title;
    var n = parseInt(badge.getAttribute("data-count") || "0", 10);
    document.title = n > 0 ? "(" + n + ") " + title : title;
  }
  document.addEventListener("htmx:afterSettle", show);
})();
// Canned replies: in a <textarea data-canned='[{"shortcut", "text"}]'> typing "/" (at the start or
// after a space) opens a list of the tenant's canned replies, filtered by what follows the slash.
// Up/Down choose, Enter or Tab insert (the "/word" is replaced by the reply, variables already filled
// by the server), Escape closes; a click inserts too. The textarea is an ARIA combobox.
(function () {
  "use strict";
  var TRIGGER = /(^|\s)\/([A-Za-z0-9_-]*)$/;
  function setup(area) {
    var replies = [];
    try { replies = JSON.parse(area.getAttribute("data-canned") || "[]"); } catch (e) { return; }
    if (!replies.length) return;
    var list = document.createElement("ul");
    list.id = area.id + "-canned";
    list.className = "canned-picker";
    list.setAttribute("role", "listbox");
    list.setAttribute("aria-label", area.getAttribute("data-canned-label") || "Canned replies");
    list.hidden = true;
    area.parentNode.insertBefore(list, area.nextSibling);
    area.setAttribute("role", "combobox");
    area.setAttribute("aria-autocomplete", "list");
    area.setAttribute("aria-controls", list.id);
    area.setAttribute("aria-expanded", "false");
    var shown = [], active = 0, match = null;
    function close() {
      list.hidden = true; shown = []; match = null;
      area.setAttribute("aria-expanded", "false");
      area.removeAttribute("aria-activedescendant");
    }
    function highlight(index) {
      active = (index + shown.length) % shown.length;
      Array.prototype.forEach.call(list.children, function (li, i) {
        li.setAttribute("aria-selected", i === active ? "true" : "false");
      });
      area.setAttribute("aria-activedescendant", list.id + "-" + active);
    }
    function insert(reply) {
      var before = area.value.slice(0, area.selectionStart), after = area.value.slice(area.selectionEnd);
      var start = before.length - match[2].length - 1;
      area.value = before.slice(0, start) + reply.text + after;
      var caret = start + reply.text.length;
      area.setSelectionRange(caret, caret);
      close();
      area.focus();
    }
    function update() {
      match = TRIGGER.exec(area.value.slice(0, area.selectionStart));
      if (!match) { close(); return; }
      var word = match[2].toLowerCase();
      shown = replies.filter(function (r) { return r.shortcut.indexOf(word) === 0; });
      if (!shown.length) { close(); return; }
      list.innerHTML = "";
      shown.forEach(function (reply, i) {
        var li = document.createElement("li");
        li.id = list.id + "-" + i;
        li.setAttribute("role", "option");
        var code = document.createElement("code");
        code.textContent = "/" + reply.shortcut;
        var text = document.createElement("span");
        text.textContent = " " + reply.text;
        li.appendChild(code); li.appendChild(text);
        li.addEventListener("mousedown", function (event) { event.preventDefault(); insert(reply); });
        list.appendChild(li);
      });
      list.hidden = false;
      area.setAttribute("aria-expanded", "true");
      highlight(0);
    }
    area.addEventListener("input", update);
    area.addEventListener("blur", close);
    area.addEventListener("keydown", function (event) {
      if (list.hidden) return;
      if (event.key === "ArrowDown" || event.key === "ArrowUp") {
        event.preventDefault(); highlight(active + (event.key === "ArrowDown" ? 1 : -1));
      } else if (event.key === "Enter" || event.key === "Tab") {
        event.preventDefault(); insert(shown[active]);
      } else if (event.key === "Escape") {
        event.preventDefault(); close();
      }
    });
  }
  function scan(root) {
    Array.prototype.forEach.call((root || document).querySelectorAll("textarea[data-canned]"), function (area) {
      if (area.getAttribute("data-canned-ready")) return;
      area.setAttribute("data-canned-ready", "yes");
      setup(area);
    });
  }
  document.addEventListener("DOMContentLoaded", function () { scan(document); });
  document.addEventListener("htmx:afterSettle", function () { scan(document); });
})();
// Agent settings, model rows: show only the inputs the chosen provider needs. Each input's wrapper
// says which providers need it (data-needs="openai azure ..."); without this script every input shows.
(function () {
  "use strict";
  function apply(row) {
    var select = row.querySelector("select[data-provider]");
    if (!select) return;
    row.querySelectorAll("[data-needs]").forEach(function (part) {
      part.hidden = part.getAttribute("data-needs").split(" ").indexOf(select.value) < 0;
    });
  }
  document.addEventListener("change", function (event) {
    var row = event.target.closest ? event.target.closest(".deployment") : null;
    if (row && event.target.matches("select[data-provider]")) apply(row);
  });
  document.addEventListener("DOMContentLoaded", function () {
    document.querySelectorAll(".deployment").forEach(apply);
  });
})();
