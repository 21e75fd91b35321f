"""Models: embedders now; LLM adapters (OpenAI-compatible, Anthropic, scripted) follow."""
