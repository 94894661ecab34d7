"""LLMParent against a REAL OpenAI-compatible HTTP server on 127.0.0.1 (scripted, incl. malformed replies)."""

from __future__ import annotations

import json
import re
import threading
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer

import pytest
import torch
from typer.testing import CliRunner

from lfo_cli.cli import app
from lfo_cli.wmil.config import WMILConfig
from lfo_cli.wmil.envs import make_task
from lfo_cli.wmil.parents import HTTPChatClient, LLMParent
from lfo_cli.wmil.trainer import train


class StubServer:
    """Answers /v1/chat/completions for pattern_echo. ``script`` is cycled per request:
    'ok' (correct JSON), 'prose' (correct JSON wrapped in prose), 'garbage' (no JSON), 'range' (reward 7),
    'missing' (no next_state), 'http500' (server error)."""

    def __init__(self, script, key=None):
        self.script, self.calls, self.lock = list(script), 0, threading.Lock()
        self.key, self.auth_seen = key, []  # key: every request must carry "Authorization: Bearer <key>"
        stub = self

        class Handler(BaseHTTPRequestHandler):
            def log_message(self, *args):
                pass

            def _authorised(self):
                stub.auth_seen.append(self.headers.get("Authorization"))
                if stub.key and self.headers.get("Authorization") != f"Bearer {stub.key}":
                    self._send(401, {"error": "invalid api key"})
                    return False
                return True

            def do_GET(self):
                if self._authorised():
                    self._send(200, {"object": "list", "data": [{"id": "stub"}]})

            def do_POST(self):
                if not self._authorised():
                    return
                body = json.loads(self.rfile.read(int(self.headers["Content-Length"])))
                prompt = body["messages"][-1]["content"]
                with stub.lock:
                    kind = stub.script[stub.calls % len(stub.script)]
                    stub.calls += 1
                if kind == "http500":
                    return self._send(500, {"error": "boom"})
                self._send(200, {"choices": [{"message": {"role": "assistant", "content": stub.reply(kind, prompt)}}]})

            def _send(self, code, obj):
                data = json.dumps(obj).encode()
                self.send_response(code)
                self.send_header("Content-Type", "application/json")
                self.send_header("Content-Length", str(len(data)))
                self.end_headers()
                self.wfile.write(data)

        self.server = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
        self.url = f"http://127.0.0.1:{self.server.server_address[1]}"
        threading.Thread(target=self.server.serve_forever, daemon=True).start()

    @staticmethod
    def reply(kind, prompt):
        if "start states" in prompt:  # task instances: targets 0..7, plus one illegal entry
            return json.dumps([{"target": i} for i in range(8)] + [{"target": 99}])
        target = int(re.search(r'"target": (\d+)', prompt).group(1))
        action = int(re.search(r"action=(\d+)", prompt).group(1))
        good = {"reward": int(target == action), "next_state": {"target": target}}
        return {"ok": json.dumps(good), "prose": "Sure! Here you go:\n```json\n" + json.dumps(good) + "\n```",
                "garbage": "I think the baby did well.", "range": json.dumps({**good, "reward": 7}),
                "missing": json.dumps({"reward": 1})}[kind]

    def close(self):
        self.server.shutdown()


@pytest.fixture
def stub():
    s = StubServer(["ok", "garbage", "prose", "range", "http500", "ok", "missing"])
    yield s
    s.close()


def test_llm_parent_validates_retries_caches_and_falls_back(stub):
    task = make_task("pattern_echo", 8)
    client = HTTPChatClient(stub.url, timeout=5)
    client.check_reachable()
    parent = LLMParent(task, client, max_retries=1)
    gen = torch.Generator().manual_seed(0)
    state = parent.reset(64, 2, gen)
    assert state.shape == (64, 1) and state.max() <= 7  # illegal instance 99 dropped and counted
    action = torch.randint(0, 8, (64,), generator=gen)
    nxt, reward = parent.step(state, action, 0)
    expected = (action == state[:, 0]).float()
    assert torch.equal(reward, expected)  # valid replies and fallbacks both give the rule's answer here
    assert torch.equal(nxt, state)
    c = parent.counts
    assert c["invalid_replies"] > 0 and c["transport_errors"] > 0 and c["invalid_instances"] >= 1
    calls_before = c["llm_calls"]
    parent.step(state, action, 0)  # identical queries: answered from the cache (except failed ones)
    n_unique = len(torch.unique(torch.cat([state, action.view(-1, 1)], 1), dim=0))
    assert c["cache_hits"] == n_unique and c["llm_calls"] == calls_before
    assert parent.stats()["parent/reward_agreement"] == 1.0


