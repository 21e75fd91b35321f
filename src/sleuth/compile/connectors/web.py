"""The web connector (issue 27): pages from a list of URLs, a sitemap, or the links below a prefix.

A crawl is polite and bounded: robots.txt is read per host and honoured (user agent `SleuthBot`),
requests to one host are spaced by `delay_s` (or the site's Crawl-delay, if longer), at most
`max_pages` pages are read, each at most the file limit, and links are followed only below `prefix`.
Every URL, redirects included, passes the address guard, and the connection goes to the address the
guard checked (the `Host` header and TLS name stay the URL's), so a name that resolves elsewhere a
moment later (DNS rebinding) does not reach the server's own network. An HTML page becomes its
article text as Markdown, its title and URL at the top, with trafilatura (the `web` extra: the
field's extractor of main content) or, without it, the page as it is (Sleuth's HTML parser reads
it); a PDF or text page is kept as it is. The page's URL is its provenance (`origin`).

A web server has no cheap listing, so every sync reads every page; only pages whose content changed
are written again, so only they are re-parsed and re-embedded.
"""

from __future__ import annotations

import hashlib
import re
import time
import urllib.robotparser
import zlib
from collections import deque
from collections.abc import Iterator
from dataclasses import dataclass, field
from typing import Any
from urllib.parse import urldefrag, urljoin, urlsplit

import httpx
from selectolax.lexbor import LexborHTMLParser

from sleuth.compile.connectors.addresses import AllowList, check_url
from sleuth.compile.connectors.base import Budget, ConnectorError, Item

USER_AGENT = "SleuthBot/1 (+https://github.com/sleuth)"
MAX_REDIRECTS = 5
PAGE_BYTES = 20 * 1024 * 1024  # one page, downloaded or decoded, whatever the file limit allows
MAX_CRAWL_DELAY_S = 30.0  # a site's Crawl-delay beyond this is read as this (100,000 s stalled a sync)
#: The longest one network read (or connect) may block: how late a stop request or the sync's deadline
#: can be noticed while a server sends nothing.
READ_WAIT_S = 10.0
#: The encodings asked for and decoded here, one at most, by a decoder that stops at the page cap:
#: httpx's own decoding undoes `gzip, gzip, gzip` in full before any cap is checked (a 275-byte bomb).
ACCEPT_ENCODING = "gzip, deflate"
_LOC = re.compile(r"<loc>\s*([^<\s]+)\s*</loc>", re.IGNORECASE)
_KEEP = {"text/html": ".html", "application/pdf": ".pdf", "text/plain": ".txt", "text/markdown": ".md"}


