"""Store: the data directory `$SLEUTH_HOME` (context.md §7): contexts, versions, ledger, indexes."""