def test_training_with_llm_parent_over_http_completes(stub, tmp_path):
    result = CliRunner().invoke(app, ["wmil", "train", "--task", "pattern_echo", "--parent", "llm", "--parent-url", stub.url,
                                      "--steps", "40", "--num-envs", "32", "--log-every", "10", "--save-every", "20",
                                      "--out", str(tmp_path / "run"), "--no-progress", "--json"])
    assert result.exit_code == 0, result.output
    summary = json.loads((tmp_path / "run" / "summary.json").read_text())
    stats = summary["parent_stats"]
    assert stats["parent/invalid_replies"] > 0 and stats["parent/transport_errors"] > 0
    assert stats["parent/cache_hits"] > 0 and summary["steps"] == 40
    assert stub.calls > 0


def test_all_garbage_parent_never_crashes_training(tmp_path):
    s = StubServer(["garbage"])
    try:
        task = make_task("pattern_echo", 4)
        parent = LLMParent(task, HTTPChatClient(s.url, timeout=5), max_retries=0)
        cfg = WMILConfig(num_actions=4, steps=20, num_envs=16, log_every=10, save_every=10, parent="llm", eval_episodes=32)
        summary = train(cfg, tmp_path / "g", progress=False, quiet=True, parent=parent)
        st = summary["parent_stats"]
        assert st["parent/fallbacks"] > 0 and st["parent/invalid_replies"] == st["parent/llm_calls"] - 1  # the instance list is valid
    finally:
        s.close()


def test_unreachable_parent_url_exits_2_with_one_line(tmp_path):
    result = CliRunner().invoke(app, ["wmil", "train", "--parent", "llm", "--parent-url", "http://127.0.0.1:9",
                                      "--out", str(tmp_path / "x")])
    assert result.exit_code == 2
    lines = [ln for ln in result.output.splitlines() if ln.strip()]
    assert len(lines) == 1 and "unreachable" in lines[0]


SECRET = "sk-test-6f1d2c0a9b8e7d6c5b4a"


@pytest.mark.parametrize("env_name", [None, "MY_PARENT_KEY"])
def test_the_bearer_token_is_sent_and_never_written(tmp_path, monkeypatch, env_name):
    s = StubServer(["ok"], key=SECRET)
    try:
        monkeypatch.setenv(env_name or "OPENAI_API_KEY", SECRET)
        flag = ["--parent-api-key-env", env_name] if env_name else []
        result = CliRunner().invoke(app, ["wmil", "train", "--task", "pattern_echo", "--parent", "llm", "--parent-url",
                                          s.url, *flag, "--steps", "20", "--num-envs", "16", "--log-every", "10",
                                          "--save-every", "10", "--out", str(tmp_path / "run"), "--no-progress"])
        assert result.exit_code == 0, result.output
        assert s.calls > 0 and set(s.auth_seen) == {f"Bearer {SECRET}"}
        assert SECRET not in result.output
        files = [p for p in (tmp_path / "run").rglob("*") if p.is_file()]
        assert files and not [p for p in files if SECRET.encode() in p.read_bytes()]
    finally:
        s.close()


@pytest.mark.parametrize(("key", "needle"), [(None, "set $OPENAI_API_KEY"), ("sk-wrong-key-123", "was refused")])
def test_a_missing_or_refused_key_is_one_error_line_without_the_key(tmp_path, monkeypatch, key, needle):
    s = StubServer(["ok"], key=SECRET)
    try:
        monkeypatch.delenv("OPENAI_API_KEY", raising=False)
        if key:
            monkeypatch.setenv("OPENAI_API_KEY", key)
        result = CliRunner().invoke(app, ["wmil", "train", "--parent", "llm", "--parent-url", s.url,
                                          "--out", str(tmp_path / "x")])
        assert result.exit_code == 2
        lines = [ln for ln in result.output.splitlines() if ln.strip()]
        assert len(lines) == 1 and "401" in lines[0] and needle in lines[0], lines
        assert not key or key not in result.output
    finally:
        s.close()
