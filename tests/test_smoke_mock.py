from __future__ import annotations

import httpx

from mockapi import Match, Rule, Scenario, text


def test_mock_answers_a_scripted_text(mock_api):
    mock = mock_api(Scenario(classifier="plain", rules=[Rule(match=Match(), reply=text("hi"))]))
    response = httpx.post(f"{mock.url}/v1/messages", headers={
        "x-api-key": "k", "anthropic-version": "2023-06-01"}, json={
        "model": "m", "max_tokens": 5, "messages": [{"role": "user", "content": "x"}]})
    assert response.status_code == 200
    assert response.json()["content"] == [{"type": "text", "text": "hi"}]
    assert [r["rule"] for r in mock.requests()] == ["rule-1"]
