"""The API's edge: what a request may hold, checked once and strictly, and the
headers and size limit every response and request go through.

Numbers must be finite and in range, whole numbers are not coerced, text must
be valid UTF-8 without NUL, commands are bounded, and bodies over
:data:`MAX_BODY_BYTES` get 413 whether or not they say their length.
"""

import difflib
import json
import math
from collections.abc import Iterable, Mapping, Sequence
from typing import Any

from fastapi import HTTPException, Query
from fastapi.responses import JSONResponse
from pydantic import BaseModel, ConfigDict, Field, field_validator
from starlette.datastructures import MutableHeaders
from starlette.types import ASGIApp, Message, Receive, Scope, Send

__all__ = [
    "MAX_ARGS",
    "MAX_BODY_BYTES",
    "MAX_COMMAND_BYTES",
    "MAX_SECONDS",
    "QUERY_INT_MAX",
    "QUERY_NUMBER_MAX",
    "QUERY_TEXT_MAX",
    "STRICT_CSP",
    "BodyLimit",
    "PolicyBody",
    "RequestBody",
    "SecurityHeaders",
    "SubmitBody",
    "body_fields",
    "json_safe",
    "query_int",
    "query_number",
    "query_text",
    "validation_answer",
    "validation_sentence",
]

#: Largest request body accepted, bytes; larger ones get 413 (see :class:`BodyLimit`)
MAX_BODY_BYTES = 1 << 20
#: Most arguments, and bytes of all arguments, one command may hold (Linux's own
#: limit on a process's arguments is 128 KiB a string, about 2 MiB in all)
MAX_ARGS = 4096
MAX_COMMAND_BYTES = 128 * 1024
#: Longest estimate or checkpoint interval accepted: ten years
MAX_SECONDS = 10 * 365 * 86400.0

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


def _valid_text(value: str, field: str) -> str:
    """Valid UTF-8 text: a stored row that cannot be encoded is never accepted (NUL is
    refused by the service itself, for every face)."""
    try:
        value.encode("utf-8")
    except UnicodeEncodeError:
        raise ValueError(f"{field} must be valid UTF-8 text (no lone surrogates)") from None
    return value


class RequestBody(BaseModel):
    """Every request body: a field it does not know is refused (422, with the closest
    known name), never dropped: a mistyped ``estimate`` must not silently mean "none"."""

    model_config = ConfigDict(extra="forbid")


def body_fields(model: type[BaseModel]) -> list[str]:
    """The names a body of ``model`` may hold: each field's alias, and its own name."""
    names: list[str] = []
    for name, info in model.model_fields.items():
        if info.alias:
            names.append(info.alias)
        if info.alias is None or model.model_config.get("populate_by_name"):
            names.append(name)
    return names


