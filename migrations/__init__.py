"""Alembic migrations: every table, index and extension of jin is created here."""
