"""Property-based fuzzing of the whole REST API from its own OpenAPI schema (schemathesis): for
every operation, generated requests (valid and not) with the admin token, with a user's token,
and with the admin token among hostile headers; no answer is a 5xx, every answer has a
documented status and content type and matches its schema, and the user's answers never hold
another user's memory. Bounded: a few hundred requests per run."""

from __future__ import annotations

import pytest
import schemathesis
from hypothesis import HealthCheck, given, settings
from schemathesis import checks

import syncd

from .daemon_helpers import isolate_git_identity
from .server_helpers import served_in_thread
from .strategies import examples

# Requests per operation and client, the same ones each run (derandomized, so a failure
# reproduces): 10 in CI, still a few hundred over the API and its three clients; --slow sends 100
# (25 before: about 1,350 requests, 1.7 minutes of every CI run).
EXAMPLES = examples(10)
CHECKS = [checks.not_a_server_error, checks.status_code_conformance, checks.content_type_conformance,
          checks.response_schema_conformance]  # fmt: skip
# Another user's fact: no answer to the user's token may hold a word of it.
SECRET = "Zorblax vault combination 5531"
# Headers a hostile or broken client sends beside a valid token: odd values, long ones (under
# the server's bounds), ones that ask for another representation or a part of the answer.
HOSTILE_HEADERS = {
    "Cookie": "session=" + "x" * 4000,
    "User-Agent": "ÿ" * 200,
    "X-Forwarded-For": "127.0.0.1, ../../etc, ' OR 1=1 --",
    "X-Forwarded-Host": "evil.example",
    "Forwarded": "for=unknown;host=evil.example;proto=gopher",
    "Accept": "text/event-stream;q=1, application/xml;q=0.9",
    "Accept-Encoding": "br;q=1, zstd, *;q=0",
    "Range": "bytes=0-0",
    "If-None-Match": "*",
    "X-Syncd-User": "bob",
    **{f"X-Filler-{n}": "y" * 200 for n in range(40)},
}


def _no_secret(ctx, response, case):
    assert SECRET.split()[0] not in response.text, f"{case.method} {case.path} answered another user's memory"


@pytest.mark.slow
@pytest.mark.parametrize("who", ["admin", "user", "hostile-headers"])
def test_the_whole_rest_api_survives_generated_requests(tmp_path, monkeypatch, embedder, who):
    isolate_git_identity(tmp_path, monkeypatch)
    home = syncd.init(tmp_path / "home").home
    with served_in_thread(home, embedder) as server:
        with server.client(server.admin) as admin:
            admin.post("/memory/archival", json={"content": "Likes green tea.", "user_id": "ana"})
            admin.post("/memory/archival", json={"content": SECRET, "user_id": "bob"})
        token = server.tokens.add("ana")[1] if who == "user" else server.admin
        headers = {"Authorization": f"Bearer {token}", **(HOSTILE_HEADERS if who == "hostile-headers" else {})}
        run_checks = [*CHECKS, _no_secret] if who == "user" else CHECKS
        schema = schemathesis.openapi.from_url(f"{server.url}/openapi.json")
        sent: dict[str, int] = {}
        operations = [result.ok() for result in schema.get_all_operations()]
        assert len(operations) >= 18

        def fuzzer(operation):
            label = f"{operation.method.upper()} {operation.path}"

            @given(case=operation.as_strategy())
            @settings(max_examples=EXAMPLES, deadline=None, database=None, derandomize=True,
                      suppress_health_check=list(HealthCheck))  # fmt: skip
            def fuzz(case):
                sent[label] = sent.get(label, 0) + 1
                case.call_and_validate(base_url=server.url, headers=headers, checks=run_checks, timeout=120)

            return fuzz

        for operation in operations:
            fuzzer(operation)()
        total = sum(sent.values())
        print(f"schemathesis ({who}): {total} requests over {len(sent)} operations")
        assert total >= 5 * len(operations) and len(sent) == len(operations)
