"""The one client of the API the CLI talks through: ``/api/v1`` paths, problem details
as sentences, and requests and answers as the very models the schema is made from
(:mod:`ilucid.service.request_models`, :mod:`ilucid.service.api_models`), so a change
to one shows in the others at once."""

from __future__ import annotations

from collections.abc import Iterator
from typing import Any

import httpx

from ilucid.service.api_models import CancelAnswer, ExplainAnswer, JobView, SubmitAnswer
from ilucid.service.request_models import SubmitBody

__all__ = ["API_PREFIX", "ServiceClient", "call_service"]

#: Where the versioned API lives (``ilucid.service.routes_jobs.API_PREFIX``)
API_PREFIX = "/api/v1"
#: Jobs asked for a page when the client walks the whole list
PAGE = 500


def _problem(response: httpx.Response) -> str:
    """The one sentence a problem's ``detail`` holds (a 422: each field at fault)."""
    try:
        detail = response.json().get("detail", response.text)
    except (ValueError, AttributeError):
        detail = response.text
    if isinstance(detail, list):  # a service before the 422 sentence: make it here
        from ilucid.service.edge import validation_sentence

        detail = validation_sentence(detail)
    return str(detail)


def call_service(client: httpx.Client, method: str, path: str, **kw: Any) -> Any:
    """One API call: its JSON (or text); unreachable services and 4xx/5xx answers raise
    ValueError with the service's own detail (for a 422, the one sentence naming each
    field at fault that the API answers, e.g. ``422: gpus: must be >= 0 (got -1)``).
    ``path`` is under ``/api/v1`` unless it starts with it or is /metrics, /healthz."""
    if not path.startswith((API_PREFIX, "/metrics", "/healthz", "/views/")):
        path = API_PREFIX + path
    try:
        response = client.request(method, path, **kw)
    except httpx.HTTPError as exc:
        raise ValueError(f"cannot reach the service at {client.base_url}: {exc}") from None
    if response.status_code >= 400:
        raise ValueError(f"{response.status_code}: {_problem(response)}")
    if response.headers.get("content-type", "").startswith("application/json"):
        return response.json()
    return response.text


class ServiceClient:
    """The job operations, typed: each request is validated as the server validates
    it before it is sent, and each answer is read into its model."""

    def __init__(self, http: httpx.Client) -> None:
        self.http = http

    def submit(self, body: SubmitBody) -> SubmitAnswer:
        sent = body.model_dump(by_alias=True, exclude_unset=True)
        return SubmitAnswer.model_validate(call_service(self.http, "POST", "/jobs", json=sent))

    def jobs(self, state: str | None = None) -> Iterator[JobView]:
        """Every job the token may see, oldest first, a page at a time."""
        params: dict[str, Any] = {"limit": PAGE}
        if state:
            params["state"] = state
        while True:
            page = call_service(self.http, "GET", "/jobs", params=params)
            for job in page["jobs"]:
                yield JobView.model_validate(job)
            if page["next_cursor"] is None:
                return
            params["cursor"] = page["next_cursor"]

    def explain(self, job_id: str) -> ExplainAnswer:
        return ExplainAnswer.model_validate(
            call_service(self.http, "GET", f"/jobs/{_segment(job_id)}/explain")
        )

    def cancel(self, job_id: str) -> CancelAnswer:
        return CancelAnswer.model_validate(
            call_service(self.http, "POST", f"/jobs/{_segment(job_id)}/cancel")
        )


def _segment(job_id: str) -> str:
    """A job id as one path segment (an id with ``/`` must not reach another route)."""
    from urllib.parse import quote

    return quote(job_id, safe="")
