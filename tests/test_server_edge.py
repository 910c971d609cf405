"""The HTTP edge of a real `grader serve` on loopback, attacked the way issue 28 found it open:
stalled uploads, half-open connections under a soft limit of 1,024 open files, a signed-out
cookie used again, a quiz starter that imported torch, "not yours" told from "missing", a zip of
50,000 members. One server for the module, started with its open files limited to 1,024 (soft
and hard: raising the soft limit cannot help it) and short deadlines, so nothing here waits long.

Every connection is made from a 127.0.0.x address of its own choosing (all loopback on Linux),
which is how one test plays many clients. Every socket has a timeout and is closed in `finally`.
Each test prints what it measured.
"""

from __future__ import annotations

import io
import re
import socket
import statistics
import time
import zipfile
from concurrent.futures import ThreadPoolExecutor
from contextlib import ExitStack
from pathlib import Path

import httpx
import pytest
from server_harness import QUIZ, Server, issue_token, quiz_sheet, upload, wait_graded

from grader.limits import FD_RESERVE, MAX_CONNECTIONS, UPLOAD_BYTES
from grader.service.edge import Edge, max_connections, refusal, refusal_bytes

OPEN_FILES = 1_024  # the server's RLIMIT_NOFILE, soft and hard
HEAD_SECONDS, BODY_SECONDS, KEEP_ALIVE = 2.0, 3.0, 1.0
PER_CLIENT = 64
SLACK = 6.0  # on top of a deadline: a loaded 2-core machine
MiB = 1 << 20


@pytest.fixture(scope="module")
def edge(tmp_path_factory):
    folder = tmp_path_factory.mktemp("edge")
    db = folder / "gradebook.db"
    tokens = {who: issue_token(db, who) for who in ("alice", "bob")}
    args = ["--head-timeout", HEAD_SECONDS, "--body-timeout", BODY_SECONDS, "--keep-alive", KEEP_ALIVE]
    args += ["--connections-per-client", PER_CLIENT]
    server = Server(db, folder / "server.log", workers=1, args=map(str, args), open_files=OPEN_FILES)
    with server:
        yield {"server": server, "tokens": tokens, "db": db}
    log = server.log()
    assert "Too many open files" not in log, log[-3000:]


def connect(server: Server, source: str, timeout: float = 15) -> socket.socket:
    """A TCP connection to the server from loopback address `source`."""
    host, port = server.url.removeprefix("http://").split(":")
    sock = socket.socket(socket.AF_INET, socket.SOCK_STREAM)
    sock.settimeout(timeout)
    sock.bind((source, 0))
    sock.connect((host, int(port)))
    return sock


def until_closed(sock: socket.socket) -> bytes:
    """What the server sends until it closes the connection (a reset ends it too)."""
    got = b""
    try:
        while len(got) < MiB and (part := sock.recv(65536)):
            got += part
    except ConnectionResetError:
        pass
    return got


def status_of(answer: bytes) -> int:
    found = re.match(rb"HTTP/1\.1 (\d{3}) ", answer)
    return int(found.group(1)) if found else 0


def upload_head(server: Server, token: str | None, length: int) -> bytes:
    host = server.url.removeprefix("http://")
    auth = f"Authorization: Bearer {token}\r\n" if token else ""
    return (
        f"POST /api/v1/exercises/{QUIZ}/submissions HTTP/1.1\r\nHost: {host}\r\n{auth}"
        f"Content-Type: application/zip\r\nContent-Length: {length}\r\n\r\n"
    ).encode()


def health(server: Server, timeout: float = 5) -> tuple[int, float]:
    start = time.monotonic()
    r = httpx.get(server.url + "/api/v1/health", timeout=timeout)
    return r.status_code, time.monotonic() - start


# -- the edge's core --------------------------------------------------------------------------------


def test_the_caps_refuse_over_the_servers_then_over_the_clients():
    edge = Edge(per_client=2, max_connections=3)
    assert refusal(edge, open_in_all=0, open_of_client=0) is None
    assert refusal(edge, open_in_all=2, open_of_client=1) is None
    assert refusal(edge, open_in_all=2, open_of_client=2) == "client"
    assert refusal(edge, open_in_all=3, open_of_client=0) == "server"
    assert refusal(Edge(per_client=0, max_connections=3), 2, 1_000) is None  # 0: no cap per client
    assert max_connections(1_024) == 1_024 - FD_RESERVE
    assert max_connections(1 << 20) == MAX_CONNECTIONS
    assert max_connections(100) == 1  # a tiny limit still serves
    answer = refusal_bytes("client")
    assert status_of(answer) == 429 and b"connection: close" in answer and b'"rate-limited"' in answer
    assert status_of(refusal_bytes("server")) == 503


