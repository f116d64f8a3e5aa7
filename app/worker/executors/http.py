"""HTTP executor: a request to a URL; 2xx succeeds, 429/5xx/network errors retry."""

from __future__ import annotations

from typing import Any

import httpx

from app.domain.models import Claim, LogStream
from app.worker.executors.base import FatalError, RetryableError, TaskContext

BODY_LOG_BYTES = 2048


class HttpExecutor:
    def __init__(self, client: httpx.AsyncClient) -> None:
        self._client = client

    async def execute(self, claim: Claim, ctx: TaskContext) -> None:
        p = claim.payload
        method = str(p.get("method", "POST")).upper()
        body: Any = p.get("body")
        headers = {
            **p.get("headers", {}),
            "X-Pgsched-Run-Id": str(claim.id),
            "X-Pgsched-Attempt": str(claim.attempt),
            "X-Pgsched-Job-Id": str(claim.job_id),
        }
        kwargs: dict[str, Any] = (
            {"json": body}
            if isinstance(body, dict | list)
            else {"content": body.encode() if isinstance(body, str) else None}
        )
        try:
            response = await self._client.request(
                method,
                p["url"],
                headers=headers,
                timeout=claim.timeout.total_seconds(),
                **kwargs,
            )
        except httpx.HTTPError as exc:
            raise RetryableError(f"{type(exc).__name__}: {exc}") from None
        ctx.log.write(LogStream.SYSTEM, f"HTTP {response.status_code} from {method} {p['url']}")
        if response.content:
            ctx.log.write(LogStream.STDOUT, response.text[:BODY_LOG_BYTES])
        if response.is_success:
            return
        error = f"HTTP {response.status_code}"
        if response.status_code == 429 or response.status_code >= 500:
            raise RetryableError(error)
        raise FatalError(error)
