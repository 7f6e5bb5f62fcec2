"""The API's edge: the bounds of query parameters, the 422's one sentence, and the
headers and size limit every response and request go through (what a body may hold
is :mod:`ilucid.service.request_models`).

Bodies over :data:`MAX_BODY_BYTES` get 413 whether or not they say their length.
"""

import difflib
import json
import math
import re
from collections.abc import Iterable, Mapping, Sequence
from typing import Any

from fastapi import HTTPException, Query
from fastapi.responses import JSONResponse
from starlette.datastructures import MutableHeaders
from starlette.types import ASGIApp, Message, Receive, Scope, Send

from ilucid.service.problems import problem_response
from ilucid.service.request_models import PATTERN_WORDS

__all__ = [
    "MAX_BODY_BYTES",
    "QUERY_INT_MAX",
    "QUERY_NUMBER_MAX",
    "QUERY_TEXT_MAX",
    "STRICT_CSP",
    "BodyLimit",
    "SecurityHeaders",
    "json_safe",
    "query_int",
    "query_number",
    "query_text",
    "validation_answer",
    "validation_sentence",
]

#: Largest request body accepted, bytes; larger ones get 413 (see :class:`BodyLimit`)
MAX_BODY_BYTES = 1 << 20

#: The bounds of every query parameter, shared by every route (a 422 names the bound):
#: a whole number is at most a billion (a page number times a page size then stays far
#: inside a 64-bit SQL INTEGER), a number at most a year's seconds, text 128 characters
QUERY_INT_MAX = 1_000_000_000
QUERY_NUMBER_MAX = 365 * 86400.0
QUERY_TEXT_MAX = 128


def query_int(*, ge: int, le: int = QUERY_INT_MAX, description: str | None = None) -> Any:
    """A whole-number query parameter in ``[ge, le]``, ``le`` at most :data:`QUERY_INT_MAX`."""
    if not -QUERY_INT_MAX <= ge <= le <= QUERY_INT_MAX:
        raise ValueError(f"query bounds [{ge}, {le}] outside +-{QUERY_INT_MAX:,}")
    return Query(ge=ge, le=le, description=description)


def query_number(
    *,
    ge: float | None = None,
    gt: float | None = None,
    le: float = QUERY_NUMBER_MAX,
    description: str | None = None,
) -> Any:
    """A finite number query parameter above ``ge`` or ``gt``, at most ``le``
    (itself at most :data:`QUERY_NUMBER_MAX`)."""
    low = ge if ge is not None else gt
    if low is None or not -QUERY_NUMBER_MAX <= low <= le <= QUERY_NUMBER_MAX:
        raise ValueError(f"query bounds [{low}, {le}] outside +-{QUERY_NUMBER_MAX:g}")
    return Query(ge=ge, gt=gt, le=le, allow_inf_nan=False, description=description)


def query_text(
    *, max_length: int = QUERY_TEXT_MAX, pattern: str | None = None, description: str | None = None
) -> Any:
    """A text query parameter of at most ``max_length`` (<= :data:`QUERY_TEXT_MAX`) characters."""
    if not 0 < max_length <= QUERY_TEXT_MAX:
        raise ValueError(f"query text of {max_length} characters: at most {QUERY_TEXT_MAX}")
    return Query(max_length=max_length, pattern=pattern, description=description)


#: nesting shown of a refused value; deeper parts read "..." (a body nested thousands
#: deep must not exhaust the stack while it is being refused)
MAX_SHOWN_DEPTH = 8


def json_safe(value: Any, depth: int = 0) -> Any:
    """A validation error's details with every value JSON can carry (NaN, inf and
    surrogates are shown as text, nesting past :data:`MAX_SHOWN_DEPTH` as "..."), so
    refusing bad input never fails itself."""
    if isinstance(value, (dict, list, tuple)) and depth >= MAX_SHOWN_DEPTH:
        return "..."
    if isinstance(value, dict):
        return {str(k): json_safe(v, depth + 1) for k, v in value.items()}
    if isinstance(value, (list, tuple)):
        return [json_safe(v, depth + 1) for v in value]
    if isinstance(value, float) and not math.isfinite(value):
        return repr(value)
    if isinstance(value, str):
        return value.encode("utf-8", "backslashreplace").decode("utf-8")
    if value is None or isinstance(value, (bool, int, float)):
        return value
    return repr(value)[:200]


