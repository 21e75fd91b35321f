"""The query runtime: orientation, the agent loop, evidence, synthesis, citations, shapes, the
offline planner and replay (spec/runtime.md)."""
