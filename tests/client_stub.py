"""A stub of the grading server's API (contract section 3) for the student client's tests.

A real HTTP server (http.server, one thread per request) on 127.0.0.1 and a free port, serving
canned JSON for the endpoints the client calls, and recording what it received. Knobs:
`drop_posts` (store an upload, then close the connection without answering, that many times),
`refuse` (the next uploads answer this error), `polls_before_done`, `passed`, `final_status`,
`page_size` and `list_answer` (GET /submissions in pages, or one list as before them), `repeat`,
and `raw` (a path's answer as these bytes, whatever they are: a hostile server's).
Used as a context manager, it is always shut down.
"""

from __future__ import annotations

import hashlib
import io
import json
import threading
import zipfile
from datetime import UTC, datetime, timedelta
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from urllib.parse import parse_qs, urlsplit

TOKEN = "tok-alice-0123456789"

EXERCISES = [
    {
        "id": "day49-data",
        "kind": "code",
        "title": {"en": "Data pipeline", "zh-TW": "資料管線"},
        "day": 49,
        "files": ["data.py"],
        "points": 10,
        "opens": None,
        "due": "2026-11-08T23:59:00+08:00",
        "closes": None,
        "open": True,
    },
    {
        "id": "day48-decoder",
        "kind": "code",
        "title": {"en": "Decoder", "zh-TW": "解碼器"},
        "day": 48,
        "files": ["attention.py", "norms.py", "positions.py", "gpt.py"],
        "points": 20,
        "open": True,
    },
]


def digest(files: dict[str, bytes]) -> str:
    """The gradebook's rule, written out again here so that the client's is checked against it."""
    h = hashlib.sha256()
    for name in sorted(files):
        h.update(name.encode() + b"\0" + files[name] + b"\0")
    return h.hexdigest()