#: what a field must be, by pydantic's error type (its ``ctx`` fills the braces)
_MUST = {
    "missing": "is required",
    "greater_than": "must be > {gt}",
    "greater_than_equal": "must be >= {ge}",
    "less_than": "must be < {lt}",
    "less_than_equal": "must be <= {le}",
    "finite_number": "must be a finite number",
    "int_type": "must be a whole number",
    "int_parsing": "must be a whole number",
    "int_from_float": "must be a whole number",
    "float_type": "must be a number",
    "float_parsing": "must be a number",
    "bool_type": "must be true or false",
    "bool_parsing": "must be true or false",
    "string_type": "must be text",
    "list_type": "must be a list",
    "dict_type": "must be a JSON object",
    "model_attributes_type": "must be a JSON object",
    "too_short": "must hold at least {min_length} item(s)",
    "too_long": "must hold at most {max_length} item(s)",
    "string_too_short": "must be at least {min_length} character(s)",
    "string_too_long": "must be at most {max_length} characters",
    "literal_error": "must be one of {expected}",
    "json_invalid": "is not valid JSON ({error})",
    "string_unicode": "must be valid UTF-8 text (no lone surrogates)",
}
#: a message that starts with the field it is about
_NAMED = re.compile(r"^[a-z_]+: ")
#: where a value came from, which the field's name need not repeat
_SOURCES = ("body", "query", "path", "header", "cookie")
#: a value shown as "(got ...)" when its JSON is at most this long
_SHOWN_INPUT = 60


def _field(error: Mapping[str, Any]) -> str:
    """``gpus``, ``command[2]`` or ``limits.gpus``: the location without its source."""
    loc = list(error.get("loc", ()))
    if loc and loc[0] in _SOURCES:
        loc = loc[1:]
    if error.get("type") == "json_invalid" or not loc:
        return "body"
    name = ""
    for part in loc:
        name += f"[{part}]" if isinstance(part, int) else f".{part}" if name else str(part)
    return name


def _unknown(field: str, known: Sequence[str]) -> str:
    """``unknown field (did you mean estimate_s?)``: the closest known name, else them all."""
    name = field.rsplit(".", 1)[-1]
    close = difflib.get_close_matches(name, list(known), n=1)
    if close:
        return f"unknown field (did you mean {close[0]}?)"
    if known:
        return f"unknown field (the fields are {', '.join(known)})"
    return "unknown field"


def _must(error: Mapping[str, Any], field: str, known: Sequence[str] = ()) -> str:
    """What was wrong, without the field's name: ``must be >= 0``."""
    kind = str(error.get("type", ""))
    if kind == "extra_forbidden":
        return _unknown(field, known)
    # bounds as people write them: 0, not 0.0
    ctx = {k: f"{v:g}" if isinstance(v, float) else v for k, v in (error.get("ctx") or {}).items()}
    if kind == "string_pattern_mismatch" and ctx.get("pattern") in PATTERN_WORDS:
        return PATTERN_WORDS[ctx["pattern"]]
    template = _MUST.get(kind)
    if template is not None:
        try:
            return template.format(**ctx)
        except (KeyError, IndexError):
            pass
    message = str(error.get("msg", "is not valid")).removeprefix("Value error, ")
    message = message.replace("Input should be", "must be")
    if message.startswith(f"{field} "):  # our validators name their field themselves
        message = message[len(field) + 1 :]
    return message[:1].lower() + message[1:]


def validation_sentence(errors: Sequence[Mapping[str, Any]], known: Sequence[str] = ()) -> str:
    """One sentence naming each field at fault, e.g. ``gpus: must be >= 0 (got -1)``;
    the API's 422 ``detail`` and what the CLI prints. ``known``: the body's field names,
    from which an unknown field's closest match is suggested."""
    parts = []
    for error in errors:
        field = _field(error)
        must = _must(error, field, known)
        # a rule over the whole body names its own field ("nodes: comes with ...")
        part = must if field == "body" and _NAMED.match(must) else f"{field}: {must}"
        kind = error.get("type")
        value = error.get("input")
        # a rule over the whole body: its sentence says what is wrong, the body is long
        shows = field != "body" or not isinstance(value, dict)
        if (
            "input" in error
            and kind not in ("missing", "json_invalid", "extra_forbidden")
            and shows
        ):
            shown = (
                repr(value)  # nan, inf: JSON has no spelling for them
                if isinstance(value, float) and not math.isfinite(value)
                else json.dumps(json_safe(value), ensure_ascii=False)
            )
            said = kind == "value_error" and str(value) in part  # our rule said it
            if len(shown) <= _SHOWN_INPUT and " got " not in part and not said:
                part += f" (got {shown})"
        parts.append(part)
    return "; ".join(parts) or "the request is not valid"


