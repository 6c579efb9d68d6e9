"""What a written HTML page must be to open anywhere: well-formed enough for a parser, and
self-contained (no resource fetched over a network when it is rendered). No browser can be
installed offline, so this is the check in its place."""

import re
from html.parser import HTMLParser

_FETCHING = {"src", "href", "srcset", "poster", "data", "action", "background", "formaction"}
_CSS_URL = re.compile(r"url\(\s*['\"]?([^'\")]+)|@import\s+['\"]([^'\"]+)")


def external_resources(page: str) -> list[str]:
    """Every URL in `page` a browser would fetch or link to (anything but inline `data:` and `#anchors`).
    ValueError when the page does not parse."""
    found: list[str] = []

    class Collect(HTMLParser):
        def handle_starttag(self, tag, attrs):
            for name, value in attrs:
                if name in _FETCHING and value:
                    found.append(value)
                elif name == "style" and value:
                    found.extend(a or b for a, b in _CSS_URL.findall(value))

        def handle_data(self, data):  # <style> and <script> bodies
            found.extend(a or b for a, b in _CSS_URL.findall(data))

    parser = Collect(convert_charrefs=True)
    parser.feed(page)
    parser.close()
    if not re.match(r"\s*<!doctype html>", page, re.IGNORECASE) or "</html>" not in page.lower():
        raise ValueError("not a complete HTML document")
    return [u for u in found if not u.strip().startswith(("data:", "#"))]
