"""Store: the data directory `$SLEUTH_HOME` (spec/context.md §7): contexts, versions, ledger, indexes."""
