# One REPL step, as a model would write it: run it with `sleuth exec --context acme examples/demo-step.py`.
absent = query_db(
    "SELECT meeting, date, attendee FROM meeting_attendance WHERE present = 'no' ORDER BY date"
)
print(absent)

policy, codes = await asyncio.gather(
    search_source("How many days a week can employees work remotely?", top_k=2),
    search_source_by_keyword("ERR-4012", top_k=2),
)
for hit in policy + codes:
    print(hit)