# -- a body is read only for a valid token, into a file, and only for so long --------------------


@pytest.mark.parametrize("token", [None, "not-a-token"])
def test_an_upload_without_a_valid_token_is_401_before_a_byte_of_its_body(edge, token):
    server = edge["server"]
    with connect(server, "127.0.0.1", timeout=10) as sock:
        start = time.monotonic()
        sock.sendall(upload_head(server, token, UPLOAD_BYTES - 1))  # the headers alone
        answer = until_closed(sock)
        took = time.monotonic() - start
    print(f"401 and closed {took * 1000:.0f} ms after the headers")
    assert status_of(answer) == 401, answer[:300]
    assert b'"unauthorized"' in answer and b"connection: close" in answer.lower()
    assert took < 5


def stalled_uploads(server: Server, token: str | None, count: int, source: str) -> dict:
    """`count` uploads at once, each sending UPLOAD_BYTES less 64 KiB of its declared UPLOAD_BYTES
    and then nothing; the web process's peak RSS growth, and when each connection was closed."""
    body = b"\0" * (UPLOAD_BYTES - 64 * 1024)
    before = server.rss_bytes()
    peak = before
    start = time.monotonic()

    def one(_):
        with connect(server, source, timeout=BODY_SECONDS + HEAD_SECONDS + 3 * SLACK) as sock:
            try:
                sock.sendall(upload_head(server, token, UPLOAD_BYTES))
                for at in range(0, len(body), 256 * 1024):
                    sock.sendall(body[at : at + 256 * 1024])
            except (BrokenPipeError, ConnectionResetError):  # answered and closed mid-body
                pass
            answer = until_closed(sock)
            return status_of(answer), time.monotonic() - start

    with ThreadPoolExecutor(count) as pool:
        futures = [pool.submit(one, i) for i in range(count)]
        while not all(f.done() for f in futures):
            peak = max(peak, server.rss_bytes())
            time.sleep(0.05)
        results = [f.result() for f in futures]
    return {
        "growth": peak - before,
        "statuses": sorted({s for s, _ in results}),
        "closed_after": max(t for _, t in results),
    }


def test_forty_stalled_anonymous_uploads_cost_no_memory_and_are_closed_at_once(edge):
    found = stalled_uploads(edge["server"], None, 40, "127.0.0.2")
    print(
        f"40 anonymous stalled uploads: RSS +{found['growth'] / MiB:.1f} MiB at the peak, "
        f"the last closed after {found['closed_after']:.2f} s, statuses {found['statuses']}"
    )
    assert found["growth"] < 50 * MiB
    assert found["closed_after"] < SLACK
    assert set(found["statuses"]) <= {401, 0}  # 0: the reset came before the answer was read


def test_stalled_uploads_with_a_token_are_spooled_to_disk_and_closed_at_the_body_deadline(edge):
    server = edge["server"]
    found = stalled_uploads(server, edge["tokens"]["alice"], 20, "127.0.0.3")
    print(
        f"20 signed-in stalled uploads: RSS +{found['growth'] / MiB:.1f} MiB at the peak, "
        f"the last closed after {found['closed_after']:.2f} s (body deadline {BODY_SECONDS} s)"
    )
    assert found["growth"] < 50 * MiB
    assert found["closed_after"] < BODY_SECONDS + SLACK
    with server.client(edge["tokens"]["alice"]) as alice:
        listed = alice.get("/submissions").json()
    assert not (listed["items"] if isinstance(listed, dict) else listed), "a half-sent upload is not stored"


# -- half-open connections under 1,024 open files -------------------------------------------------


def half_open(server: Server, stack: ExitStack, sources: list[str], per_source: int) -> list[socket.socket]:
    """Connections that send half a request's headers and then nothing."""
    host = server.url.removeprefix("http://")
    socks = []
    for source in sources:
        for _ in range(per_source):
            sock = stack.enter_context(connect(server, source, timeout=HEAD_SECONDS + 3 * SLACK))
            try:
                sock.sendall(f"GET /api/v1/health HTTP/1.1\r\nHost: {host}\r\nX-Slow: ".encode())
            except (BrokenPipeError, ConnectionResetError):  # refused at accept already
                pass
            socks.append(sock)
    return socks


def closed_by_server(socks: list[socket.socket], wait: float) -> tuple[int, dict[int, int]]:
    """How many of `socks` the server closed within `wait` seconds in all, and their statuses."""
    deadline = time.monotonic() + wait
    closed, statuses = 0, {}
    for sock in socks:
        sock.settimeout(max(0.01, deadline - time.monotonic()))
        try:
            answer = until_closed(sock)
        except TimeoutError:
            continue
        closed += 1
        statuses[status_of(answer)] = statuses.get(status_of(answer), 0) + 1
    return closed, statuses


