"""pgsched: a distributed job scheduler whose only infrastructure is PostgreSQL."""

__version__ = "0.1.0"
