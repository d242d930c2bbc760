"""Alembic environment: migrations run only through ``servicekit.db.migrate`` at start-up."""

from servicekit.db import run_migrations_in_env
from tracker_service.models import metadata

run_migrations_in_env(metadata)
