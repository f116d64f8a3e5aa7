"""Accounts: sign-up, login and refresh, the caller's profile, API keys, and admin."""

from __future__ import annotations

import secrets
from typing import Annotated, Any

from litestar import Controller, Request, delete, get, patch, post
from litestar.di import NamedDependency, Provide
from litestar.params import JSONBody, PathParameter, QueryParameter
from psycopg_pool import AsyncConnectionPool

from app.api.auth import Auth, User, current_user, digest, hash_password
from app.api.schemas import (
    ERRORS,
    AdminUserPatch,
    ApiKeyCreated,
    ApiKeyIn,
    ApiKeyOut,
    Envelope,
    LoginIn,
    LoginOut,
    MeOut,
    RefreshIn,
    TokenOut,
    UserIn,
    UserOut,
    out,
)
from app.api.text import reject_nul
from app.errors import ConflictError, ForbiddenError, NotFoundError, UnauthorizedError
from app.settings import Settings
from app.store import api_keys, refresh_tokens, users
from app.store.db import AsyncConn

# Ids are bigint, but JSON Schema numbers are doubles: 2**53 is the largest bound a
# client can state exactly. Anything beyond is a 400 that names the parameter.
MAX_ID = 2**53
Id = Annotated[int, PathParameter(ge=1, le=MAX_ID)]
AUTH = {"user": Provide(current_user)}
# Controllers behind authentication say so in the OpenAPI document.
BEARER: list[dict[str, list[str]]] = [{"bearer": []}]


class Authenticated(Controller):
    """Base of every controller whose routes need a caller (bearer token or API key)."""

    security = BEARER
    dependencies = AUTH


CurrentUser = NamedDependency[User]


def pool_of(request: Request[Any, Any, Any]) -> AsyncConnectionPool[AsyncConn]:
    pool: AsyncConnectionPool[AsyncConn] = request.app.state.pool
    return pool


async def _tokens(request: Request[Any, Any, Any], conn: AsyncConn, user_id: int) -> TokenOut:
    auth: Auth = request.app.state.auth
    settings: Settings = request.app.state.settings
    token, expire = auth.issue_access(user_id)
    refresh, refresh_hash = auth.new_refresh_token()
    await refresh_tokens.insert(
        conn, user_id=user_id, token_hash=refresh_hash, ttl=settings.refresh_token_ttl
    )
    return TokenOut(expire=expire, token=token, refresh_token=refresh)


class UsersController(Controller):
    path = "/api/v1/users"
    tags = ["accounts"]

    @post("/", responses=ERRORS, status_code=201, summary="Sign up")
    async def create(
        self, request: Request[Any, Any, Any], data: JSONBody[UserIn]
    ) -> Envelope[UserOut]:
        settings: Settings = request.app.state.settings
        if not settings.signup_enabled:
            raise ForbiddenError("sign-up is disabled on this server")
        reject_nul(username=data.username, password=data.password)
        async with pool_of(request).connection() as conn:
            row = await users.insert(
                conn,
                username=data.username,
                password_hash=hash_password(data.password),
                job_weight=data.job_weight,
                webhook_secret=secrets.token_urlsafe(32),
            )
        if row is None:
            raise ConflictError(f"username {data.username!r} is taken", field="username")
        return Envelope(out(UserOut, row))


class AuthController(Controller):
    path = "/api/v1/auth"
    tags = ["accounts"]

    @post(
        "/login",
        responses=ERRORS,
        status_code=200,
        summary="Log in: an access token and a refresh token",
    )
    async def login(
        self, request: Request[Any, Any, Any], data: JSONBody[LoginIn]
    ) -> Envelope[LoginOut]:
        auth: Auth = request.app.state.auth
        async with pool_of(request).connection() as conn:
            row = await auth.login(conn, data.username, data.password)
            tokens = await _tokens(request, conn, row["id"])
        return Envelope(
            LoginOut(
                expire=tokens.expire,
                token=tokens.token,
                refresh_token=tokens.refresh_token,
                user=out(UserOut, row),
            )
        )

    @post("/refresh", responses=ERRORS, status_code=200, summary="A new access token")
    async def refresh(
        self, request: Request[Any, Any, Any], data: JSONBody[RefreshIn | None] = None
    ) -> Envelope[TokenOut]:
        """With a refresh token in the body (rotated: each works once), or, as the seed
        API does, with a still-valid access token as the bearer."""
        async with pool_of(request).connection() as conn:
            if data is not None and data.refresh_token:
                user_id = await refresh_tokens.consume(conn, digest(data.refresh_token))
                if user_id is None:
                    raise UnauthorizedError("invalid or expired refresh token")
            else:
                user_id = (await current_user(request)).id
            if await users.get(conn, user_id) is None:
                raise UnauthorizedError("the account no longer exists")
            return Envelope(await _tokens(request, conn, user_id))


