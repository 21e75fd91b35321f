"""Compile: parse → pages → chunks → embed → artifacts → tables, indexes, rosters (spec/context.md §5)."""
