"""The published contract is what the server does: Schemathesis, the standard
property-based tester of OpenAPI services, with every check it has, against a real
``ilucid serve`` (a subprocess on a free port, SQLite, nothing mocked), once with an
admin token and once with a user's.

The jobs it submits cannot run a generated command: the service runs the *hollow*
backend (``--backend hollow``), whose nodes exist only in memory and whose jobs run no
process at all, so a schema-valid ``["rm", "-rf", "/"]`` is only ever a row in SQLite.

The admin run generates at least 10,000 cases (the count is read from Schemathesis's
own summary and asserted); ``ILUCID_CONTRACT_EXAMPLES`` changes how many examples each
operation gets (the default, 900; 640 gave 7,776 cases in one run and 9,337 with 520
in another: the stateful phase varies).
"""

from __future__ import annotations

import json
import os
import re
import subprocess
import sys
import tempfile
from collections.abc import Iterator
from pathlib import Path

import httpx
import pytest
from serve_helpers import free_port, run_ilucid, serving

pytestmark = pytest.mark.xdist_group("api-contract")

EXAMPLES = int(os.environ.get("ILUCID_CONTRACT_EXAMPLES", "900"))
#: Schemathesis's checks, all of them (``--checks all``); named here so the test says
#: which the issue asked for by name
NAMED_CHECKS = (
    "not_a_server_error",
    "response_schema_conformance",
    "status_code_conformance",
    "negative_data_rejection",
    "use_after_free",
    "ensure_resource_availability",
)


@pytest.fixture(scope="module")
def service(tmp_path_factory: pytest.TempPathFactory) -> Iterator[tuple[str, str, str]]:
    """A hollow ``ilucid serve``: its URL, an admin token and a user's token."""
    data = tmp_path_factory.mktemp("contract") / "state"
    port = free_port()
    extra = ("--backend", "hollow", "--hollow-nodes", "2", "--no-user-config")
    with serving(data, port, 4, dict(os.environ), *extra) as env:
        made = run_ilucid(
            "token",
            "create",
            "--user",
            "carol",
            "--tenant",
            "vision",
            "--data-dir",
            str(data),
            env=env,
        )
        assert made.returncode == 0, made.stderr
        user_token = made.stdout.strip().splitlines()[-1].split()[-1]
        yield env["ILUCID_URL"], env["ILUCID_TOKEN"], user_token


def _schemathesis(url: str, token: str, examples: int, seed: int) -> tuple[str, int]:
    """Schemathesis on ``url``'s published schema: its report and exit status (run in a
    temporary folder: it keeps a cache folder where it runs)."""
    command = [
        str(Path(sys.executable).with_name("schemathesis")),
        "run",
        f"{url}/api/v1/openapi.json",
        "--header",
        f"Authorization: Bearer {token}",
        "--checks",
        "all",
        "--max-examples",
        str(examples),
        "--seed",
        str(seed),
        "--request-timeout",
        "60",
    ]
    done = subprocess.run(
        command,
        capture_output=True,
        text=True,
        timeout=1500,
        check=False,
        env={**os.environ, "NO_COLOR": "1", "COLUMNS": "100"},
        cwd=tempfile.mkdtemp(prefix="ilucid-schemathesis-"),
    )
    return done.stdout + done.stderr, done.returncode


def _generated(report: str) -> int:
    found = re.search(r"(\d+) generated", report)
    assert found, report[-3000:]
    return int(found.group(1))


def test_the_schema_names_every_check_it_is_held_to() -> None:
    listed = subprocess.run(
        [str(Path(sys.executable).with_name("schemathesis")), "run", "--help"],
        capture_output=True,
        text=True,
        check=True,
    ).stdout
    for check in NAMED_CHECKS:
        assert check in listed, check


def test_every_check_passes_for_an_admin_over_ten_thousand_cases(
    service: tuple[str, str, str],
) -> None:
    url, admin, _ = service
    report, status = _schemathesis(url, admin, EXAMPLES, seed=20261207)
    print(report[-1500:])
    assert status == 0, report[-6000:]
    assert "Tested: 18" in report, report[-1500:]  # every published operation
    if EXAMPLES >= 900:
        assert _generated(report) >= 10_000, report[-1500:]


