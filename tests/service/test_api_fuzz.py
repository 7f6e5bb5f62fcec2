"""Property-based API fuzzing: no client input ever gets a 5xx, and the job list survives.

Over 2,000 generated requests, in categories, against the real app (SQLite in a
temporary folder, local backend with virtual GPUs, nothing mocked): hostile numbers
(NaN, +-Infinity, 1e309, integers of thousands of digits) written raw into the JSON
body, text with lone surrogates (escaped, ``"\\ud800"``, and as raw bytes), NUL and
other control characters, coercible values (``"2"``, ``true`` for an integer), wrong
types, unknown fields, deep nesting, arbitrary bytes, fuzzed query strings and job
paths, ``PUT /policy`` bodies and a 50 MB body with and without a Content-Length.
Each category counts its cases and its 5xx answers (all of them, not only the first)
and then checks that ``GET /jobs`` still answers 200 with strict JSON for the admin
and for the user who submitted. ``python tests/service/test_api_fuzz.py`` (or pytest
without xdist, ``-p no:xdist``) prints the table of cases and failures per category.
"""

from __future__ import annotations

import json
import os
import socket
import sys
import tempfile
import threading
import time
from collections.abc import Callable, Iterator
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any
from urllib.parse import quote

import httpx
import pytest
import uvicorn
from fastapi.testclient import TestClient
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from ilucid.backends.local import LocalBackend
from ilucid.backends.local_host import GpuInventory
from ilucid.core.policies import live_profiles
from ilucid.service.api import build_app
from ilucid.service.auth import create_token
from ilucid.service.db import make_engine, migrate
from ilucid.service.edge import MAX_BODY_BYTES
from ilucid.service.job_store import JobRequest
from ilucid.service.scheduler_service import SchedulerService

FIELDS = ["command", "gpus", "class", "estimate_s", "checkpoint_s", "cwd"]
NUMERIC = ["gpus", "estimate_s", "checkpoint_s"]
BIG_BODY = 50 * 1024 * 1024
#: ILUCID_FUZZ_SCALE=10 runs ten times as many cases per category (a longer hunt)
SCALE = float(os.environ.get("ILUCID_FUZZ_SCALE", "1"))


# -- the app under test -----------------------------------------------------------------
@dataclass
class Api:
    client: TestClient
    service: SchedulerService
    admin: dict[str, str]
    user: dict[str, str]
    job: str  # one valid job of the user's, for the paths that need one


@dataclass
class Tally:
    cases: int = 0
    failures: list[str] = field(default_factory=list)


#: category -> cases and 5xx answers, in this process
TALLIES: dict[str, Tally] = {}


def make_api(folder: Path) -> Api:
    url = f"sqlite:///{folder / 'fuzz.db'}"
    migrate(url)
    engine = make_engine(url)
    service = SchedulerService(engine, LocalBackend(folder, GpuInventory(4, "virtual", 0, "v")))
    admin = {"Authorization": f"Bearer {create_token(engine, 'root', 'ops', admin=True)}"}
    user = {"Authorization": f"Bearer {create_token(engine, 'fuzz', 'lab')}"}
    client = TestClient(build_app(service), raise_server_exceptions=False)
    job = client.post("/jobs", json={"command": ["true"]}, headers=user).json()["id"]
    return Api(client, service, admin, user, job)


@pytest.fixture(scope="module")
def api(tmp_path_factory: pytest.TempPathFactory, request: pytest.FixtureRequest) -> Iterator[Api]:
    yield make_api(tmp_path_factory.mktemp("fuzz"))
    plugins = request.config.pluginmanager
    reporter, capture = plugins.getplugin("terminalreporter"), plugins.getplugin("capturemanager")
    if reporter is not None and capture is not None and TALLIES:  # not under xdist
        with capture.global_and_fixture_disabled():
            reporter.write_line("")
            for line in table():
                reporter.write_line(line)


