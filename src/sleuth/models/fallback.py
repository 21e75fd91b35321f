"""Fallback across a session's models (spec/runtime.md §12): a request that fails with a timeout, 429 or
5xx is retried twice (1 s, then 2 s, or as long as the provider's `Retry-After` asks, up to
`MAX_RETRY_AFTER_S`; a longer wait moves on), then the next model is tried; any other error moves on at
once. When every model fails, the error names each model and its last error, so the turn's failure
says why. The provider SDKs' own retries stay off: one retry policy, here, that a test can see.
"""

from __future__ import annotations

import time
from collections.abc import Callable, Sequence

from sleuth.models.base import CompletionParams, Message, Model, ModelError, Reply, ToolSpec

#: The longest `Retry-After` honoured; a provider asking for more is skipped for the next model.
MAX_RETRY_AFTER_S = 30.0


class FallbackModel:
    """`Model` over an ordered list of models; `Reply.model` names the one that answered."""

    def __init__(
        self,
        models: Sequence[Model],
        sleep: Callable[[float], None] = time.sleep,
        delays: Sequence[float] = (1.0, 2.0),
    ) -> None:
        if not models:
            raise ValueError("FallbackModel needs at least one model")
        self.models = list(models)
        self.config = self.models[0].config
        self._sleep = sleep
        self._delays = tuple(delays)

    def complete(self, messages: list[Message], tools: list[ToolSpec], params: CompletionParams) -> Reply:
        failures: list[tuple[str, ModelError]] = []
        for model in self.models:
            attempt = 0
            while True:
                try:
                    reply = model.complete(messages, tools, params)
                except ModelError as exc:
                    wait = self._delays[attempt] if attempt < len(self._delays) else None
                    if exc.retry_after is not None and wait is not None:
                        wait = exc.retry_after if exc.retry_after <= MAX_RETRY_AFTER_S else None
                    if exc.retryable and wait is not None:
                        self._sleep(wait)
                        attempt += 1
                        continue
                    failures.append((model.config.id, exc))
                    break
                reply.model = model.config.id
                return reply
        summary = "; ".join(f"{model_id}: {exc}" for model_id, exc in failures)
        raise ModelError(f"all models failed: {summary}", retryable=False, status=failures[-1][1].status)
