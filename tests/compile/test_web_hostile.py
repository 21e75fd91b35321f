"""A web server that attacks the web connector (issue 40, items 2, 3 and 9), on loopback: stacked gzip (a
bomb that decodes to gigabytes), one gzip layer past the page cap, a page that drips a byte at a time,
a Crawl-delay of a day or longer than the sync has left, a fat page with a thin article, and a stop
request mid-wait. Each ends within its bound; an honest gzip page is read as before."""

from __future__ import annotations

import gzip
import http.server
import threading
import time
from collections.abc import Callable, Iterator
from pathlib import Path

import pytest

from sleuth.compile.connectors.addresses import AllowList
from sleuth.compile.connectors.base import ConnectorError, Limits
from sleuth.compile.connectors.sync import sync
from sleuth.compile.connectors.web import MAX_CRAWL_DELAY_S, WebConnector
from sleuth.store.contexts.home import ContextDir

Respond = Callable[[http.server.BaseHTTPRequestHandler], None]
PAGE = b"<html><head><title>Backups</title></head><body><p>Backups are kept 35 days.</p></body></html>"


@pytest.fixture
def site() -> Iterator[tuple[str, dict[str, Respond]]]:
    routes: dict[str, Respond] = {}

    class Handler(http.server.BaseHTTPRequestHandler):
        def do_GET(self) -> None:  # the standard library's name
            respond = routes.get(self.path)
            if respond is None:
                self.send_response(404)
                self.send_header("content-length", "0")
                self.end_headers()
                return
            respond(self)

        def log_message(self, *args: object) -> None:
            pass

    server = http.server.ThreadingHTTPServer(("127.0.0.1", 0), Handler)
    threading.Thread(target=server.serve_forever, daemon=True).start()
    try:
        yield f"http://127.0.0.1:{server.server_address[1]}", routes
    finally:
        server.shutdown()
        server.server_close()


def _send(body: bytes, encoding: str | None = None, kind: str = "text/html") -> Respond:
    def respond(handler: http.server.BaseHTTPRequestHandler) -> None:
        handler.send_response(200)
        handler.send_header("content-type", kind)
        if encoding:
            handler.send_header("content-encoding", encoding)
        handler.send_header("content-length", str(len(body)))
        handler.end_headers()
        handler.wfile.write(body)

    return respond


def _connector(url: str, **options: object) -> WebConnector:
    return WebConnector([url], AllowList.parse("127.0.0.1"), delay_s=0, **options)  # type: ignore[arg-type]


def test_stacked_gzip_is_refused_before_it_is_decoded(site: tuple[str, dict[str, Respond]]) -> None:
    base, routes = site
    bomb = gzip.compress(gzip.compress(gzip.compress(b"\0" * (200 * 1024 * 1024))))
    assert len(bomb) < 2000  # a small answer that would decode to 200 MB
    routes["/bomb.html"] = _send(bomb, "gzip, gzip, gzip")
    with pytest.raises(ConnectorError, match="refused"):
        list(_connector(f"{base}/bomb.html").items())


def test_one_gzip_layer_stops_at_the_page_cap(site: tuple[str, dict[str, Respond]]) -> None:
    base, routes = site
    routes["/big.html"] = _send(gzip.compress(b"a" * (5 * 1024 * 1024)), "gzip")
    with pytest.raises(ConnectorError, match="once decoded"):
        list(_connector(f"{base}/big.html", max_bytes=1024 * 1024).items())


def test_an_honest_gzip_page_is_read(site: tuple[str, dict[str, Respond]]) -> None:
    base, routes = site
    routes["/ok.html"] = _send(gzip.compress(PAGE), "gzip")
    connector = _connector(f"{base}/ok.html")
    [item] = list(connector.items())
    assert b"35 days" in connector.fetch(item, 10_000_000)


def test_a_page_that_drips_ends_at_the_timeout(site: tuple[str, dict[str, Respond]]) -> None:
    base, routes = site

    def drip(handler: http.server.BaseHTTPRequestHandler) -> None:
        handler.send_response(200)
        handler.send_header("content-type", "text/html")
        handler.send_header("content-length", "100000")
        handler.end_headers()
        try:
            for _ in range(100):
                handler.wfile.write(b"x")
                handler.wfile.flush()
                time.sleep(0.5)
        except OSError:  # the connector hung up: what it should do
            pass

    routes["/drip.html"] = drip
    began = time.monotonic()
    with pytest.raises(ConnectorError, match="not read within 2 s"):
        list(_connector(f"{base}/drip.html", timeout_s=2.0).items())
    assert time.monotonic() - began < 40  # each read was within the per-read timeout; the whole was not