def test_a_thousand_half_open_connections_from_one_address_leave_health_answering(edge):
    server = edge["server"]
    with ExitStack() as stack:
        socks = half_open(server, stack, ["127.0.0.4"], 1_100)
        time.sleep(0.5)  # the server accepts what is in its backlog
        status, took = health(server)
        fds = server.open_fds()
        refused, statuses = closed_by_server(socks, 1.0)  # over the cap: answered at accept
        print(
            f"1,100 half-open from one address: /health {status} in {took * 1000:.0f} ms, "
            f"server fds {fds}, {refused} refused at once {statuses}"
        )
        assert status == 200 and took < 2
        assert fds < OPEN_FILES
        assert refused >= 1_100 - PER_CLIENT - 20
        assert set(statuses) <= {429, 0}
        closed, _ = closed_by_server(socks, HEAD_SECONDS + SLACK)  # the rest: at the head deadline
        print(f"... and {closed} of all closed by the head deadline ({HEAD_SECONDS} s)")
        assert closed == len(socks)


def test_a_thousand_half_open_connections_from_many_addresses_never_exhaust_the_open_files(edge):
    server = edge["server"]
    sources = [f"127.0.0.{i}" for i in range(10, 30)]  # 20 addresses x 55: each under its cap
    with ExitStack() as stack:
        start = time.monotonic()
        socks = half_open(server, stack, sources, 55)
        time.sleep(0.3)
        during, during_took = 0, 0.0
        try:
            during, during_took = health(server)  # the server is full: 503 at once, or 200
        except httpx.HTTPError as exc:
            pytest.fail(f"/health did not answer while 1,100 connections were half-open: {exc!r}")
        fds = server.open_fds()
        closed, statuses = closed_by_server(socks, HEAD_SECONDS + SLACK)
        after, after_took = health(server)
        print(
            f"1,100 half-open from 20 addresses: /health {during} in {during_took * 1000:.0f} ms while "
            f"they were open, server fds {fds} (limit {OPEN_FILES}, connections at most "
            f"{OPEN_FILES - FD_RESERVE}); {closed} closed by {time.monotonic() - start:.1f} s {statuses}; "
            f"/health {after} in {after_took * 1000:.0f} ms after"
        )
        assert during in (200, 503) and during_took < 2
        assert fds < OPEN_FILES
        assert closed == len(socks)
        assert after == 200


def test_connections_over_the_servers_cap_are_answered_503_at_accept(tmp_path):
    args = ["--max-connections", "40", "--head-timeout", "30"]
    server = Server(tmp_path / "gradebook.db", tmp_path / "server.log", workers=1, args=args)
    with server, ExitStack() as stack:
        socks = half_open(server, stack, ["127.0.0.5"], 60)
        refused, statuses = closed_by_server(socks, 2.0)
        print(f"60 half-open, 40 allowed: {refused} refused at once {statuses}")
        assert refused >= 15 and set(statuses) <= {503, 0}
        assert statuses.get(503, 0) >= 1


# -- sessions, starters, lookups, archives --------------------------------------------------------


def form_csrf(html: str) -> str:
    found = re.search(r'name="csrf" value="([^"]+)"', html)
    assert found, html[:2000]
    return found.group(1)


def signed_in(server: Server, token: str) -> httpx.Client:
    browser = httpx.Client(base_url=server.url, timeout=30, follow_redirects=False)
    form = browser.get("/")
    r = browser.post("/login", data={"csrf": form_csrf(form.text), "token": token})
    assert r.status_code == 303, r.text[:500]
    return browser


def test_a_signed_out_session_cookie_is_refused_by_the_server(edge):
    server, token = edge["server"], edge["tokens"]["bob"]
    browser, other_tab = signed_in(server, token), signed_in(server, token)
    try:
        cookie = browser.cookies["grader_session"]
        assert browser.get("/api/v1/me").status_code == 200
        assert other_tab.get("/api/v1/me").status_code == 200
        home = browser.get("/")
        r = browser.post("/logout", data={"csrf": form_csrf(home.text)})
        assert r.status_code == 303
        with httpx.Client(base_url=server.url, timeout=30, cookies={"grader_session": cookie}) as thief:
            again = thief.get("/api/v1/me")
        print(f"the signed-out cookie again: {again.status_code}")
        assert again.status_code == 401, again.text[:300]
        assert other_tab.get("/api/v1/me").status_code == 401, "signing out ends the token's every session"
    finally:
        browser.close()
        other_tab.close()
    again_in = signed_in(server, token)  # and signing in again works
    try:
        assert again_in.get("/api/v1/me").status_code == 200
    finally:
        again_in.close()


