"""The server process, between its faces (`cli`, `api`: HTTP routes and MCP tools) and its engines
(`agent`, `compile`): the `Server` root and its one builder (`build.open_server`), the turn executor,
the task service and the jobs it runs (curate, ...), the job queue and its listener, the worker, and
what operating a deployment reads (`metrics`). It knows no web framework: `sleuth worker` loads none."""
