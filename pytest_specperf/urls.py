"""URLs as the plugin shows and stores them: credentials and query values masked, one scheme everywhere.

A URL a user gives (``--endpoint``, ``--specperf-ab``, ``--specperf-arms``, ``--specperf-history``) may carry a
password (``http://user:PASSWORD@host``) or a token in its query (``?key=TOKEN``). Requests use the real URL;
whatever is printed or written (the table, every report file, a saved run, a history row, an error message) uses
``redact_url``'s form, ``http://user:***@host:8000?key=***``, the form a PostgreSQL history URL is shown in too.
"""

from __future__ import annotations

import re
from urllib.parse import parse_qsl, urlsplit, urlunsplit

MASK = "***"

#: a URL inside free text: a scheme, ``://``, then everything up to white space, a quote or the next URL's scheme
_URL_IN_TEXT = re.compile(r"[A-Za-z][A-Za-z0-9+.-]*://(?:(?![A-Za-z][A-Za-z0-9+.-]*://)[^\s'\"<>`])+")
#: what ends a sentence rather than a URL: kept outside the masked part
_TRAILING = ",;.)]}"


def redact_url(url: str) -> str:
    """``url`` as it may be shown: a password as ``***`` (``user:***@``; a user name given alone, often a token, as
    ``***@``), every query value and a fragment as ``***``. Text that carries none of them comes back unchanged."""
    try:
        parts = urlsplit(url)
    except ValueError:  # e.g. an unbalanced [ in the host: mask everything that could be a secret
        return _mask_loose(url)
    if not parts.netloc:
        return _mask_loose(url) if "@" in url or "?" in url else url
    scheme, sep, rest = url.partition("://")
    if sep and "@" not in parts.netloc and "@" in rest:
        # a password with a / ? or # in it ends the netloc early (``http://u:pa/ss@host``): all up to the last @
        # is the user's, whatever urlsplit makes of it (a path or query with an @ is masked too: safe side)
        userinfo, host = rest.rsplit("@", 1)
        user, colon, _ = userinfo.partition(":")
        shown = f"{user}:{MASK}" if colon and not re.search(r"[/?#]", user) else MASK
        return redact_url(f"{scheme}://{shown}@{host}")
    netloc = parts.netloc
    if "@" in netloc:
        userinfo, host = netloc.rsplit("@", 1)
        user, colon, _ = userinfo.partition(":")
        netloc = f"{user}:{MASK}@{host}" if colon else f"{MASK}@{host}"
    query = _mask_query(parts.query)
    fragment = MASK if parts.fragment else ""
    if (netloc, query, fragment) == (parts.netloc, parts.query, parts.fragment):
        return url  # nothing to hide: exactly as given
    return urlunsplit(parts._replace(netloc=netloc, query=query, fragment=fragment))


def redact_text(text: str) -> str:
    """``text`` (an error message, an option's value) with every URL in it as ``redact_url`` shows it."""
    def one(match: re.Match[str]) -> str:
        found = match.group(0)
        body = found.rstrip(_TRAILING)
        return redact_url(body) + found[len(body):]
    return _URL_IN_TEXT.sub(one, text)


def request_parts(url: str) -> tuple[str, tuple[tuple[str, str], ...]]:
    """(the URL without its query or fragment, the query's pairs in order): the base a client joins paths to, and
    the parameters it sends on every request (``?api-version=...`` stays on ``/v1/models`` and every other)."""
    parts = urlsplit(url)
    base = urlunsplit(parts._replace(query="", fragment=""))
    return base, tuple(parse_qsl(parts.query, keep_blank_values=True))


def _mask_query(query: str) -> str:
    """Every value as ``***`` (names kept: they say what was given); an item without a name is all value."""
    if not query:
        return query
    items = []
    for item in re.split(r"([&;])", query):
        if item in ("&", ";", ""):
            items.append(item)
            continue
        name, eq, _ = item.partition("=")
        items.append(f"{name}={MASK}" if eq else MASK)
    return "".join(items)


def _mask_loose(text: str) -> str:
    """Text that does not parse as a URL with a host: whatever precedes an ``@`` and follows a ``?`` is masked."""
    text = re.sub(r"[^\s/@]+@", f"{MASK}@", text)
    head, q, query = text.partition("?")
    return head + q + _mask_query(query) if q else text