def table() -> list[str]:
    lines = [f"{'category':<28} {'cases':>6} {'5xx':>5}"]
    for name, tally in TALLIES.items():
        lines.append(f"{name:<28} {tally.cases:>6} {len(tally.failures):>5}")
    total = sum(t.cases for t in TALLIES.values())
    failures = sum(len(t.failures) for t in TALLIES.values())
    return [*lines, f"{'total':<28} {total:>6} {failures:>5}"]


def _strict_json(text: str) -> Any:
    def refuse(constant: str) -> Any:
        raise ValueError(f"{constant} is not JSON")

    return json.loads(text, parse_constant=refuse)


def check_lists(api: Api) -> None:
    """Every stored job can still be listed, by the admin and by its owner."""
    for headers in (api.admin, api.user):
        response = api.client.get("/jobs", headers=headers)
        assert response.status_code == 200, response.text[:500]
        jobs = _strict_json(response.text)
        assert isinstance(jobs, list) and jobs
        for job in jobs:
            json.dumps(job, allow_nan=False).encode("utf-8")


def campaign(
    api: Api,
    name: str,
    strategy: st.SearchStrategy[Any],
    examples: int,
    send: Callable[[Api, Any], httpx.Response],
) -> None:
    """Send ``examples`` generated requests; count them and every 5xx, then list the jobs."""
    tally = TALLIES.setdefault(name, Tally())
    examples = round(examples * SCALE)

    @settings(
        max_examples=examples,
        deadline=None,
        database=None,
        suppress_health_check=list(HealthCheck),
    )
    @given(strategy)
    def case(value: Any) -> None:
        tally.cases += 1
        try:
            response = send(api, value)
        except Exception as exc:  # an exception the server let escape is a 5xx too
            tally.failures.append(f"{value!r:.300}: raised {exc!r:.300}")
            return
        if response.status_code >= 500:
            tally.failures.append(f"{value!r:.300}: {response.status_code} {response.text:.300}")

    case()
    check_lists(api)
    assert tally.cases >= examples * 0.9, f"{name}: only {tally.cases} cases generated"
    assert not tally.failures, f"{name}: {len(tally.failures)} 5xx\n" + "\n".join(
        tally.failures[:10]
    )


# -- raw JSON: what json.dumps cannot write (1e309, huge integers, bare surrogate bytes) --
@dataclass(frozen=True)
class Raw:
    """A token written into the body as it is."""

    text: str


def encode(value: Any, ascii_only: bool = True) -> str:
    if isinstance(value, Raw):
        return value.text
    if isinstance(value, dict):
        items = (f"{encode(str(k), ascii_only)}: {encode(v, ascii_only)}" for k, v in value.items())
        return "{" + ", ".join(items) + "}"
    if isinstance(value, (list, tuple)):
        return "[" + ", ".join(encode(v, ascii_only) for v in value) + "]"
    # json.dumps writes NaN, Infinity and -Infinity, and a lone surrogate as "\ud800"
    # (ascii_only) or as the surrogate itself, sent below as its raw (invalid) UTF-8 bytes
    return json.dumps(value, ensure_ascii=ascii_only)


def post_raw(api: Api, body: Any, ascii_only: bool = True, admin: bool = False) -> httpx.Response:
    raw = encode(body, ascii_only).encode("utf-8", "surrogatepass")
    headers = {**(api.admin if admin else api.user), "Content-Type": "application/json"}
    return api.client.post("/jobs", content=raw, headers=headers)


HOSTILE_NUMBERS = [
    "NaN",
    "-NaN",
    "Infinity",
    "-Infinity",
    "1e309",
    "-1e309",
    "1e300",
    "1e-400",
    "-0",
    "-0.0",
    "0",
    "1",
    "4096",
    "4097",
    "2.0",
    "2.5",
    "-1",
    "315360000",
    "315360001",
    "9" * 400,
    "9" * 4301,  # past Python's int string limit
    "-" + "9" * 40,
    "1" + "0" * 308 + ".0",
]
number_tokens = st.one_of(
    st.sampled_from(HOSTILE_NUMBERS).map(Raw),
    st.integers().map(lambda n: Raw(str(n))),
    st.integers(min_value=2**63 - 2, max_value=10**500).map(lambda n: Raw(str(n))),
    st.integers(-400, 400).map(lambda e: Raw(f"1e{e}")),
    st.floats(),  # NaN and the infinities included: json.dumps writes them bare
)