def validation_answer(
    errors: Sequence[Mapping[str, Any]], known: Iterable[str] = ()
) -> JSONResponse:
    """422, a problem whose ``detail`` is :func:`validation_sentence`; its ``errors``
    keep each error's type, location and message (and its input when short) for programs."""
    known = list(known)
    kept = []
    for error in errors:
        entry = {k: v for k, v in error.items() if k in ("type", "loc", "msg")}
        if "input" in error:
            shown = json_safe(error["input"])
            if len(json.dumps(shown, ensure_ascii=False)) <= 200:
                entry["input"] = shown
        kept.append(json_safe(entry))
    return problem_response(422, validation_sentence(errors, known), errors=kept)


#: The policy of every response that sets none of its own (all but the dashboard):
#: nothing may load, run or frame it
STRICT_CSP = "default-src 'none'; base-uri 'none'; form-action 'none'; frame-ancestors 'none'"


#: A refused body's connection is closed, so the server never reads (drains) the rest
_CLOSE = {"Connection": "close"}


class _BodyTooLarge(HTTPException):
    def __init__(self) -> None:
        super().__init__(413, f"request body over {MAX_BODY_BYTES:,} bytes", headers=_CLOSE)


class BodyLimit:
    """Refuses a request body over ``limit`` bytes with 413, whether it says its size
    or not: a Content-Length over the limit is refused before any byte is read, and a
    chunked body (no Content-Length) as soon as the bytes read pass the limit, so at
    most the limit and one more chunk are ever read; the answer closes the connection
    (the server would otherwise read the rest to reuse it). Pure ASGI: it watches the
    body as the route reads it, never buffering it itself."""

    def __init__(self, app: ASGIApp, limit: int = MAX_BODY_BYTES) -> None:
        self.app = app
        self.limit = limit

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        if scope["type"] != "http":
            await self.app(scope, receive, send)
            return
        lengths = [v for k, v in scope["headers"] if k == b"content-length"]
        if any(not v.isdigit() or int(v) > self.limit for v in lengths):
            await self._refuse(scope, receive, send)
            return
        read = 0
        started = False

        async def bounded() -> Message:
            nonlocal read
            message = await receive()
            if message["type"] == "http.request":
                read += len(message.get("body", b""))
                if read > self.limit:
                    raise _BodyTooLarge()  # the route answers 413 (an HTTPException)
            return message

        async def watched(message: Message) -> None:
            nonlocal started
            started = started or message["type"] == "http.response.start"
            await send(message)

        try:
            await self.app(scope, bounded, watched)
        except _BodyTooLarge:  # raised outside a route's handling: answer here
            if started:
                raise
            await self._refuse(scope, receive, send)

    @staticmethod
    async def _refuse(scope: Scope, receive: Receive, send: Send) -> None:
        detail = f"request body over {MAX_BODY_BYTES:,} bytes"
        answer = problem_response(413, detail, headers=_CLOSE)
        await answer(scope, receive, send)


class SecurityHeaders:
    """``X-Content-Type-Options: nosniff`` on every response, and :data:`STRICT_CSP`
    on every one without a Content-Security-Policy of its own."""

    def __init__(self, app: ASGIApp) -> None:
        self.app = app

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        if scope["type"] != "http":
            await self.app(scope, receive, send)
            return

        async def with_headers(message: Message) -> None:
            if message["type"] == "http.response.start":
                headers = MutableHeaders(scope=message)
                headers.setdefault("X-Content-Type-Options", "nosniff")
                headers.setdefault("Content-Security-Policy", STRICT_CSP)
            await send(message)

        await self.app(scope, receive, with_headers)
