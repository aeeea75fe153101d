"""What a browser would submit for a form of a console page (inputs, checked boxes, selects, textareas)."""

from __future__ import annotations

from html.parser import HTMLParser


class _FormReader(HTMLParser):
    def __init__(self, action: str) -> None:
        super().__init__(convert_charrefs=True)
        self.action = action
        self.inside = False
        self.values: dict[str, str] = {}
        self._select: str | None = None
        self._select_first: str | None = None
        self._textarea: str | None = None
        self._text: list[str] = []

    def handle_starttag(self, tag: str, attrs_list: list[tuple[str, str | None]]) -> None:
        attrs = {k: v or "" for k, v in attrs_list}
        if tag == "form":
            self.inside = attrs.get("action") == self.action
            return
        if not self.inside:
            return
        name = attrs.get("name")
        if tag == "input" and name:
            kind = attrs.get("type", "text")
            if kind in ("checkbox", "radio"):
                if "checked" in attrs:
                    self.values[name] = attrs.get("value", "on")
            elif kind not in ("submit", "button"):
                self.values[name] = attrs.get("value", "")
        elif tag == "select" and name:
            self._select, self._select_first = name, None
        elif tag == "option" and self._select:
            value = attrs.get("value", "")
            if self._select_first is None:
                self._select_first = value
                self.values.setdefault(self._select, value)
            if "selected" in attrs:
                self.values[self._select] = value
        elif tag == "textarea" and name:
            self._textarea, self._text = name, []

    def handle_endtag(self, tag: str) -> None:
        if tag == "form":
            self.inside = False
        elif tag == "select":
            self._select = None
        elif tag == "textarea" and self._textarea:
            self.values[self._textarea] = "".join(self._text).removeprefix("\n")
            self._textarea = None

    def handle_data(self, data: str) -> None:
        if self._textarea:
            self._text.append(data)


def form_values(html: str, action: str) -> dict[str, str]:
    """``{name: value}`` of the form posting to ``action``, as a browser would send it untouched."""
    reader = _FormReader(action)
    reader.feed(html)
    return reader.values