@dataclass
class WebConnector:
    urls: list[str]
    allow: AllowList
    sitemap: str | None = None
    prefix: str | None = None  # follow links below this URL; None: read only `urls` and the sitemap's
    max_pages: int = 200
    delay_s: float = 1.0
    max_bytes: int = 10 * 1024 * 1024
    timeout_s: float = 30.0  # a whole response, not each read: a page that drips a byte at a time ends too
    kind: str = "web"
    #: The sync's deadline, download bytes and stop request (`sync` sets it; a lone crawl gets its own).
    budget: Budget | None = None
    _pages: dict[str, bytes] = field(default_factory=dict, init=False, repr=False)
    _robots: dict[str, urllib.robotparser.RobotFileParser | None] = field(default_factory=dict, init=False)
    _last: dict[str, float] = field(default_factory=dict, init=False)

    # ------------------------------------------------------------------ fetching, guarded and polite
    def _get(self, url: str) -> tuple[str, httpx.Response]:
        """GET `url`, following redirects by hand (each one checked), spaced per host."""
        budget = self._budget()
        for _hop in range(MAX_REDIRECTS + 1):
            address = check_url(url, self.allow)
            parts = urlsplit(url)
            host = parts.netloc.casefold()
            wait = self._last.get(host, 0.0) + self._delay(url) - time.monotonic()
            if wait > 0:
                budget.sleep(wait)  # a stop request ends the wait; a wait past the deadline is not begun
            self._last[host] = time.monotonic()
            pinned = url if address is None else _pinned(url, str(address))
            headers = {"user-agent": USER_AGENT, "host": parts.netloc, "accept-encoding": ACCEPT_ENCODING}
            extensions: dict[str, Any] = {"sni_hostname": parts.hostname} if parts.scheme == "https" else {}
            budget.check()
            wait_s = max(0.1, min(READ_WAIT_S, self.timeout_s, budget.left_s()))
            with httpx.Client(timeout=wait_s, follow_redirects=False, verify=True) as client:
                request = client.build_request("GET", pinned, headers=headers, extensions=extensions)
                response = client.send(request, stream=True)
                try:
                    if response.is_redirect and "location" in response.headers:
                        url = urljoin(url, response.headers["location"])
                        continue
                    body = self._body(url, response)
                finally:
                    response.close()
            plain = httpx.Headers([(k, v) for k, v in response.headers.items() if k != "content-encoding"])
            return url, httpx.Response(response.status_code, headers=plain, content=body)
        raise ConnectorError(f"{url}: more than {MAX_REDIRECTS} redirects")

    def _body(self, url: str, response: httpx.Response) -> bytes:
        """The response's bytes, raw ones counted as they arrive (never decoded by httpx), within the
        page cap and `timeout_s` for the whole body; one gzip or deflate layer decoded here, within the
        cap too; any other encoding, or more than one, refused."""
        cap = min(self.max_bytes, PAGE_BYTES)
        encodings = [e.strip().casefold() for e in response.headers.get("content-encoding", "").split(",")]
        encodings = [e for e in encodings if e and e != "identity"]
        if len(encodings) > 1 or (encodings and encodings[0] not in ("gzip", "x-gzip", "deflate")):
            named = ", ".join(encodings)
            raise ConnectorError(f"{url}: content encoding {named!r} refused (one gzip or deflate at most)")
        budget = self._budget()
        deadline = time.monotonic() + self.timeout_s
        decoder = _Decoder(encodings[0] if encodings else None, cap, url)
        raw = 0
        for chunk in response.iter_raw():
            raw += len(chunk)
            budget.spend(len(chunk), url)  # downloads count, whatever the page turns into
            if raw > cap:
                raise ConnectorError(f"{url}: over {cap} bytes")
            decoder.feed(chunk)
            if time.monotonic() > deadline:
                raise ConnectorError(f"{url}: not read within {self.timeout_s:g} s")
            budget.check()
        return decoder.done()

    def _budget(self) -> Budget:
        if self.budget is None:  # a crawl outside a sync: bounded by its own page count and deadline
            self.budget = Budget(time.monotonic() + 3600, 3600, self.max_pages * PAGE_BYTES)
        return self.budget

    def _delay(self, url: str) -> float:
        robots = self._robots.get(urlsplit(url).netloc.casefold())
        crawl_delay = robots.crawl_delay(USER_AGENT) if robots is not None else None
        return max(self.delay_s, min(float(crawl_delay or 0), MAX_CRAWL_DELAY_S))

    def _allowed(self, url: str) -> bool:
        parts = urlsplit(url)
        host = parts.netloc.casefold()
        if host not in self._robots:
            self._robots[host] = None
            try:
                _final, response = self._get(f"{parts.scheme}://{parts.netloc}/robots.txt")
            except ConnectorError:
                response = None
            if response is not None and response.status_code == 200:
                parser = urllib.robotparser.RobotFileParser()
                parser.parse(response.text.splitlines())
                self._robots[host] = parser
        robots = self._robots[host]
        return robots is None or robots.can_fetch(USER_AGENT, url)

    # -------------------------------------------------------------------------------- the connector
    def _seeds(self) -> list[str]:
        seeds = list(self.urls)
        if self.sitemap:
            _final, response = self._get(self.sitemap)
            if response.status_code != 200:
                raise ConnectorError(f"sitemap {self.sitemap}: HTTP {response.status_code}")
            seeds += _LOC.findall(response.text)[: self.max_pages]
        return seeds

    def items(self) -> Iterator[Item]:
        queue = deque(urldefrag(u)[0] for u in self._seeds())
        seen: set[str] = set(queue)
        read = 0
        while queue and read < self.max_pages:
            url = queue.popleft()
            if not self._allowed(url):
                continue
            final, response = self._get(url)
            read += 1
            kind = response.headers.get("content-type", "").split(";")[0].strip().casefold()
            if response.status_code != 200 or kind not in _KEEP:
                continue
            if kind == "text/html" and self.prefix is not None:
                for link in _links(final, response.text):
                    if link.startswith(self.prefix) and link not in seen and len(seen) < self.max_pages * 5:
                        seen.add(link)
                        queue.append(link)
            if kind == "text/html" and _has_extractor():
                body, suffix = _article(final, response.text), ".md"
            else:
                body, suffix = response.content, _KEEP[kind]
            rel = _path_of(final, suffix)
            self._pages[rel] = body
            yield Item(rel, hashlib.sha256(body).hexdigest(), len(body), final)

    def fetch(self, item: Item, max_bytes: int) -> bytes:
        body = self._pages.pop(item.id)
        if len(body) > max_bytes:
            raise ConnectorError(f"{item.origin}: over {max_bytes} bytes")
        return body


