"""The retrieval SDK: the primitives model-written code calls (spec/runtime.md §5)."""
