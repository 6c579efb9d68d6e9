"""A fake OpenAI-compatible chat-completions server on 127.0.0.1, with faults.

A `policy(request_body) -> {"content": str, "tool_calls": [{"name", "arguments"}]}` decides each
reply. Plain and streamed (SSE) responses, tool calls and `usage` are served as the OpenAI API
does. Faults are consumed one per request, in order: "429", "500", "timeout" (a 504 after
`slow_seconds`, past the client's timeout), "malformed" (the policy's first tool call gets
arguments that are not JSON), "context" (a 400 refusing the conversation as too long, as vLLM and
OpenAI do), None (no fault). A policy may also answer `{"refuse": (status, payload)}`: the server
refuses that conversation as a real one would (llama.cpp's 500 on bad history, a moderation 403).
Every reported usage is recorded, so a test can check a ledger against it.
"""

from __future__ import annotations

import json
import threading
import time
import uuid
from collections.abc import Callable
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer

from trainergym.agents.reference import ReferenceAgent


def count_tokens(text: str) -> int:
    return max(1, len(text) // 4)


class FakeOpenAI:
    def __init__(self, policy: Callable[[dict], dict], faults: list[str] | None = None, slow_seconds: float = 3.0,
                 models: tuple[str, ...] = ("fake-model",)):
        self.policy, self.faults, self.slow_seconds, self.models = policy, list(faults or []), slow_seconds, models
        self.requests: list[dict] = []
        self.usage: list[dict] = []  # what was reported for each completed request
        self.lock = threading.Lock()
        fake = self

        class Handler(BaseHTTPRequestHandler):
            def log_message(self, *args):
                pass

            def do_GET(self):  # noqa: N802
                if self.path.rstrip("/").endswith("/models"):
                    self._json(200, {"object": "list", "data": [{"id": m, "object": "model"} for m in fake.models]})
                else:
                    self._json(404, {"error": {"message": "not found"}})

            def do_POST(self):  # noqa: N802
                body = json.loads(self.rfile.read(int(self.headers.get("content-length", 0))) or b"{}")
                with fake.lock:
                    fake.requests.append(body)
                    fault = fake.faults.pop(0) if fake.faults else None
                if fault == "429":
                    return self._json(429, {"error": {"message": "rate limited", "type": "rate_limit_exceeded"}},
                                      {"retry-after": "0"})
                if fault == "500":
                    return self._json(500, {"error": {"message": "upstream exploded"}})
                if fault == "context":
                    return self._json(400, {"error": {"message": "This model's maximum context length is 32768 tokens.",
                                                      "type": "invalid_request_error", "code": "context_length_exceeded"}})
                if fault == "timeout":
                    time.sleep(fake.slow_seconds)
                    return self._json(504, {"error": {"message": "gateway timeout"}})
                reply = fake.policy(body)
                if "refuse" in reply:
                    return self._json(*reply["refuse"])
                calls = [dict(c) for c in reply.get("tool_calls") or []]
                if fault == "malformed" and calls:
                    calls[0]["arguments"] = '{"path": "unterminated'
                usage = {"prompt_tokens": sum(count_tokens(json.dumps(m)) for m in body.get("messages", [])),
                         "completion_tokens": count_tokens(reply.get("content") or "") + sum(count_tokens(c["arguments"]) for c in calls)}
                cap = body.get("max_tokens") or body.get("max_completion_tokens")
                cut = bool(cap) and usage["completion_tokens"] > cap
                if cut:  # as a real server does: stop at max_tokens, mid-argument if need be
                    usage["completion_tokens"] = cap
                    for c in calls:
                        c["arguments"] = c["arguments"][: cap * 4]
                usage["total_tokens"] = usage["prompt_tokens"] + usage["completion_tokens"]
                with fake.lock:
                    fake.usage.append(usage)
                tool_calls = [{"id": f"call_{uuid.uuid4().hex[:8]}", "type": "function",
                               "function": {"name": c["name"], "arguments": c["arguments"]}} for c in calls]
                finish = "length" if cut else "tool_calls" if tool_calls else "stop"
                model = body.get("model", fake.models[0])
                if body.get("stream"):
                    return self._stream(model, reply.get("content") or "", tool_calls, finish, usage,
                                        (body.get("stream_options") or {}).get("include_usage", False))
                message = {"role": "assistant", "content": reply.get("content") or None}
                if tool_calls:
                    message["tool_calls"] = tool_calls
                self._json(200, {"id": f"chatcmpl-{uuid.uuid4().hex[:12]}", "object": "chat.completion",
                                 "created": int(time.time()), "model": model, "usage": usage,
                                 "choices": [{"index": 0, "message": message, "finish_reason": finish}]})

            def _stream(self, model, content, tool_calls, finish, usage, include_usage):
                self.send_response(200)
                self.send_header("content-type", "text/event-stream")
                self.end_headers()
                base = {"id": f"chatcmpl-{uuid.uuid4().hex[:12]}", "object": "chat.completion.chunk",
                        "created": int(time.time()), "model": model}

                def send(choices, **extra):
                    self.wfile.write(f"data: {json.dumps({**base, 'choices': choices, **extra})}\n\n".encode())

                send([{"index": 0, "delta": {"role": "assistant", "content": ""}, "finish_reason": None}])
                for i in range(0, len(content), 5):
                    send([{"index": 0, "delta": {"content": content[i:i + 5]}, "finish_reason": None}])
                for k, call in enumerate(tool_calls):
                    args = call["function"]["arguments"]
                    send([{"index": 0, "delta": {"tool_calls": [{"index": k, "id": call["id"], "type": "function",
                                                                  "function": {"name": call["function"]["name"], "arguments": ""}}]},
                           "finish_reason": None}])
                    for i in range(0, len(args), 7):
                        send([{"index": 0, "delta": {"tool_calls": [{"index": k, "function": {"arguments": args[i:i + 7]}}]},
                               "finish_reason": None}])
                send([{"index": 0, "delta": {}, "finish_reason": finish}])
                if include_usage:
                    send([], usage=usage)
                self.wfile.write(b"data: [DONE]\n\n")

            def _json(self, status, payload, headers=None):
                data = json.dumps(payload).encode()
                self.send_response(status)
                self.send_header("content-type", "application/json")
                self.send_header("content-length", str(len(data)))
                for k, v in (headers or {}).items():
                    self.send_header(k, v)
                self.end_headers()
                self.wfile.write(data)

        self.server = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
        self.server.daemon_threads = True
        self.url = f"http://127.0.0.1:{self.server.server_address[1]}/v1"
        threading.Thread(target=self.server.serve_forever, daemon=True).start()

    def close(self) -> None:
        self.server.shutdown()
        self.server.server_close()

    def __enter__(self) -> FakeOpenAI:
        return self

    def __exit__(self, *exc) -> None:
        self.close()


def reference_policy(family="calc_chain"):
    """Plays the reference job as tool calls; a call that came back as an error is made again."""
    plan = []
    actions = ReferenceAgent()._actions(family)
    for action in actions:
        plan.append(action)
        if action["name"] == "submit_job":
            break

    def policy(body):
        done = sum(1 for m in body["messages"] if m["role"] == "tool" and not m["content"].startswith("error"))
        action = plan[min(done, len(plan) - 1)]
        return {"content": "", "tool_calls": [{"name": action["name"], "arguments": json.dumps(action["arguments"])}]}

    return policy
