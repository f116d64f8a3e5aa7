"""Authentication: argon2 password hashes, short-lived HS256 access tokens, rotated
opaque refresh tokens, and API keys for services (stored as SHA-256 digests: they are
random and long, so a fast hash is enough and lookups stay indexed)."""

from __future__ import annotations

import hashlib
import secrets
from dataclasses import dataclass
from datetime import UTC, datetime
from typing import Any

import jwt
from argon2 import PasswordHasher
from argon2.exceptions import InvalidHashError, VerificationError
from litestar import Request
from psycopg_pool import AsyncConnectionPool

from app.errors import UnauthorizedError
from app.settings import Settings
from app.store import api_keys, users
from app.store import secrets as secret_store
from app.store.db import AsyncConn

ALGORITHM = "HS256"
API_KEY_PREFIX = "pgs_"
SIGNING_KEY_NAME = "access_token_signing_key"


@dataclass(frozen=True)
class User:
    id: int
    username: str
    job_weight: float
    is_admin: bool
    shell_allowed: bool
    webhook_secret: str | None = None


PASSWORDS = PasswordHasher()


def hash_password(password: str) -> str:
    """An argon2id hash (the CLI's `users create` and sign-up both use it)."""
    return PASSWORDS.hash(password)


def digest(token: str) -> str:
    return hashlib.sha256(token.encode()).hexdigest()


class Auth:
    def __init__(self, settings: Settings, signing_key: str) -> None:
        self._settings = settings
        self._key = signing_key
        self._hasher = PASSWORDS
        # Checked against when the user does not exist, so a login takes as long
        # either way and does not reveal which names are taken.
        self._dummy_hash = self._hasher.hash(secrets.token_urlsafe(16))

    @classmethod
    async def load(cls, settings: Settings, conn: AsyncConn) -> Auth:
        key = settings.secret_key or await secret_store.get_or_create(
            conn, SIGNING_KEY_NAME, secrets.token_urlsafe(48)
        )
        return cls(settings, key)

    def check_password(self, password_hash: str | None, password: str) -> bool:
        try:
            return self._hasher.verify(password_hash or self._dummy_hash, password) and bool(
                password_hash
            )
        except (VerificationError, InvalidHashError):
            return False

    async def login(self, conn: AsyncConn, username: str, password: str) -> dict[str, Any]:
        """The user row these credentials belong to; a 401 otherwise."""
        row = await users.get_for_login(conn, username)
        # check_password runs against a dummy hash when the user does not exist.
        if not self.check_password(row["password_hash"] if row else None, password) or not row:
            raise UnauthorizedError("wrong username or password")
        return row

    def issue_access(self, user_id: int) -> tuple[str, datetime]:
        now = datetime.now(UTC)
        expire = now + self._settings.access_token_ttl
        claims = {"sub": str(user_id), "iat": now, "exp": expire, "typ": "access"}
        return jwt.encode(claims, self._key, algorithm=ALGORITHM), expire

    def user_id_of(self, token: str) -> int:
        """The user of a valid access token; any flaw (alg none, wrong key, expired,
        malformed) is a 401."""
        try:
            claims: dict[str, Any] = jwt.decode(
                token,
                self._key,
                algorithms=[ALGORITHM],
                options={"require": ["exp", "sub", "iat"]},
            )
            if claims.get("typ") != "access":
                raise UnauthorizedError("not an access token")
            return int(claims["sub"])
        except (jwt.PyJWTError, ValueError):
            raise UnauthorizedError("invalid or expired token") from None

    @staticmethod
    def new_refresh_token() -> tuple[str, str]:
        token = secrets.token_urlsafe(32)
        return token, digest(token)

    @staticmethod
    def new_api_key() -> tuple[str, str, str]:
        key = API_KEY_PREFIX + secrets.token_urlsafe(32)
        return key, key[:10], digest(key)


def _credentials(request: Request[Any, Any, Any]) -> str:
    api_key = request.headers.get("x-api-key")
    if api_key:
        return api_key
    header = request.headers.get("authorization", "")
    scheme, _, token = header.partition(" ")
    if scheme.lower() != "bearer" or not token.strip():
        raise UnauthorizedError("missing bearer token or API key")
    return token.strip()


async def current_user(request: Request[Any, Any, Any]) -> User:
    """Litestar dependency: the caller, from a bearer token or an API key."""
    return await user_of(request, _credentials(request))


async def user_of(request: Request[Any, Any, Any], token: str) -> User:
    """The user an access token or API key stands for; a 401 if none."""
    auth: Auth = request.app.state.auth
    pool: AsyncConnectionPool[AsyncConn] = request.app.state.pool
    async with pool.connection() as conn:
        if token.startswith(API_KEY_PREFIX):
            user_id = await api_keys.authenticate(conn, digest(token))
            if user_id is None:
                raise UnauthorizedError("unknown API key")
        else:
            user_id = auth.user_id_of(token)
        row = await users.get(conn, user_id)
    if row is None:
        raise UnauthorizedError("the account no longer exists")
    return User(
        id=row["id"],
        username=row["username"],
        job_weight=row["job_weight"],
        is_admin=row["is_admin"],
        shell_allowed=row["shell_allowed"],
        webhook_secret=row["webhook_secret"],
    )