@st.composite
def hostile_numbers(draw: st.DrawFn) -> dict[str, Any]:
    body: dict[str, Any] = {"command": ["true"]}
    for name in draw(st.lists(st.sampled_from(NUMERIC), min_size=1, max_size=3, unique=True)):
        body[name] = draw(number_tokens)
    return body


odd_characters = st.sampled_from(
    [
        "\ud800",
        "\udfff",
        "\udc00",
        "\x00",
        "\n",
        "\r",
        "\x1b",
        "\u2028",
        "\ufeff",
        "\U0010ffff",
        "\U0001f600",
        "\\",
        '"',
        "é",
        "\x7f",
        "\ufffe",
    ]
)
hostile_text = st.text(alphabet=st.one_of(st.characters(), odd_characters), max_size=30)


@st.composite
def hostile_strings(draw: st.DrawFn) -> tuple[dict[str, Any], bool]:
    body: dict[str, Any] = {"command": draw(st.lists(hostile_text, min_size=1, max_size=4))}
    if draw(st.booleans()):
        body["class"] = draw(hostile_text | st.sampled_from(["training", "inference"]))
    if draw(st.booleans()):
        body["cwd"] = draw(st.sampled_from(["/", "", "rel/"])) + draw(hostile_text)
    if draw(st.booleans()):
        body[draw(hostile_text)] = draw(hostile_text)  # a hostile unknown key
    return body, draw(st.booleans())  # escaped "\ud800", or raw bytes


COERCIBLE = [
    "2",
    "1",
    "",
    "true",
    "1e3",
    " 1",
    True,
    False,
    None,
    2.0,
    1.5,
    0,
    -1,
    [],
    [2],
    ["true"],
    [None],
    [1, 2],
    {},
    {"a": 1},
    "training",
    "/tmp",
    ["sleep", 1],
    [["nested"]],
]
json_values = st.recursive(
    st.none() | st.booleans() | st.integers() | st.floats() | st.text(max_size=20),
    lambda inner: (
        st.lists(inner, max_size=4) | st.dictionaries(st.text(max_size=8), inner, max_size=4)
    ),
    max_leaves=10,
)


@st.composite
def wrong_types(draw: st.DrawFn) -> dict[str, Any]:
    body: dict[str, Any] = {"command": ["true"]}
    for name in draw(st.lists(st.sampled_from(FIELDS), min_size=1, max_size=3, unique=True)):
        body[name] = draw(st.sampled_from(COERCIBLE) | json_values)
    return body


@st.composite
def unknown_fields(draw: st.DrawFn) -> dict[str, Any]:
    body: dict[str, Any] = {"command": ["true"], "gpus": draw(st.integers(0, 2))}
    extra = draw(st.dictionaries(st.text(max_size=12), json_values, min_size=1, max_size=5))
    body.update({k: v for k, v in extra.items() if k not in FIELDS})
    body.update(draw(st.sampled_from([{}, {"job_class": "x"}, {"user": "root", "admin": True}])))
    return body


