"""Bearer tokens per user and tenant, stored only as SHA-256 hashes.

Every request looks its token up in the database (one indexed query), so a
revoked token stops working at once; a cache would keep honouring it.
"""

from __future__ import annotations

import hashlib
import secrets
import time
from dataclasses import dataclass

from sqlalchemy import Engine, select
from sqlalchemy.orm import Session

from ilucid.backends.accounts import unix_account
from ilucid.service.db import TokenRow

__all__ = ["Identity", "authenticate", "create_token", "revoke_tokens"]


@dataclass(frozen=True, slots=True)
class Identity:
    user: str
    tenant: str
    admin: bool
    unix_user: str | None = None  # whom this token's jobs run as (None: the default)


def _hash(token: str) -> str:
    return hashlib.sha256(token.encode("utf-8")).hexdigest()


def create_token(
    engine: Engine, user: str, tenant: str, admin: bool = False, unix_user: str | None = None
) -> str:
    """A new token for ``user``; only its hash is stored, so it is shown once."""
    if not user or not tenant:
        raise ValueError("a token needs a user and a tenant")
    if unix_user is not None:
        unix_account(unix_user)
    token = secrets.token_urlsafe(32)
    with Session(engine) as session:
        session.add(
            TokenRow(
                token_hash=_hash(token),
                user=user,
                tenant=tenant,
                admin=admin,
                created=time.time(),
                unix_user=unix_user,
            )
        )
        session.commit()
    return token


def revoke_tokens(engine: Engine, user: str, tenant: str | None = None) -> int:
    """Delete every token of ``user`` (in ``tenant``, when given); how many went."""
    query = select(TokenRow).where(TokenRow.user == user)
    if tenant is not None:
        query = query.where(TokenRow.tenant == tenant)
    with Session(engine) as session:
        rows = session.scalars(query).all()
        for row in rows:
            session.delete(row)
        session.commit()
    return len(rows)


def authenticate(engine: Engine, token: str) -> Identity | None:
    digest = _hash(token)
    with Session(engine) as session:
        row = session.scalars(select(TokenRow).where(TokenRow.token_hash == digest)).first()
        if row is None:
            return None
        return Identity(row.user, row.tenant, row.admin, row.unix_user)