class SubmitBody(RequestBody):
    """A submission, validated once, strictly: whole numbers are whole numbers, numbers
    are finite and in range, text is valid UTF-8, and sizes are bounded."""

    command: list[str] = Field(
        min_length=1, max_length=MAX_ARGS, description="program and arguments (no shell)"
    )
    gpus: int = Field(1, ge=0, le=4096)
    job_class: str = Field("training", alias="class", max_length=32)
    # at least 1 s: a statement is blended in log space (ilucid.core.stated_estimate)
    estimate_s: float | None = Field(None, ge=1, le=MAX_SECONDS, allow_inf_nan=False)
    checkpoint_s: float | None = Field(None, gt=0, le=MAX_SECONDS, allow_inf_nan=False)
    cloud: bool = Field(
        True, description="may burst to a paid pool when waiting costs more (false: on-prem only)"
    )
    cwd: str | None = Field(None, max_length=4096)
    name: str | None = Field(None, max_length=128, description="a name to show beside the id")
    priority: int = Field(
        0, ge=-100, le=100, description="higher first within a class; above 0 needs an admin"
    )
    gpu_type: str | None = Field(
        None, max_length=64, description="only GPUs of this type (a hard constraint)"
    )
    preferred_gpu_types: list[str] = Field(
        default_factory=list, max_length=16, description="GPU types to try first, best first"
    )
    gpu_memory_gb: float | None = Field(
        None, gt=0, le=4096, allow_inf_nan=False, description="GPU memory needed per GPU"
    )
    nodes: int | None = Field(None, ge=1, le=4096, description="a gang: this many nodes...")
    gpus_per_node: int | None = Field(None, ge=1, le=1024, description="...with this many GPUs")
    gpu_milli: int = Field(
        1000, ge=1, le=1000, description="a share of one GPU in thousandths (with gpus = 1)"
    )
    cpus: float | None = Field(None, gt=0, le=100000, allow_inf_nan=False)
    memory_gb: float | None = Field(None, gt=0, le=1 << 20, allow_inf_nan=False)
    max_retries: int | None = Field(
        None,
        ge=0,
        le=100,
        description="retries after a failed launch or a vanished process, with a backoff"
        " (default: the service's)",
    )

    model_config = ConfigDict(populate_by_name=True, strict=True, extra="forbid")

    @field_validator("command")
    @classmethod
    def _command(cls, value: list[str]) -> list[str]:
        for argument in value:
            _valid_text(argument, "command")
        size = sum(len(a.encode("utf-8")) + 1 for a in value)
        if size > MAX_COMMAND_BYTES:
            raise ValueError(f"command holds {size:,} bytes; at most {MAX_COMMAND_BYTES:,}")
        return value

    @field_validator("cwd")
    @classmethod
    def _cwd(cls, value: str | None) -> str | None:
        if value is None:
            return None
        _valid_text(value, "cwd")
        if not value.startswith("/"):
            raise ValueError(f"cwd must be an absolute path, got {value!r}")
        return value

    @field_validator("job_class")
    @classmethod
    def _job_class(cls, value: str) -> str:
        return _valid_text(value, "class")

    @field_validator("name", "gpu_type")
    @classmethod
    def _text(cls, value: str | None) -> str | None:
        return None if value is None else _valid_text(value, "name or gpu_type")

    @field_validator("preferred_gpu_types")
    @classmethod
    def _types(cls, value: list[str]) -> list[str]:
        for gpu_type in value:
            if len(_valid_text(gpu_type, "preferred_gpu_types")) > 64:
                raise ValueError("preferred_gpu_types: each type is at most 64 characters")
        return value


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
}
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
        part = f"{field}: {_must(error, field, known)}"
        kind = error.get("type")
        if "input" in error and kind not in ("missing", "json_invalid", "extra_forbidden"):
            value = error["input"]
            shown = (
                repr(value)  # nan, inf: JSON has no spelling for them
                if isinstance(value, float) and not math.isfinite(value)
                else json.dumps(json_safe(value), ensure_ascii=False)
            )
            if len(shown) <= _SHOWN_INPUT and " got " not in part:
                part += f" (got {shown})"
        parts.append(part)
    return "; ".join(parts) or "the request is not valid"


def validation_answer(
    errors: Sequence[Mapping[str, Any]], known: Iterable[str] = ()
) -> JSONResponse:
    """422: ``detail`` is :func:`validation_sentence`; ``errors`` keeps each error's
    type, location and message (and its input when short) for programs."""
    known = list(known)
    kept = []
    for error in errors:
        entry = {k: v for k, v in error.items() if k in ("type", "loc", "msg")}
        if "input" in error:
            shown = json_safe(error["input"])
            if len(json.dumps(shown, ensure_ascii=False)) <= 200:
                entry["input"] = shown
        kept.append(json_safe(entry))
    body = {"detail": validation_sentence(errors, known), "errors": kept}
    return JSONResponse(body, status_code=422)


class PolicyBody(RequestBody):
    policy: str


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
        detail = {"detail": f"request body over {MAX_BODY_BYTES:,} bytes"}
        await JSONResponse(detail, status_code=413, headers=_CLOSE)(scope, receive, send)


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
