"""Webhook signatures: HMAC-SHA256 over "<timestamp>.<body>" with the owner's secret.

The header reads `t=<unix seconds>,v1=<hex digest>`. A receiver recomputes the digest,
compares in constant time, and rejects timestamps too far from its clock (replays).
"""

from __future__ import annotations

import hashlib
import hmac

SIGNATURE_HEADER = "X-Pgsched-Signature"
TOLERANCE_SECONDS = 300


def sign(secret: str, body: bytes, timestamp: int) -> str:
    digest = hmac.new(secret.encode(), f"{timestamp}.".encode() + body, hashlib.sha256)
    return f"t={timestamp},v1={digest.hexdigest()}"


def verify(secret: str, body: bytes, header: str, *, now: int) -> bool:
    try:
        parts = dict(part.split("=", 1) for part in header.split(","))
        timestamp = int(parts["t"])
    except (KeyError, ValueError):
        return False
    if abs(now - timestamp) > TOLERANCE_SECONDS:
        return False
    return hmac.compare_digest(sign(secret, body, timestamp), header)
