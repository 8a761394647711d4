"""The state of record: SQLAlchemy 2 tables, engine setup and Alembic migrations."""
