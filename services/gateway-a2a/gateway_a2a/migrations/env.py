"""Alembic environment: migrations run only through ``servicekit.db.migrate`` at start-up."""

from gateway_a2a.models import metadata
from servicekit.db import run_migrations_in_env

run_migrations_in_env(metadata)