@st.composite
def deep_bodies(draw: st.DrawFn) -> str:
    depth = draw(st.one_of(st.integers(1, 64), st.integers(64, 5000), st.sampled_from([100_000])))
    kind = draw(st.sampled_from(["list", "dict", "mixed"]))
    if kind == "list":
        opened, closed = "[" * depth, "]" * depth
    elif kind == "dict":
        opened, closed = '{"a": ' * depth, "}" * depth
    else:
        opened, closed = '[{"a": ' * (depth // 2 + 1), "}]" * (depth // 2 + 1)
    inner = opened + draw(st.sampled_from(['"x"', "1", "null", "NaN"])) + closed
    where = draw(st.sampled_from(["body", *FIELDS, "unknown"]))
    if where == "body":
        return inner
    key = "extra" if where == "unknown" else where
    rest = "" if where == "command" else '"command": ["true"], '
    return "{" + rest + json.dumps(key) + ": " + inner + "}"


random_bodies = st.dictionaries(
    st.sampled_from([*FIELDS, "x"]),
    json_values | st.lists(st.text(max_size=10), max_size=3),
    max_size=6,
)


@st.composite
def raw_bodies(draw: st.DrawFn) -> tuple[bytes, str | None]:
    valid = b'{"command": ["true"], "gpus": 1}'
    body = draw(
        st.one_of(
            st.binary(max_size=200),
            st.integers(0, len(valid)).map(lambda n: valid[:n]),  # truncated
            st.sampled_from([b"", b"null", b"[]", b"1", b'"x"', b"\xff\xfe", b"\xed\xa0\x80"]),
            st.binary(max_size=20).map(lambda junk: valid[:-1] + junk + b"}"),
        )
    )
    kind = draw(
        st.sampled_from(
            [
                None,
                "application/json",
                "text/plain",
                "application/x-www-form-urlencoded",
                "multipart/form-data; boundary=x",
                "application/json; charset=latin-1",
            ]
        )
    )
    return body, kind


query_values = st.one_of(
    hostile_text.map(lambda t: quote(t.encode("utf-8", "surrogatepass"), safe="")),
    st.sampled_from([*HOSTILE_NUMBERS[:12], "nan", "inf", "-inf", "1e309", "%FF", "%", "%zz"]),
    st.integers().map(str),
    st.floats().map(repr),
)
query_targets = st.sampled_from(
    [
        ("GET", "/jobs?state={}", "user"),
        ("GET", "/jobs?state={}", "admin"),
        ("GET", "/timeline?minutes={}", "user"),
        ("GET", "/jobs/{job}/logs?stream={}", "user"),
        ("GET", "/jobs/{job}/logs?stream={}&stream=stderr", "user"),
        ("POST", "/model/refit?wait={}", "user"),  # validated before the admin check
        ("GET", "/queue?x={}", "user"),
        ("GET", "/jobs/{job}/explain?{}=1", "user"),
    ]
)


def send_query(api: Api, value: tuple[tuple[str, str, str], str]) -> httpx.Response:
    (method, template, who), text = value
    path = template.replace("{job}", api.job).replace("{}", text)
    return api.client.request(method, path, headers=api.admin if who == "admin" else api.user)


job_ids = st.one_of(
    hostile_text.map(lambda t: quote(t.encode("utf-8", "surrogatepass"), safe="")),
    st.sampled_from(["%00", "%FF", "..", "%2e%2e", "%2F", "x" * 5000]),
)
job_paths = st.tuples(
    st.sampled_from(["GET", "DELETE"]),
    job_ids,
    st.sampled_from(["", "/logs", "/explain", "/profile", "/logs?stream=x", "/transitions"]),
)


def send_path(api: Api, value: tuple[str, str, str]) -> httpx.Response:
    method, job_id, suffix = value
    return api.client.request(method, "/jobs/" + job_id + suffix, headers=api.user)


policy_bodies = st.tuples(
    st.one_of(
        st.fixed_dictionaries({"policy": st.sampled_from(list(live_profiles())) | hostile_text}),
        st.fixed_dictionaries({"policy": json_values | number_tokens}),
        st.dictionaries(hostile_text, json_values, max_size=3),
        json_values,
    ),
    st.booleans(),
)


def send_policy(api: Api, value: tuple[Any, bool]) -> httpx.Response:
    body, admin = value
    raw = encode(body).encode("utf-8", "surrogatepass")
    headers = {**(api.admin if admin else api.user), "Content-Type": "application/json"}
    return api.client.put("/policy", content=raw, headers=headers)


# -- the categories ---------------------------------------------------------------------
def test_hostile_numbers(api: Api) -> None:
    campaign(api, "numbers: NaN/inf/1e309/huge", hostile_numbers(), 400, post_raw)


def test_hostile_strings(api: Api) -> None:
    campaign(
        api,
        "text: surrogates/NUL/control",
        hostile_strings(),
        350,
        lambda api, value: post_raw(api, value[0], ascii_only=value[1]),
    )


def test_coercible_and_wrong_types(api: Api) -> None:
    campaign(api, "coercible/wrong types", wrong_types(), 300, post_raw)


def test_unknown_fields(api: Api) -> None:
    campaign(
        api,
        "unknown fields",
        st.tuples(unknown_fields(), st.booleans()),
        150,
        lambda api, value: post_raw(api, value[0], admin=value[1]),
    )


def test_deep_nesting(api: Api) -> None:
    def send(api: Api, text: str) -> httpx.Response:
        headers = {**api.user, "Content-Type": "application/json"}
        return api.client.post("/jobs", content=text.encode(), headers=headers)

    campaign(api, "deep nesting", deep_bodies(), 120, send)


def test_random_json_bodies(api: Api) -> None:
    campaign(api, "random JSON bodies", random_bodies, 250, post_raw)


def test_raw_bytes(api: Api) -> None:
    def send(api: Api, value: tuple[bytes, str | None]) -> httpx.Response:
        body, kind = value
        headers = {**api.user, **({"Content-Type": kind} if kind else {})}
        return api.client.post("/jobs", content=body, headers=headers)

    campaign(api, "raw bytes/content types", raw_bodies(), 150, send)


def test_query_parameters(api: Api) -> None:
    campaign(
        api, "GET/POST query parameters", st.tuples(query_targets, query_values), 250, send_query
    )


def test_job_paths(api: Api) -> None:
    campaign(api, "job paths (GET/DELETE)", job_paths, 150, send_path)


def test_put_policy(api: Api) -> None:
    campaign(api, "PUT /policy bodies", policy_bodies, 120, send_policy)


def test_authorization_headers(api: Api) -> None:
    def send(api: Api, value: tuple[str, str]) -> httpx.Response:
        path, token = value  # sent as the raw bytes a client may put in a header
        return api.client.get(path, headers={"Authorization": token.encode("latin-1")})

    tokens = st.one_of(
        st.text(alphabet=st.characters(min_codepoint=32, max_codepoint=255), max_size=60),
        st.text(max_size=40).map(lambda t: "Bearer " + t.encode("utf-8").decode("latin-1")),
        st.sampled_from(["Bearer", "Bearer ", "bearer x", "Basic eDp5", "Bearer  \t"]),
    )
    paths = st.sampled_from(["/jobs", "/queue", "/nodes", "/policy", "/model", "/timeline"])
    campaign(api, "Authorization headers", st.tuples(paths, tokens), 100, send)


# -- a 50 MB body -----------------------------------------------------------------------
def _chunks(total: int, size: int = 64 * 1024) -> Iterator[bytes]:
    sent = 0
    yield b'{"command": ["echo", "'
    while sent < total:
        yield b"x" * size
        sent += size
    yield b'"]}'


@pytest.fixture(scope="module")
def served(api: Api) -> Iterator[str]:
    """The same app on a real uvicorn server (what a client's bytes really reach)."""
    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        port = probe.getsockname()[1]
    server = uvicorn.Server(
        uvicorn.Config(build_app(api.service), host="127.0.0.1", port=port, log_level="error")
    )
    thread = threading.Thread(target=server.run, daemon=True)
    thread.start()
    deadline = time.monotonic() + 10
    while not server.started and time.monotonic() < deadline:
        time.sleep(0.02)
    yield f"127.0.0.1:{port}"
    server.should_exit = True
    thread.join(10)


def _chunked_over_socket(address: str, token: str) -> tuple[bytes, int]:
    """POST 50 MB chunked, no Content-Length, to the real server: its answer and the
    bytes it let us send before answering (the rest must never be read)."""
    host, port = address.rsplit(":", 1)
    sent = 0
    with socket.create_connection((host, int(port)), timeout=10) as sock:
        sock.sendall(
            b"POST /jobs HTTP/1.1\r\nHost: x\r\nContent-Type: application/json\r\n"
            + f"Authorization: Bearer {token}\r\n".encode()
            + b"Transfer-Encoding: chunked\r\n\r\n"
        )
        sock.settimeout(2)
        try:
            for chunk in _chunks(BIG_BODY):
                sock.sendall(b"%x\r\n%s\r\n" % (len(chunk), chunk))
                sent += len(chunk)
            sock.sendall(b"0\r\n\r\n")
        except (TimeoutError, OSError):
            pass  # the server stopped reading: what it answered is below
        sock.settimeout(10)
        answer = b""
        while b"\r\n\r\n" not in answer:
            try:
                data = sock.recv(65536)
            except ConnectionResetError:
                break
            if not data:
                break
            answer += data
    return answer, sent


def test_a_50_mb_body_is_refused_with_or_without_a_content_length(api: Api, served: str) -> None:
    tally = TALLIES.setdefault("50 MB body (CL/chunked)", Tally())
    body = b"".join(_chunks(BIG_BODY))
    outcomes = {
        "truthful Content-Length": api.client.post(
            "/jobs", content=body, headers={**api.user, "Content-Type": "application/json"}
        ).status_code,
        "chunked (no Content-Length)": api.client.post(
            "/jobs",
            content=_chunks(BIG_BODY),
            headers={**api.user, "Content-Type": "application/json"},
        ).status_code,
    }
    answer, sent = _chunked_over_socket(served, api.user["Authorization"].split()[1])
    outcomes["chunked to a real server"] = int(answer.split(b" ", 2)[1]) if answer else 0
    tally.cases += len(outcomes)
    tally.failures += [f"{name}: {code}" for name, code in outcomes.items() if code >= 500]
    assert outcomes == dict.fromkeys(outcomes, 413), outcomes
    # the server answered long before the 50 MB were through: it read about the limit
    # (plus what socket buffers hold), not the whole body
    assert sent < 16 * MAX_BODY_BYTES, f"the server took {sent:,} bytes before refusing"
    assert MAX_BODY_BYTES < BIG_BODY
    check_lists(api)


# -- pinned regressions -----------------------------------------------------------------
def test_field_level_messages_for_common_mistakes(api: Api) -> None:
    missing = api.client.post("/jobs", json={"gpus": 1}, headers=api.user)
    assert missing.status_code == 422
    assert missing.json()["errors"][0]["loc"] == ["body", "command"]
    assert missing.json()["detail"] == "command: is required"
    negative = api.client.post("/jobs", json={"command": ["true"], "gpus": -1}, headers=api.user)
    assert negative.json()["errors"][0]["loc"] == ["body", "gpus"]
    assert negative.json()["detail"] == "gpus: must be >= 0 (got -1)"
    nul = api.client.post("/jobs", json={"command": ["echo", "a\x00b"]}, headers=api.user)
    assert nul.status_code == 422 and "NUL" in nul.json()["detail"]


def test_a_job_that_cannot_launch_fails_with_its_reason(tmp_path: Path) -> None:
    # (the fuzzed jobs above are never launched: nothing runs the reconcile loop)
    url = f"sqlite:///{tmp_path / 'db.sqlite'}"
    migrate(url)
    service = SchedulerService(
        make_engine(url), LocalBackend(tmp_path, GpuInventory(1, "virtual", 0, "v"))
    )
    # a directory the job's account may enter (a root service runs it as a dynamic uid,
    # and pytest's own folders are 0700): submission accepts it
    gone = Path(tempfile.mkdtemp(prefix="ilucid-gone-"))
    gone.chmod(0o755)
    job = service.submit(JobRequest(["true"], gpus=1, cwd=str(gone), max_retries=0))
    gone.rmdir()  # after submission: the launch itself fails
    service.reconcile()
    client = TestClient(build_app(service))
    token = create_token(service.engine, "root", "ops", admin=True)
    shown = client.get(f"/jobs/{job}", headers={"Authorization": f"Bearer {token}"}).json()
    assert shown["state"] == "failed"
    assert "could not be launched" in shown["transitions"][-1]["reason"]
    service.reconcile()  # and the loop goes on


if __name__ == "__main__":  # the whole campaign in one process, then its table
    code = pytest.main([__file__, "-q", "-p", "no:xdist", "-p", "no:cacheprovider"])
    sys.exit(code)