def test_a_crawl_delay_of_a_day_is_read_as_the_cap(site: tuple[str, dict[str, Respond]]) -> None:
    base, routes = site
    routes["/robots.txt"] = _send(b"User-agent: *\nCrawl-delay: 86400\n", kind="text/plain")
    routes["/ok.html"] = _send(PAGE)
    connector = _connector(f"{base}/ok.html")
    assert connector._allowed(f"{base}/ok.html")
    assert connector._delay(f"{base}/ok.html") == MAX_CRAWL_DELAY_S


def test_embedded_ipv4_forms_are_unwrapped() -> None:
    import ipaddress

    from sleuth.compile.connectors.addresses import embedded_ipv4, public

    meta = ipaddress.IPv4Address("169.254.169.254")
    for form in ("64:ff9b::a9fe:a9fe", "2002:a9fe:a9fe::1", "::a9fe:a9fe", "::ffff:a9fe:a9fe"):
        assert meta in embedded_ipv4(ipaddress.ip_address(form)), form
    assert embedded_ipv4(ipaddress.ip_address("2606:4700::1111")) == []  # a public IPv6 carries none
    assert embedded_ipv4(ipaddress.ip_address("::1")) == []
    assert not public(ipaddress.ip_address("224.0.0.1")) and public(ipaddress.ip_address("1.1.1.1"))


# ------------------------------------------------------------- one budget and one deadline per sync
def _limits(timeout_s: float = 300, max_total_bytes: int = 100 * 1024 * 1024) -> Limits:
    return Limits(
        max_items=100, max_file_bytes=50 * 1024 * 1024, max_total_bytes=max_total_bytes, timeout_s=timeout_s
    )


def test_a_wait_past_the_sync_deadline_fails_at_once(
    site: tuple[str, dict[str, Respond]], tmp_path: Path
) -> None:
    """A Crawl-delay (30 s, capped) longer than what is left of the sync is not slept first."""
    base, routes = site
    routes["/robots.txt"] = _send(b"User-agent: *\nCrawl-delay: 30\n", kind="text/plain")
    routes["/a.html"] = _send(PAGE)
    routes["/b.html"] = _send(PAGE)
    connector = WebConnector([f"{base}/a.html", f"{base}/b.html"], AllowList.parse("127.0.0.1"), delay_s=0)
    began = time.monotonic()
    with pytest.raises(ConnectorError, match="would pass the sync's 5 s"):
        sync(ContextDir(tmp_path), "site", connector, _limits(timeout_s=5))
    assert time.monotonic() - began < 25  # not the 30 s wait (loose: a loaded machine)


def test_the_budget_counts_downloads_not_extracted_text(
    site: tuple[str, dict[str, Respond]], tmp_path: Path
) -> None:
    """A 3 MB page whose article is one sentence costs 3 MB of the sync's budget, not 60 bytes."""
    base, routes = site
    padding = b"<!-- " + b"x" * (3 * 1024 * 1024) + b" -->"
    routes["/fat.html"] = _send(PAGE.replace(b"</body>", padding + b"</body>"))
    connector = WebConnector([f"{base}/fat.html"], AllowList.parse("127.0.0.1"), delay_s=0)
    with pytest.raises(ConnectorError, match="downloaded over 1048576 bytes"):
        sync(ContextDir(tmp_path), "site", connector, _limits(max_total_bytes=1024 * 1024))


def test_a_stop_request_ends_a_wait(site: tuple[str, dict[str, Respond]], tmp_path: Path) -> None:
    """The stop check runs during the Crawl-delay wait, so a cancel ends the sync within a slice."""
    base, routes = site
    routes["/robots.txt"] = _send(b"User-agent: *\nCrawl-delay: 30\n", kind="text/plain")
    routes["/a.html"] = _send(PAGE)
    routes["/b.html"] = _send(PAGE)
    connector = WebConnector([f"{base}/a.html", f"{base}/b.html"], AllowList.parse("127.0.0.1"), delay_s=0)
    asked = threading.Event()

    class Stopped(ConnectorError):
        pass

    def stop() -> None:
        if asked.is_set():
            raise Stopped("stopped")

    threading.Timer(1.0, asked.set).start()
    began = time.monotonic()
    with pytest.raises(Stopped):
        sync(ContextDir(tmp_path), "site", connector, _limits(), stop=stop)
    assert time.monotonic() - began < 25  # not the 30 s wait
