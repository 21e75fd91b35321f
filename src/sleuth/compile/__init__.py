"""Compile: parse → pages → chunks → embed → artifacts → tables, indexes, rosters (context.md §5)."""
