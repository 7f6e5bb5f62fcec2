"""Bearer tokens per user and tenant, stored only as SHA-256 hashes."""

from __future__ import annotations

import hashlib
import secrets
import time
from dataclasses import dataclass

from sqlalchemy import Engine, select
from sqlalchemy.orm import Session

from ilucid.service.db import TokenRow

__all__ = ["Identity", "authenticate", "create_token"]


@dataclass(frozen=True, slots=True)
class Identity:
    user: str
    tenant: str
    admin: bool


def _hash(token: str) -> str:
    return hashlib.sha256(token.encode("utf-8")).hexdigest()


def create_token(engine: Engine, user: str, tenant: str, admin: bool = False) -> str:
    """A new token for ``user``; only its hash is stored, so it is shown once."""
    if not user or not tenant:
        raise ValueError("a token needs a user and a tenant")
    token = secrets.token_urlsafe(32)
    with Session(engine) as session:
        session.add(
            TokenRow(
                token_hash=_hash(token), user=user, tenant=tenant, admin=admin, created=time.time()
            )
        )
        session.commit()
    return token


_known: dict[tuple[int, str], tuple[float, Identity]] = {}
#: how long a verified token is trusted without asking the database again
CACHE_S = 30.0


def authenticate(engine: Engine, token: str) -> Identity | None:
    digest = _hash(token)
    key = (id(engine), digest)
    cached = _known.get(key)
    now = time.monotonic()
    if cached is not None and now - cached[0] < CACHE_S:
        return cached[1]
    with Session(engine) as session:
        row = session.scalars(select(TokenRow).where(TokenRow.token_hash == digest)).first()
        if row is None:
            _known.pop(key, None)
            return None
        who = Identity(row.user, row.tenant, row.admin)
    _known[key] = (now, who)
    return who
