"""Fixtures shared by the service tests: a real PostgreSQL server from Debian's packages
(``tools/throwaway_postgres.py``, which ``bench/service_scale.py`` uses too)."""

from __future__ import annotations

from collections.abc import Iterator

import pytest
from throwaway_postgres import PostgresUnavailable, throwaway_postgres


@pytest.fixture(scope="session")
def postgres_url() -> Iterator[str]:
    try:
        server = throwaway_postgres()
        url = server.__enter__()
    except PostgresUnavailable as exc:
        pytest.skip(str(exc))
    try:
        yield url
    finally:
        server.__exit__(None, None, None)
