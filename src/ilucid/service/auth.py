"""Bearer tokens per user and tenant, stored only as SHA-256 hashes.

A known token's owner is remembered for :data:`REMEMBER_S` (per SQLite database),
so a burst of requests costs one database look-up per token, not one per request.
A revoke, by this process or another (``ilucid token revoke``), stamps a marker
file beside the database (``tokens.revoked``) after its commit; what was remembered
before the stamp is never used again, so a revoked token is refused at once. An
unknown token is never remembered: a new token works at once. Other databases
(PostgreSQL, shared by replicas) are asked on every request.
"""

from __future__ import annotations

import contextlib
import hashlib
import os
import secrets
import threading
import time
import weakref
from dataclasses import dataclass
from pathlib import Path

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

#: how long a token's owner is remembered, seconds (a revoke forgets it at once)
REMEMBER_S = 1.0
_MARKER = "tokens.revoked"


@dataclass(frozen=True, slots=True)
class Identity:
    user: str
    tenant: str
    admin: bool
    unix_user: str | None = None  # whom this token's jobs run as (None: the default)


def _hash(token: str) -> str:
    return hashlib.sha256(token.encode("utf-8")).hexdigest()


def _marker(engine: Engine) -> Path | None:
    """The revocation marker beside a SQLite database file; None for other databases."""
    database = engine.url.database
    if engine.dialect.name != "sqlite" or not database or database == ":memory:":
        return None
    return Path(database).with_name(_MARKER)


def _revocations(marker: Path) -> int:
    """The marker's stamp: changes with every revoke, by any process."""
    try:
        return os.stat(marker).st_mtime_ns
    except FileNotFoundError:
        return 0


# per database: token hash -> (when looked up, the revocation stamp then, its owner)
_known: weakref.WeakKeyDictionary[Engine, dict[str, tuple[float, int, Identity]]]
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
    marker = _marker(engine)
    if marker is not None:  # every process remembering tokens of this database forgets
        before, now = _revocations(marker), time.time_ns()
        with contextlib.suppress(OSError):  # unwritable: forgotten after REMEMBER_S
            marker.touch()
            os.utime(marker, ns=(now, max(now, before + 1)))  # a new stamp, always
    with _known_lock:
        _known.pop(engine, None)
    return len(rows)


def remembered(engine: Engine, token: str) -> Identity | None:
    """The token's owner if looked up within :data:`REMEMBER_S` (no database work: fit
    for the event loop); None when it must be looked up (:func:`authenticate`)."""
    marker = _marker(engine)
    if marker is None:
        return None
    digest = _hash(token)
    with _known_lock:
        seen = _known.get(engine, {}).get(digest)
    if seen is None or time.monotonic() - seen[0] >= REMEMBER_S:
        return None
    return seen[2] if seen[1] == _revocations(marker) else None


def authenticate(engine: Engine, token: str) -> Identity | None:
    """The token's owner (remembered for :data:`REMEMBER_S`), or None for an unknown one."""
    known = remembered(engine, token)
    if known is not None:
        return known
    digest = _hash(token)
    now = time.monotonic()
    marker = _marker(engine)
    stamp = _revocations(marker) if marker is not None else 0  # read before the look-up
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
            tokens[digest] = (now, stamp, who)
    return who
