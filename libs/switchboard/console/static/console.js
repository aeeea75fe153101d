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
