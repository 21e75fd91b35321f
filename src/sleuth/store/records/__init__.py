"""The server's records: the database (SQLite or PostgreSQL) and what it holds: sessions, queries
and their events, tasks, keys, leases, secrets, replay logs."""
