"""The version reader: what one compiled version holds (chunks, pages, indexes, documents) and the
searches over it. Read-only: a version never changes once built."""