def test_every_check_passes_for_a_user(service: tuple[str, str, str]) -> None:
    url, _, user = service
    report, status = _schemathesis(url, user, max(EXAMPLES // 5, 20), seed=7)
    print(report[-1500:])
    assert status == 0, report[-6000:]


def test_the_published_schema_declares_problems_and_no_unused_models(
    service: tuple[str, str, str],
) -> None:
    url, _, _ = service
    schema = httpx.get(f"{url}/api/v1/openapi.json").json()
    text = json.dumps(schema)
    assert "HTTPValidationError" not in text
    assert '"ge"' not in text and '"le"' not in text  # bounds as JSON Schema spells them
    for path, operations in schema["paths"].items():
        assert path.startswith("/api/v1/") or path in ("/healthz", "/metrics"), path
        for method, operation in operations.items():
            for status, response in operation["responses"].items():
                if status[0] in "45":
                    content = response["content"]
                    assert list(content) == ["application/problem+json"], (path, method)
            if (path, method) != ("/healthz", "get"):
                assert "401" in operation["responses"], (path, method)


def test_a_generated_client_submits_lists_explains_and_cancels(
    service: tuple[str, str, str], tmp_path: Path
) -> None:
    """openapi-python-client, a well-kept generator, makes a client from the published
    schema alone; that client's own models carry a job through its life."""
    url, _, user = service
    spec = tmp_path / "openapi.json"
    spec.write_text(httpx.get(f"{url}/api/v1/openapi.json").text)
    package = tmp_path / "ilucid_generated"
    made = subprocess.run(
        [
            str(Path(sys.executable).with_name("openapi-python-client")),
            "generate",
            "--path",
            str(spec),
            "--output-path",
            str(package),
            "--meta",
            "none",
        ],
        capture_output=True,
        text=True,
        check=False,
        env={**os.environ, "PATH": f"{Path(sys.executable).parent}:{os.environ['PATH']}"},
    )
    assert made.returncode == 0 and (package / "client.py").exists(), made.stdout + made.stderr
    sys.path.insert(0, str(tmp_path))
    try:
        from ilucid_generated import AuthenticatedClient  # type: ignore[import-not-found]
        from ilucid_generated.api.default import (  # type: ignore[import-not-found]
            cancel,
            explain,
            list_jobs,
            submit,
        )
        from ilucid_generated.models import (  # type: ignore[import-not-found]
            CancelAnswer,
            ExplainAnswer,
            JobPage,
            Problem,
            SubmitAnswer,
            SubmitBody,
        )

        client = AuthenticatedClient(base_url=url, token=user)
        answer = submit.sync(client=client, body=SubmitBody(command=["train.py"], gpus=1))
        assert isinstance(answer, SubmitAnswer), answer
        job_ids = []
        cursor = None
        while True:  # every page, as a script walks them
            page = list_jobs.sync(client=client, limit=2, cursor=cursor)
            assert isinstance(page, JobPage), page
            job_ids += [job.id for job in page.jobs]
            if not page.next_cursor:
                break
            cursor = page.next_cursor
        assert answer.id in job_ids and len(job_ids) == len(set(job_ids))
        why = explain.sync(job_id=answer.id, client=client)
        assert isinstance(why, ExplainAnswer) and why.id == answer.id and why.why
        cancelled = cancel.sync(job_id=answer.id, client=client)
        assert isinstance(cancelled, CancelAnswer) and cancelled.id == answer.id
        # an error is a Problem the client parses, with the field named
        refused = submit.sync(client=client, body=SubmitBody(command=["x"], gpus=-1))
        assert isinstance(refused, Problem) and refused.status == 422
        assert refused.detail.startswith("gpus: must be >= 0"), refused.detail
    finally:
        sys.path.remove(str(tmp_path))
        for name in [m for m in sys.modules if m.startswith("ilucid_generated")]:
            del sys.modules[name]
