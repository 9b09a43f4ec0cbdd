"""A local stand-in for an OpenAI-compatible chat endpoint, for tests (no network).

It listens on 127.0.0.1 only (a free port), answers ``POST /v1/chat/completions`` with
one-token answers and ``top_logprobs``, and stops by itself: its loop handles at most
``max_requests`` requests and runs at most ``lifetime`` seconds, besides stopping when the
``with`` block ends.

The "model": the review's count of positive minus negative words gives the logit of
"positive" against "negative"; the probability mass left goes to a few filler tokens.
"""

from __future__ import annotations

import json
import math
import threading
import time
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer

POSITIVE = {"great", "good", "fun", "loved", "best", "wonderful"}
NEGATIVE = {"bad", "awful", "boring", "hated", "worst", "dull"}


def review_logprobs(prompt: str) -> dict[str, float]:
    """The stand-in's answer distribution for a prompt (what a test can compare with)."""
    review = prompt.split("Review:", 1)[-1].split("Sentiment:", 1)[0]
    words = [w.strip(".,!").lower() for w in review.split()]
    z = 0.3 + sum(w in POSITIVE for w in words) - sum(w in NEGATIVE for w in words)
    # p(positive) + p(negative) = 0.9, split by the logit z; fillers share the rest.
    p_pos = 0.9 / (1 + math.exp(-z))
    probs = {"positive": p_pos, "negative": 0.9 - p_pos, "Positive": 0.04, "neutral": 0.03, "The": 0.03}
    return {k: math.log(v) for k, v in probs.items()}


class StandIn:
    """``with StandIn(mode) as server:`` -> ``server.base_url``; ``server.requests`` counts requests.

    Modes: "ok"; "flaky" (each prompt first gets HTTP 503 ``fail_times`` times);
    "no_logprobs" (answers without log-probs); "bad_request" (HTTP 400 for every request);
    "echo_headers" (HTTP 400 whose body quotes the request's headers, as some gateways do);
    "drip" (a correct answer sent 8 bytes every 0.1 s: every socket read succeeds quickly,
    the whole answer takes seconds).
    """

    def __init__(self, mode: str = "ok", *, fail_times: int = 1, max_requests: int = 5000, lifetime: float = 60.0):
        self.mode = mode
        self.fail_times = fail_times
        self.max_requests = max_requests
        self.lifetime = lifetime
        self.requests = 0
        self.prompts: list[str] = []
        self._failures: dict[str, int] = {}
        self._lock = threading.Lock()
        self._stop = threading.Event()
        standin = self

        class Handler(BaseHTTPRequestHandler):
            def log_message(self, *args):  # keep test output clean
                pass

            def do_POST(self):
                body = json.loads(self.rfile.read(int(self.headers["Content-Length"])))
                status, payload = standin._respond(self.path, body, dict(self.headers))
                data = json.dumps(payload).encode()
                self.send_response(status)
                self.send_header("Content-Type", "application/json")
                self.send_header("Content-Length", str(len(data)))
                self.end_headers()
                if standin.mode == "drip":  # a slow server: a few bytes at a time, never idle long
                    for start in range(0, len(data), 8):
                        self.wfile.write(data[start : start + 8])
                        self.wfile.flush()
                        time.sleep(0.1)
                    return
                self.wfile.write(data)

        self._server = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
        self._server.timeout = 0.05
        self.base_url = f"http://127.0.0.1:{self._server.server_address[1]}/v1"

    def _respond(self, path: str, body: dict, headers: dict | None = None) -> tuple[int, dict]:
        prompt = body["messages"][-1]["content"]
        with self._lock:
            self.requests += 1
            self.prompts.append(prompt)
            failures = self._failures.get(prompt, 0)
            if self.mode == "flaky" and failures < self.fail_times:
                self._failures[prompt] = failures + 1
                return 503, {"error": {"message": "overloaded, try again"}}
        if path != "/v1/chat/completions":
            return 404, {"error": {"message": f"no route {path}"}}
        if self.mode == "echo_headers":  # a gateway that quotes the request in its error
            return 400, {"error": {"message": "unknown model", "request": {"headers": headers}}}
        if self.mode == "bad_request":
            return 400, {"error": {"message": "model not found"}}
        top = sorted(review_logprobs(prompt).items(), key=lambda kv: -kv[1])[: int(body.get("top_logprobs", 5))]
        answer = top[0][0]
        logprobs = None
        if self.mode != "no_logprobs" and body.get("logprobs"):
            entry = {
                "token": answer,
                "logprob": top[0][1],
                "top_logprobs": [{"token": t, "logprob": lp} for t, lp in top],
            }
            logprobs = {"content": [entry]}
        choice = {"index": 0, "message": {"role": "assistant", "content": answer}, "logprobs": logprobs}
        return 200, {"id": "standin", "object": "chat.completion", "model": body["model"], "choices": [choice]}

    def _loop(self) -> None:
        deadline = time.monotonic() + self.lifetime
        # Bounded: a number of requests and a lifetime, besides the stop flag.
        while not self._stop.is_set() and self.requests < self.max_requests and time.monotonic() < deadline:
            self._server.handle_request()

    def __enter__(self) -> StandIn:
        self._thread = threading.Thread(target=self._loop, daemon=True)
        self._thread.start()
        return self

    def __exit__(self, *exc) -> None:
        self._stop.set()
        self._thread.join(timeout=5)
        self._server.server_close()