class _Decoder:
    """Decodes one gzip or deflate layer (or none) into at most `cap` bytes: zlib is asked for no more
    than the room left, so a bomb stops at the cap instead of filling memory."""

    def __init__(self, encoding: str | None, cap: int, url: str) -> None:
        self.cap, self.url = cap, url
        self.out = bytearray()
        self._zlib: Any = None
        if encoding in ("gzip", "x-gzip"):
            self._zlib = zlib.decompressobj(16 + zlib.MAX_WBITS)
        elif encoding == "deflate":
            self._zlib = zlib.decompressobj()  # zlib-wrapped, as RFC 9110 says; raw deflate is refused

    def feed(self, data: bytes) -> None:
        if self._zlib is None:
            self.out += data
            return
        try:
            while data:
                room = self.cap - len(self.out)
                self.out += self._zlib.decompress(data, room + 1)
                if len(self.out) > self.cap:
                    raise ConnectorError(f"{self.url}: over {self.cap} bytes once decoded")
                data = self._zlib.unconsumed_tail
        except zlib.error as exc:
            raise ConnectorError(f"{self.url}: a damaged compressed body ({exc})") from None

    def done(self) -> bytes:
        if self._zlib is not None:
            try:
                self.out += self._zlib.flush(self.cap - len(self.out) + 1)
            except zlib.error as exc:
                raise ConnectorError(f"{self.url}: a damaged compressed body ({exc})") from None
            if len(self.out) > self.cap:
                raise ConnectorError(f"{self.url}: over {self.cap} bytes once decoded")
        return bytes(self.out)


def _pinned(url: str, address: str) -> str:
    """`url` with its host replaced by the checked address (IPv6 in brackets), port kept."""
    parts = urlsplit(url)
    host = f"[{address}]" if ":" in address else address
    netloc = f"{host}:{parts.port}" if parts.port else host
    return parts._replace(netloc=netloc).geturl()


def _links(base: str, html: str) -> Iterator[str]:
    for node in LexborHTMLParser(html).css("a[href]"):
        href = node.attributes.get("href") or ""
        link = urldefrag(urljoin(base, href))[0]
        if urlsplit(link).scheme in ("http", "https"):
            yield link


def _has_extractor() -> bool:
    try:
        import trafilatura  # noqa: F401
    except ImportError:
        return False
    return True


def _article(url: str, html: str) -> bytes:
    """The page's main text as Markdown, under its title and URL (trafilatura)."""
    import trafilatura

    text = trafilatura.extract(
        html, url=url, output_format="markdown", include_tables=True, favor_recall=True
    )
    title = (trafilatura.extract_metadata(html) or None) if text else None
    heading = getattr(title, "title", None) or url
    return f"# {heading}\n\nSource: <{url}>\n\n{text or ''}\n".encode()


def _path_of(url: str, suffix: str) -> str:
    """Where a page lands: `host/path`, `index` for a folder, with the suffix its parser reads."""
    parts = urlsplit(url)
    path = parts.path.strip("/") or "index"
    if parts.path.endswith("/"):
        path = f"{path}/index"
    if parts.query:
        path += "-" + hashlib.sha256(parts.query.encode()).hexdigest()[:8]
    stem = re.sub(r"\.(html?|php|aspx?)$", "", path)
    safe = re.sub(r"[^A-Za-z0-9._/-]+", "-", f"{parts.hostname}/{stem}")
    return safe if safe.endswith(suffix) else safe + suffix
