"""How many rows an UPDATE or DELETE changed: fenced and conditional writes read it."""

from typing import Any, cast

from sqlalchemy import CursorResult, Executable
from sqlalchemy.orm import Session


def rows_changed(session: Session, statement: Executable) -> int:
    """Run ``statement`` (an UPDATE or DELETE) and return the DB-API's rowcount."""
    return cast(CursorResult[Any], session.execute(statement)).rowcount
