"""Calling the service's API from the command line: one place for errors as sentences."""

from __future__ import annotations

from typing import Any

import httpx

__all__ = ["call_service"]


def call_service(client: httpx.Client, method: str, path: str, **kw: Any) -> Any:
    """One API call: its JSON (or text); unreachable services and 4xx/5xx answers raise
    ValueError with the service's own detail."""
    try:
        response = client.request(method, path, **kw)
    except httpx.HTTPError as exc:
        raise ValueError(f"cannot reach the service at {client.base_url}: {exc}") from None
    if response.status_code >= 400:
        try:
            detail = response.json().get("detail", response.text)
        except ValueError:
            detail = response.text
        raise ValueError(f"{response.status_code}: {detail}")
    if response.headers.get("content-type", "").startswith("application/json"):
        return response.json()
    return response.text
