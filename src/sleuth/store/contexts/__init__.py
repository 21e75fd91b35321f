"""The home and the contexts in it: each context's files, its ledger and curate lock, and, with many
machines, the working copies kept in step with the shared storage."""
