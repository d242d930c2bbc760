"""Alembic environment: migrations run at start-up on the connection servicekit hands us."""

from registry_service.models import metadata
from servicekit.db import run_migrations_in_env

run_migrations_in_env(metadata)
