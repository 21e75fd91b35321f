"""One lock for every pdfium call in a process: PDFium is not thread-safe, not even across different
documents (pypdfium2's documentation), and calls from two threads at once can crash or hang the process.
A worker parses PDFs for two jobs at once, and a server renders page images while a curate parses, so
every use of pypdfium2 (`compile/parse/pdf.py`, `store/version/page_images.py`) holds this lock."""

from __future__ import annotations

import threading

PDFIUM = threading.RLock()