class Stub:
    def __init__(self):
        self.lock = threading.Lock()
        self.exercises = [dict(e) for e in EXERCISES]
        self.uploads: list[dict] = []  # what was stored, in order
        self.posts: list[dict] = []  # every upload request that arrived (key, size)
        self.languages: list[str | None] = []  # the Accept-Language of every request
        self.polls: dict[int, int] = {}
        self.waits: list[str | None] = []  # the `wait` each poll asked for (the stub answers at once)
        self.drop_posts = 0
        self.refuse: tuple[int, dict, dict] | None = None  # status, error object, headers
        self.polls_before_done = 1
        self.passed = True
        self.final_status = "graded"
        self.report_extra = ""
        self.starter_members: dict[str, bytes] = {"data.py": b"def load():\n    pass\n"}
        self.status_rows: list[dict] | None = None
        self.page_size: int | None = None  # set: a page's size, whatever `limit` asks
        self.list_answer = False  # answer GET /submissions with one list, as before the pages
        self.list_queries: list[dict] = []  # the query of every GET /submissions
        self.repeat = False  # every upload's answer says it repeated the latest one
        self.raw: dict[str, bytes] = {}  # path (/api/v1/...) -> the JSON body answered, as it is
        self.course: dict | None = None  # /me's course (name, timezone); None: a server of before it
        self.oldest_only = False  # list oldest first whatever `order` asks (a server of before it)
        stub = self

        class Handler(BaseHTTPRequestHandler):
            def log_message(self, *args):  # quiet
                pass

            def do_GET(self):
                stub.handle(self, "GET")

            def do_POST(self):
                stub.handle(self, "POST")

        self.server = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
        self.server.daemon_threads = True
        self.url = f"http://127.0.0.1:{self.server.server_address[1]}"
        self.thread = threading.Thread(target=self.server.serve_forever, kwargs={"poll_interval": 0.05})

    def __enter__(self) -> Stub:
        self.thread.start()
        return self

    def __exit__(self, *exc) -> None:
        self.server.shutdown()
        self.server.server_close()
        self.thread.join(timeout=10)

    # -- answers ---------------------------------------------------------------------------------

    def handle(self, h: BaseHTTPRequestHandler, method: str) -> None:
        parts = urlsplit(h.path)
        path, query = parts.path, {k: v[0] for k, v in parse_qs(parts.query).items()}
        body = h.rfile.read(int(h.headers.get("Content-Length") or 0))
        self.languages.append(h.headers.get("Accept-Language"))
        if path == "/api/v1/health":
            return self.send(h, 200, {"status": "ok", "version": "stub"})
        if h.headers.get("Authorization") != f"Bearer {TOKEN}":
            return self.error(h, 401, "unauthorized", "unknown or revoked token")
        if path in self.raw:
            return self.send_bytes(h, 200, self.raw[path], "application/json")
        seg = path.removeprefix("/api/v1").strip("/").split("/")
        if method == "GET" and seg == ["me"]:
            me = {
                "learner": "alice",
                "name": "Alice",
                "role": "student",
                "late_days": {"total": 3, "spent": 1, "left": 2},
            }
            return self.send(h, 200, me if self.course is None else {**me, "course": self.course})
        if method == "GET" and seg == ["exercises"]:
            return self.send(h, 200, self.exercises)
        if method == "GET" and len(seg) == 3 and seg[0] == "exercises" and seg[2] == "starter":
            buf = io.BytesIO()
            with zipfile.ZipFile(buf, "w") as zf:
                for name, data in self.starter_members.items():
                    zf.writestr(name, data)
            return self.send_bytes(h, 200, buf.getvalue(), "application/zip")
        if method == "POST" and len(seg) == 3 and seg[0] == "exercises" and seg[2] == "submissions":
            return self.upload(h, seg[1], body, query)
        if method == "GET" and seg == ["submissions"]:
            with self.lock:
                subs = [
                    self.submission(u)
                    for u in self.uploads
                    if query.get("exercise") in (None, u["exercise"])
                ]
                self.list_queries.append(query)
                if query.get("order") == "newest" and not self.oldest_only:
                    subs.reverse()
            if self.list_answer:  # a server of before the pages: one list, all of them
                return self.send(h, 200, subs)
            start = int(query.get("cursor") or 0)  # the stub's cursor: an index (the server's is opaque)
            end = start + (self.page_size or int(query.get("limit") or 50))
            return self.send(
                h, 200, {"items": subs[start:end], "next": str(end) if end < len(subs) else None}
            )
        if method == "GET" and len(seg) >= 2 and seg[0] == "submissions" and seg[1].isdigit():
            with self.lock:
                found = [u for u in self.uploads if u["id"] == int(seg[1])]
                if not found:
                    return self.error(h, 404, "not-found", "no such submission")
                upload = found[0]
                if len(seg) == 2:
                    self.polls[upload["id"]] = self.polls.get(upload["id"], 0) + 1
                    self.waits.append(query.get("wait"))
                    if self.polls[upload["id"]] >= self.polls_before_done:
                        upload["status"] = self.final_status
                    return self.send(h, 200, self.submission(upload))
            if seg[2:] == ["report"]:
                text = (
                    f"REPORT {upload['id']} format={query.get('format')} lang={query.get('lang')} "
                    f"passed={self.passed}{self.report_extra}\n"
                )
                return self.send_bytes(h, 200, text.encode(), "text/plain; charset=utf-8")
        if method == "GET" and seg == ["status"]:
            rows = self.status_rows or [
                {
                    "exercise": e["id"],
                    "deadlines": {"opens": None, "due": e.get("due"), "closes": None},
                    "submissions": sum(u["exercise"] == e["id"] for u in self.uploads),
                    "counted": None,
                    "late": None,
                    "score": None,
                    "max_score": e["points"],
                    "tokens_left": 3,
                    "next_submission_at": None,
                }
                for e in self.exercises
                if query.get("exercise") in (None, e["id"])
            ]
            return self.send(h, 200, rows)
        return self.error(h, 404, "not-found", f"no route {method} {path}")

    def upload(self, h, exercise: str, body: bytes, query: dict) -> None:
        key = h.headers.get("Idempotency-Key")
        with self.lock:
            self.posts.append({"key": key, "size": len(body), "query": query})
            if self.refuse is not None:
                status, error, headers = self.refuse
                return self.send(h, status, {"error": error}, headers)
            replay = [u for u in self.uploads if key and u["key"] == key]
            if replay:
                upload, status = replay[0], 200
            else:
                with zipfile.ZipFile(io.BytesIO(body)) as zf:
                    files = {i.filename: zf.read(i) for i in zf.infolist()}
                upload, status = (
                    {
                        "id": 100 + len(self.uploads),
                        "key": key,
                        "exercise": exercise,
                        "files": files,
                        "status": "queued",
                        "received_at": datetime.now(UTC).isoformat(),
                    },
                    202,
                )
                self.uploads.append(upload)
            if self.drop_posts > 0:  # stored (or found), and the answer lost on the way
                self.drop_posts -= 1
                h.close_connection = True
                return None
            return self.send(h, status, self.submission(upload))

    def submission(self, u: dict) -> dict:
        graded = u["status"] == "graded"
        return {
            "id": u["id"],
            "exercise": u["exercise"],
            "learner": "alice",
            "status": u["status"],
            "received_at": u["received_at"],
            "digest": digest(u["files"]),
            "files": [{"name": n, "size": len(d)} for n, d in sorted(u["files"].items())],
            "late": {"minutes": 90.0, "days": 1, "penalty": 0.1},
            "late_days_spent": 0,
            "counted": True,
            "score": (10.0 if self.passed else 4.0) if graded else None,
            "max_score": 10.0,
            "passed": self.passed if graded else None,
            "grade": None,
            "repeat": self.repeat,
        }

    def send(self, h, status: int, data, headers: dict | None = None) -> None:
        self.send_bytes(h, status, json.dumps(data).encode(), "application/json", headers)

    def send_bytes(self, h, status: int, body: bytes, ctype: str, headers: dict | None = None) -> None:
        h.send_response(status)
        h.send_header("Content-Type", ctype)
        h.send_header("Content-Length", str(len(body)))
        for k, v in (headers or {}).items():
            h.send_header(k, v)
        h.end_headers()
        h.wfile.write(body)

    def error(self, h, status: int, code: str, message: str, headers: dict | None = None) -> None:
        self.send(h, status, {"error": {"code": code, "message": message, "field": None}}, headers)


def retry_in(seconds: int) -> dict:
    return {"Retry-After": str(seconds)}


def later(minutes: int) -> str:
    return (datetime.now(UTC) + timedelta(minutes=minutes)).isoformat()


def isolate_client(tmp_path, monkeypatch):
    """A clean client environment: its own config folder, no GRADER_* or locale from the caller,
    and retries at once (no sleeping in tests)."""
    from grader.client import api as client_api

    monkeypatch.setenv("XDG_CONFIG_HOME", str(tmp_path / "config"))
    for var in ("GRADER_SERVER", "GRADER_TOKEN", "LANGUAGE", "LC_ALL", "LC_MESSAGES"):
        monkeypatch.delenv(var, raising=False)
    monkeypatch.setenv("LANG", "C.UTF-8")
    monkeypatch.setattr(client_api, "BACKOFF_SECONDS", 0.0)
    return tmp_path
