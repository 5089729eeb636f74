"""fortunes: the Fortune table plus one row added at request time, sorted and rendered as an HTML table
(TechEmpower's fortunes; docs/techempower.md)."""

from __future__ import annotations

from html.parser import HTMLParser

from ..fixtures import FORTUNES
from .checks import FETCH_MAX_BODY_BYTES, _expect, _show, _Wrong, ok_status
from .load import learned_load
from .techempower import TechEmpowerScenario, counted, te_headers

# The row every request adds before sorting (TechEmpower's).
ADDED_FORTUNE = (0, "Additional fortune added at request time.")


def fortune_rows() -> list[tuple[str, str]]:
    """The table's rows as a browser reads them: (id, message) sorted by message (code point order)."""
    rows = sorted([*FORTUNES.items(), ADDED_FORTUNE], key=lambda row: row[1])
    return [(str(i), message) for i, message in rows]


class _Table(HTMLParser):
    """The cells of every table row (th and td) as text with the entities decoded, and the elements seen: an
    unescaped <script> message shows as a script element, a row cut by unescaped markup as wrong cells."""

    def __init__(self):
        super().__init__(convert_charrefs=True)
        self.rows: list[list[str]] = []
        self.tags: list[str] = []
        self.cell: list[str] | None = None
        self.title = ""
        self.in_title = False
        self.doctype = ""

    def handle_decl(self, decl):
        self.doctype = decl

    def handle_starttag(self, tag, attrs):
        self.tags.append(tag)
        if tag == "tr":
            self.rows.append([])
        elif tag in ("td", "th"):
            self.cell = []
        elif tag == "title":
            self.in_title = True

    def handle_endtag(self, tag):
        if tag in ("td", "th") and self.cell is not None and self.rows:
            self.rows[-1].append("".join(self.cell))
            self.cell = None
        elif tag == "title":
            self.in_title = False

    def handle_data(self, data):
        if self.cell is not None:
            self.cell.append(data)
        if self.in_title:
            self.title += data


class Fortunes(TechEmpowerScenario):
    """GET /fortunes answers 200, text/html; charset=utf-8, an HTML table (header row id, message) of every row
    of table fortune plus (0, "Additional fortune added at request time."), sorted by message, each message
    HTML-escaped (the <script> fortune is text, not an element) and UTF-8 encoded; one query per request."""

    name = "fortunes"
    counted_table = "fortune"
    order = 110
    nagle_path = "/fortunes"

    def load(self, level, base, static_dir, http_args):
        # Every response holds the same table; spacing and escaping differ between template engines, so the
        # content was checked before the load and the generator holds every response to the first one.
        return learned_load(f"{base}/fortunes", http_args)

    def check_responses(self, http, static_dir):
        def table(status, headers, body, _):
            ok_status(status)
            te_headers(headers, "text/html")
            ctype = headers["content-type"].lower().replace(" ", "")
            _expect("charset=utf-8" in ctype, f"Content-Type {headers['content-type']!r}, expected text/html; "
                    "charset=utf-8")
            try:
                text = body.decode("utf-8")
            except UnicodeDecodeError as exc:
                raise _Wrong(f"body is not UTF-8 ({exc}): {_show(body)}") from None
            parsed = _Table()
            parsed.feed(text)
            parsed.close()
            _expect(parsed.doctype.lower() == "doctype html", f"no <!doctype html> first: {_show(body)}")
            _expect(parsed.title == "Fortunes", f"title {parsed.title!r}, expected 'Fortunes'")
            _expect("script" not in parsed.tags, "a <script> element in the page: the messages must be "
                    "HTML-escaped (<script>alert(...) must read &lt;script&gt;...)")
            _expect(parsed.tags.count("table") == 1, f"{parsed.tags.count('table')} tables, expected one")
            _expect(parsed.rows[:1] == [["id", "message"]],
                    f"first row {parsed.rows[:1]}, expected the header row ['id', 'message']")
            expected = fortune_rows()
            got = [tuple(r) for r in parsed.rows[1:]]
            if got != expected:
                if len(got) != len(expected):
                    raise _Wrong(f"{len(got)} fortune rows, expected {len(expected)} (the table's "
                                 f"{len(FORTUNES)} and the one added at request time)")
                index = next(i for i, (a, b) in enumerate(zip(got, expected)) if a != b)
                raise _Wrong(f"row {index + 1} is {got[index]!r}, expected {expected[index]!r} (sorted by message, "
                             "entities decoded)")
        counted(http, "/fortunes", table, FETCH_MAX_BODY_BYTES - 1, "fortune", 1)


SCENARIO = Fortunes()
