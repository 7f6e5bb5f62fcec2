"""Calling the service's API from the command line: one place for errors as sentences."""

from __future__ import annotations

from typing import Any

import httpx

__all__ = ["call_service"]


def call_service(client: httpx.Client, method: str, path: str, **kw: Any) -> Any:
    """One API call: its JSON (or text); unreachable services and 4xx/5xx answers raise
    ValueError with the service's own detail (for a 422, the one sentence naming each
    field at fault that the API answers, e.g. ``422: gpus: must be >= 0 (got -1)``)."""
    try:
        response = client.request(method, path, **kw)
    except httpx.HTTPError as exc:
        raise ValueError(f"cannot reach the service at {client.base_url}: {exc}") from None
    if response.status_code >= 400:
        try:
            detail = response.json().get("detail", response.text)
        except (ValueError, AttributeError):
            detail = response.text
        if isinstance(detail, list):  # a service before the 422 sentence: make it here
            from ilucid.service.edge import validation_sentence

            detail = validation_sentence(detail)
        raise ValueError(f"{response.status_code}: {detail}")
    if response.headers.get("content-type", "").startswith("application/json"):
        return response.json()
    return response.text
