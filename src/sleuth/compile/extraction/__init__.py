"""Curation with a model (spec/context.md §5.4): the kinds `summary`, `topic`, `entity` and `event`,
rows found in prose and typed edges, each claim backed by a verbatim quote located in the page text.

- `extractor.py`: `ModelExtractor`, the `compile.extract.Extractor` the compiler calls with a model;
  `calls.py`: its state and how its calls run in parallel and are counted; `prose_rows.py`: rows
  found in running text;
- `choose.py`: which extractor a curate (or a restore) uses;
- `client.py`: one call: JSON validated per kind (`schemas.py`, `prompts.py`), one repair round,
  retries, concurrency per provider, usage and the token budget;
- `cache.py`, `inputs.py`: every validated reply cached under a key of what decided it;
- `quotes.py`: quotes into provenance; `grouping.py`: corpus mentions into subjects;
- `fields.py`: each kind's fields and the conflicts between sources; `edges.py`: typed edges;
- `outcomes.py`: what was built and screened; `profile.py`: the estimate before anything is spent.
"""
