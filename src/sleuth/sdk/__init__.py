"""The retrieval SDK: the primitives model-written code calls (runtime.md §5)."""
