"""Bearer tokens per user and tenant, stored only as SHA-256 hashes.

A known token's owner is remembered for :data:`REMEMBER_S` (per database), so a
burst of requests costs one database look-up per token, not one per request. A
token revoked by this process is forgotten at once; one revoked by another
(``ilucid token revoke``, another replica) is refused within :data:`REMEMBER_S`.
An unknown token is never remembered: a new token works at once.
"""

from __future__ import annotations

import hashlib
import secrets
import threading
import time
import weakref
from dataclasses import dataclass

from sqlalchemy import Engine, select
from sqlalchemy.orm import Session

from ilucid.backends.accounts import unix_account
from ilucid.service.db import TokenRow

__all__ = [
    "REMEMBER_S",
    "Identity",
    "authenticate",
    "create_token",
    "remembered",
    "revoke_tokens",
]

#: how long a token's owner is remembered, seconds: the longest a token revoked by
#: another process is still honoured
REMEMBER_S = 1.0


@dataclass(frozen=True, slots=True)
class Identity:
    user: str
    tenant: str
    admin: bool
    unix_user: str | None = None  # whom this token's jobs run as (None: the default)


def _hash(token: str) -> str:
    return hashlib.sha256(token.encode("utf-8")).hexdigest()


# per database: token hash -> (when looked up, its owner)
_known: weakref.WeakKeyDictionary[Engine, dict[str, tuple[float, Identity]]]
_known = weakref.WeakKeyDictionary()
_known_lock = threading.Lock()


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
    with _known_lock:
        _known.pop(engine, None)  # refused at once by this process
    return len(rows)


def remembered(engine: Engine, token: str) -> Identity | None:
    """The token's owner if looked up within :data:`REMEMBER_S` (no database work: fit
    for the event loop); None when it must be looked up (:func:`authenticate`)."""
    digest = _hash(token)
    with _known_lock:
        seen = _known.get(engine, {}).get(digest)
    if seen is not None and time.monotonic() - seen[0] < REMEMBER_S:
        return seen[1]
    return None


def authenticate(engine: Engine, token: str) -> Identity | None:
    """The token's owner (remembered for :data:`REMEMBER_S`), or None for an unknown one."""
    known = remembered(engine, token)
    if known is not None:
        return known
    digest = _hash(token)
    now = time.monotonic()
    with Session(engine) as session:
        row = session.scalars(select(TokenRow).where(TokenRow.token_hash == digest)).first()
        who = None if row is None else Identity(row.user, row.tenant, row.admin, row.unix_user)
    with _known_lock:
        tokens = _known.setdefault(engine, {})
        if who is None:
            tokens.pop(digest, None)
        else:
            if len(tokens) > 10_000:  # many tokens: start afresh rather than grow
                tokens.clear()
            tokens[digest] = (now, who)
    return who