def torch_mapped(pid: int) -> list[str]:
    """The files of torch (libtorch_cpu.so, its extension modules) mapped into process `pid`."""
    maps = Path(f"/proc/{pid}/maps").read_text(encoding="utf-8", errors="replace")
    return sorted({line.split()[-1] for line in maps.splitlines() if "torch" in line.split()[-1]})


def test_a_quiz_starter_never_loads_torch_into_the_web_process(edge):
    server = edge["server"]
    assert server.proc is not None
    before = server.rss_bytes()
    assert torch_mapped(server.proc.pid) == []
    with server.client(edge["tokens"]["alice"]) as alice:
        r = alice.get(f"/exercises/{QUIZ}/starter")
    assert r.status_code == 200, r.text[:300]
    sheet = zipfile.ZipFile(io.BytesIO(r.content)).read("answers.toml").decode()
    assert "# learner: alice" in sheet and "[answers]" in sheet
    growth = server.rss_bytes() - before
    print(
        f"quiz starter: web process RSS +{growth / MiB:.1f} MiB, "
        f"torch mapped: {torch_mapped(server.proc.pid)}"
    )
    assert torch_mapped(server.proc.pid) == []
    assert growth < 100 * MiB
    with server.client(edge["tokens"]["alice"]) as alice:  # a graded quiz and its report: no torch either
        sent = upload(alice, QUIZ, quiz_sheet("torch-free")).json()["id"]
        wait_graded(alice, [sent], timeout=240)
        assert alice.get(f"/submissions/{sent}/report").status_code == 200
    assert torch_mapped(server.proc.pid) == []


def test_another_learners_upload_and_a_missing_one_take_the_same_queries(edge):
    from sqlalchemy import event

    from grader.service.service import Service
    from grader.store.accounts import authenticate

    server = edge["server"]
    with server.client(edge["tokens"]["alice"]) as alice:
        r = upload(alice, QUIZ, quiz_sheet("alice"))
        assert r.status_code == 202, r.text[:300]
        alices = r.json()["id"]
    service = Service.open(str(edge["db"]))
    try:
        bob = authenticate(service.gradebook, edge["tokens"]["bob"])
        assert bob is not None
        statements: list[str] = []

        def record(conn, cursor, statement, parameters, context, executemany):
            statements.append(statement)

        event.listen(service.gradebook.engine, "before_cursor_execute", record)
        assert service.submission(bob, alices) is None
        others, statements[:] = list(statements), []
        assert service.submission(bob, alices + 1000) is None
        missing = list(statements)
        event.remove(service.gradebook.engine, "before_cursor_execute", record)
    finally:
        service.close()
    assert others == missing and len(others) == 1, (others, missing)
    with server.client(edge["tokens"]["bob"]) as client:  # measured, for the record; not asserted

        def median_ms(upload_id: int) -> float:
            times = []
            for _ in range(30):
                start = time.perf_counter()
                assert client.get(f"/submissions/{upload_id}").status_code == 404
                times.append(time.perf_counter() - start)
            return statistics.median(times) * 1000

        print(
            f"404 for another's: {median_ms(alices):.2f} ms, "
            f"for a missing one: {median_ms(alices + 1000):.2f} ms"
        )


def zip_of_zips(count: int) -> bytes:
    inner = io.BytesIO()
    zipfile.ZipFile(inner, "w").close()  # an empty zip: its end record alone
    outer = io.BytesIO()
    with zipfile.ZipFile(outer, "w", zipfile.ZIP_STORED) as zf:
        for i in range(count):
            zf.writestr(f"z{i}.zip", inner.getvalue())
    return outer.getvalue()


def test_a_zip_of_fifty_thousand_zips_is_refused_by_its_directory_count(edge):
    body = zip_of_zips(50_000)
    assert len(body) <= UPLOAD_BYTES
    with edge["server"].client(edge["tokens"]["bob"]) as bob:
        start = time.monotonic()
        r = upload(bob, QUIZ, body)
        took = time.monotonic() - start
        listed = bob.get("/submissions").json()
    print(f"a zip of 50,000 zips ({len(body) / MiB:.1f} MiB): {r.status_code} in {took * 1000:.0f} ms")
    assert r.status_code == 422 and r.json()["error"]["code"] == "bad-upload", r.text[:300]
    assert "50000 members" in r.json()["error"]["message"]
    assert took < 2
    assert not (listed["items"] if isinstance(listed, dict) else listed)
