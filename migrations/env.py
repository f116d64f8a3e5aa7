"""alembic environment: one schema, and partitions (made at run time) are not drift."""

from __future__ import annotations

import os
import re
from typing import Any

import sqlalchemy as sa
from alembic import context

from app.store.db import sqlalchemy_url
from app.store.schema import SCHEMA, metadata

_PARTITION = re.compile(r"^(runs|run_logs)_p\d{8}_\d{4}$")

config = context.config


def include_name(name: str | None, type_: str, parent_names: Any) -> bool:
    if type_ == "schema":
        return name == SCHEMA
    if type_ == "table" and name is not None:
        return not _PARTITION.match(name)
    return True


def _url() -> str:
    url = config.get_main_option("sqlalchemy.url") or os.environ.get("PGSCHED_DATABASE_URL")
    if not url:
        raise SystemExit("PGSCHED_DATABASE_URL is not set")
    return sqlalchemy_url(url)


def run_migrations_online() -> None:
    engine = sa.create_engine(_url(), poolclass=sa.pool.NullPool)
    with engine.connect() as connection:
        # Replicas may all run `migrate` at start; one at a time, the rest find it done.
        connection.execute(sa.text("SELECT pg_advisory_lock(hashtext('pgsched.migrate'))"))
        connection.execute(sa.text(f"CREATE SCHEMA IF NOT EXISTS {SCHEMA}"))
        context.configure(
            connection=connection,
            target_metadata=metadata,
            version_table_schema=SCHEMA,
            include_schemas=True,
            include_name=include_name,
            compare_type=True,
        )
        with context.begin_transaction():
            context.run_migrations()
        connection.commit()


run_migrations_online()
