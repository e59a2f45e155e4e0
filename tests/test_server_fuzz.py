"""Property-based fuzzing of the whole REST API from its own OpenAPI schema (schemathesis): for
every operation, generated requests (valid and not) with the admin token; no answer is a 5xx,
every answer has a documented status and content type and matches its schema. Bounded: a few
hundred requests in all."""

from __future__ import annotations

import pytest
import schemathesis
from hypothesis import HealthCheck, given, settings
from schemathesis import checks

import syncd

from .daemon_helpers import isolate_git_identity
from .server_helpers import served_in_thread

EXAMPLES = 25
CHECKS = [checks.not_a_server_error, checks.status_code_conformance, checks.content_type_conformance,
          checks.response_schema_conformance]  # fmt: skip


@pytest.mark.slow
def test_the_whole_rest_api_survives_generated_requests(tmp_path, monkeypatch, embedder):
    isolate_git_identity(tmp_path, monkeypatch)
    home = syncd.init(tmp_path / "home").home
    with served_in_thread(home, embedder) as server:
        headers = {"Authorization": f"Bearer {server.admin}"}
        with server.client(server.admin) as admin:
            admin.post("/memory/archival", json={"content": "Likes green tea.", "user_id": "ana"})
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
                case.call_and_validate(base_url=server.url, headers=headers, checks=CHECKS, timeout=120)

            return fuzz

        for operation in operations:
            fuzzer(operation)()
        total = sum(sent.values())
        print(f"schemathesis: {total} requests over {len(sent)} operations")
        assert total >= 200 and len(sent) == len(operations)