class MeController(Authenticated):
    path = "/api/v1/me"
    tags = ["accounts"]

    @get("/", responses=ERRORS, summary="The caller's account (with its webhook signing secret)")
    async def me(self, user: CurrentUser) -> Envelope[MeOut]:
        return Envelope(
            MeOut(
                id=user.id,
                username=user.username,
                job_weight=user.job_weight,
                is_admin=user.is_admin,
                shell_allowed=user.shell_allowed,
                webhook_secret=user.webhook_secret,
            )
        )

    @delete(
        "/", responses=ERRORS, status_code=200, summary="Delete the caller's account and its jobs"
    )
    async def remove(self, request: Request[Any, Any, Any], user: CurrentUser) -> Envelope[UserOut]:
        async with pool_of(request).connection() as conn:
            await users.delete(conn, user.id)
        return Envelope(UserOut(id=user.id, username=user.username, job_weight=user.job_weight))

    @get("/api-keys", responses=ERRORS, summary="The caller's API keys (never the keys themselves)")
    async def list_keys(
        self, request: Request[Any, Any, Any], user: CurrentUser
    ) -> Envelope[list[ApiKeyOut]]:
        async with pool_of(request).connection() as conn:
            rows = await api_keys.list_(conn, user.id)
        return Envelope([out(ApiKeyOut, r) for r in rows])

    @post("/api-keys", responses=ERRORS, status_code=201, summary="A new API key, shown this once")
    async def create_key(
        self, request: Request[Any, Any, Any], user: CurrentUser, data: JSONBody[ApiKeyIn]
    ) -> Envelope[ApiKeyCreated]:
        reject_nul(name=data.name)
        key, prefix, key_hash = Auth.new_api_key()
        async with pool_of(request).connection() as conn:
            row = await api_keys.insert(
                conn, user_id=user.id, name=data.name, prefix=prefix, key_hash=key_hash
            )
        return Envelope(ApiKeyCreated(**{**_key_fields(row), "key": key}))

    @delete(
        "/api-keys/{key_id:int}", responses=ERRORS, status_code=200, summary="Revoke an API key"
    )
    async def delete_key(
        self, request: Request[Any, Any, Any], user: CurrentUser, key_id: Id
    ) -> Envelope[int]:
        async with pool_of(request).connection() as conn:
            if not await api_keys.delete(conn, key_id, user_id=user.id):
                raise NotFoundError(f"API key {key_id} not found")
        return Envelope(key_id)


def _key_fields(row: dict[str, Any]) -> dict[str, Any]:
    return {k: row[k] for k in ("id", "name", "prefix", "created_at")}


class AdminController(Authenticated):
    path = "/api/v1/admin/users"
    tags = ["admin"]

    @get("/", responses=ERRORS, summary="Every user (admins only)")
    async def list_users(
        self,
        request: Request[Any, Any, Any],
        user: CurrentUser,
        limit: Annotated[int, QueryParameter(ge=1, le=1000)] = 100,
    ) -> Envelope[list[UserOut]]:
        _require_admin(user)
        async with pool_of(request).connection() as conn:
            rows = await users.list_(conn, limit=limit)
        return Envelope([out(UserOut, r) for r in rows])

    @patch(
        "/{user_id:int}", responses=ERRORS, summary="Set a user's weight or rights (admins only)"
    )
    async def update_user(
        self,
        request: Request[Any, Any, Any],
        user: CurrentUser,
        user_id: Id,
        data: JSONBody[AdminUserPatch],
    ) -> Envelope[UserOut]:
        _require_admin(user)
        async with pool_of(request).connection() as conn:
            row = await users.update(
                conn,
                user_id,
                job_weight=data.job_weight,
                is_admin=data.is_admin,
                shell_allowed=data.shell_allowed,
            )
        if row is None:
            raise NotFoundError(f"user {user_id} not found")
        return Envelope(out(UserOut, row))


def _require_admin(user: CurrentUser) -> None:
    if not user.is_admin:
        raise ForbiddenError("admins only")
