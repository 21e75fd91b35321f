"""The web console (issue 14): one small framework-free app served at `/` by the API's own FastAPI app.

It is static files (`static/`: one HTML page, `console.js` routing to one ES module per view in
`views/` with shared helpers in `lib/`, one stylesheet) that talk to the same
`/api` as every other client, so there is no second backend and nothing to build: what ships in the
package is what the browser runs. Why not server-rendered templates: every view here is live (a turn
streams its steps, a curate its phases), so the pages would be JavaScript either way; one module that
renders from the API's JSON keeps a single source of truth for what a view shows.
"""

from __future__ import annotations

from pathlib import Path

from fastapi import FastAPI
from fastapi.responses import FileResponse
from fastapi.staticfiles import StaticFiles

STATIC = Path(__file__).parent / "static"


#: The page runs only its own scripts and styles, talks only to its own origin, and is never framed:
#: defence in depth behind inserting every API string as text.
PAGE_HEADERS = {
    "cache-control": "no-cache",
    "content-security-policy": (
        "default-src 'self'; script-src 'self'; style-src 'self'; img-src 'self' blob: data:; "
        "connect-src 'self'; object-src 'none'; base-uri 'none'; form-action 'self'; frame-ancestors 'none'"
    ),
    "referrer-policy": "no-referrer",
    "x-content-type-options": "nosniff",
    "x-frame-options": "DENY",
}


def mount(app: FastAPI) -> None:
    """`/` serves the console's page; `/console/*` its modules and stylesheet."""
    app.mount("/console", StaticFiles(directory=STATIC), name="console")

    @app.get("/", include_in_schema=False)
    def console_page() -> FileResponse:
        return FileResponse(STATIC / "index.html", headers=PAGE_HEADERS)
