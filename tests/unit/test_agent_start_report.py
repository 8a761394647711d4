"""An agent newer than its server (a rolling upgrade that starts with the agents): the server's
strict schema refuses the workload's ``started_at`` in a status report (422). The report goes
again without it, and from then on, so no start or end is lost to the upgrade; a 422 about
something else is not taken for it."""

import json

import httpx
import pytest

from gpupool.agent.api import AgentApi, AgentApiError


def _api(answer) -> tuple[AgentApi, list[dict]]:
    sent: list[dict] = []

    def handle(request: httpx.Request) -> httpx.Response:
        body = json.loads(request.content)
        sent.append(body)
        return answer(body)

    client = httpx.Client(transport=httpx.MockTransport(handle), base_url="http://server")
    return AgentApi("http://server", "token", "n1", client=client), sent


def _older_server(body: dict) -> httpx.Response:
    if "started_at" in body:
        return httpx.Response(
            422,
            json={"detail": "started_at: Extra inputs are not permitted", "field": "started_at"},
        )
    return httpx.Response(200, json={})


def test_an_older_server_gets_reports_without_the_start():
    api, sent = _api(_older_server)
    assert api.report(7, 3, "running", started_at=12.5, node="n1")
    assert api.report(7, 3, "succeeded", started_at=12.5, ended_at=20.0, node="n1")
    assert [("started_at" in b, b["state"]) for b in sent] == [
        (True, "running"), (False, "running"), (False, "succeeded")
    ]  # fmt: skip
    assert sent[-1]["ended_at"] == 20.0  # the rest goes as it was


def test_another_refusal_is_not_taken_for_an_older_server():
    api, sent = _api(lambda _: httpx.Response(422, json={"detail": "reason: too long"}))
    with pytest.raises(AgentApiError):
        api.report(7, 3, "failed", started_at=12.5, reason="x" * 3000)
    assert len(sent) == 1
