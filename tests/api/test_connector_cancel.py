"""A web sync stops when its task is cancelled (issue 40, item 3), through a real server: the crawl is in
a Crawl-delay wait on a loopback site, `DELETE /api/tasks/{id}` answers with the task `cancelled`
(before: `504 task_stop_timeout` after 30 s, the task left `stopping` and its worker taken)."""

from __future__ import annotations

import http.server
import threading
import time

from tests.api.support import ServerFactory, unique_slug, wait_task

PAGE = b"<html><head><title>Backups</title></head><body><p>Backups are kept 35 days.</p></body></html>"


def _site(requests: list[str]) -> http.server.ThreadingHTTPServer:
    class Handler(http.server.BaseHTTPRequestHandler):
        def do_GET(self) -> None:  # the standard library's name
            requests.append(self.path)
            body = b"User-agent: *\nCrawl-delay: 30\n" if self.path == "/robots.txt" else PAGE
            self.send_response(200)
            self.send_header("content-type", "text/plain" if self.path == "/robots.txt" else "text/html")
            self.send_header("content-length", str(len(body)))
            self.end_headers()
            self.wfile.write(body)

        def log_message(self, *args: object) -> None:
            pass

    server = http.server.ThreadingHTTPServer(("127.0.0.1", 0), Handler)
    threading.Thread(target=server.serve_forever, daemon=True).start()
    return server


def test_cancelling_a_web_sync_stops_it_mid_wait(make_server: ServerFactory) -> None:
    client = make_server(connector_allow="127.0.0.1").client
    requests: list[str] = []
    site = _site(requests)
    base = f"http://127.0.0.1:{site.server_address[1]}"
    slug = unique_slug()
    client.post("/api/contexts", json={"slug": slug, "name": "Crawl cancel"}).raise_for_status()
    try:
        made = client.post(
            f"/api/contexts/{slug}/connectors",
            json={"name": "site", "kind": "web",
                  "config": {"urls": [f"{base}/a.html", f"{base}/b.html", f"{base}/c.html"], "delay_s": 0}},
        )  # fmt: skip
        assert made.status_code == 200, made.text
        started = client.post(f"/api/contexts/{slug}/import", json={"connector": "site"}).json()
        deadline = time.monotonic() + 60
        while "/robots.txt" not in requests:  # read: the sync now waits its 30 s before the first page
            assert time.monotonic() < deadline, requests
            time.sleep(0.05)
        stopped = client.request("DELETE", f"/api/tasks/{started['task_id']}")
        assert stopped.status_code == 200, stopped.text
        assert wait_task(client, started["task_id"])["state"] == "cancelled"
        assert "/a.html" not in requests
    finally:
        site.shutdown()
        site.server_close()
        client.delete(f"/api/contexts/{slug}")
