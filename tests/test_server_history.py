"""Issue 28, item 4: bounded history, on a real `grader serve` (127.0.0.1) and the real CLI.

An upload that repeats the learner's latest one (same files, same exercise version) is answered
with it: nothing stored, no rate-limit token or late day spent. Lists are pages of summaries
(`GET /api/v1/submissions?limit=&cursor=`), a learner's stored uploads of an exercise are capped,
and `grader history` pages through 500. The 500 (and the cap's 200) are written straight into
the gradebook through the store's own functions, each with a stored grade run: grading them is
not the point here, and the running server would otherwise grade them.
"""

from __future__ import annotations

import json
import re
import time
import uuid
from datetime import UTC, datetime, timedelta
from pathlib import Path

import httpx
import pytest
from sqlalchemy import func, select

from grader.client.api import Api
from grader.client.errors import ServerFailure
from grader.limits import (
    HOME_SUBMISSIONS,
    SUBMISSIONS_PAGE,
    SUBMISSIONS_PAGE_MAX,
    SUBMISSIONS_PER_EXERCISE,
)
from grader.models import CheckResult, Grade
from grader.store import Gradebook, Incoming, Outcome
from grader.store.gradebook import store_run, store_submissions
from grader.store.queue import Queue, TooManyUploads
from grader.store.schema import ExerciseVersion, Learner, UploadRow
from tests.client_stub import TOKEN as STUB_TOKEN
from tests.client_stub import Stub
from tests.server_harness import (
    EXERCISES,
    QUIZ,
    Server,
    hard_timeout,
    issue_token,
    quiz_sheet,
    runs_per_upload,
    upload,
    wait_graded,
    zipped,
)
from tests.server_harness import Learner as Machine

START_LIMIT, TEST_LIMIT = 180, 300  # seconds: the server's start and tokens; one test
PAGE_SECONDS = 0.5  # one page of a learner with 500 submissions (their grades 40 KiB each)
RITA, ROSA, HANA, CORA = "rita-history", "rosa-history", "hana-history", "cora-history"
MANY = 500
BIG_MESSAGE = "x" * (40 * 1024)  # evidence a list must not read: 20 MB over the 500


def toml_time(when: datetime) -> str:
    return when.astimezone(UTC).strftime("%Y-%m-%dT%H:%M:%SZ")


@pytest.fixture(scope="module")
def server(tmp_path_factory):
    """The quiz open for a week, 3 uploads per hour (so a spent token shows), one worker."""
    folder = tmp_path_factory.mktemp("history")
    now = datetime.now(UTC)
    course = folder / "course.toml"
    course.write_text(
        f"""late_days = 2

[exercises.{QUIZ}]
opens = {toml_time(now - timedelta(days=1))}
due = {toml_time(now + timedelta(days=7))}
closes = {toml_time(now + timedelta(days=7))}
counts = "last-on-time"
rate = {{ capacity = 3, refill_minutes = 60 }}
""",
        encoding="utf-8",
    )
    db = folder / "gradebook.sqlite"
    with hard_timeout(START_LIMIT):
        tokens = {who: issue_token(db, who) for who in (RITA, ROSA, HANA, CORA)}
        srv = Server(db, folder / "server.log", course=course, workers=1).start()
    srv.tokens, srv.folder = tokens, folder
    try:
        yield srv
    finally:
        srv.stop()


def uploads_of(db: Path, learner: str) -> int:
    book = Gradebook(str(db))
    try:
        with book.sessions() as s:
            return s.scalar(
                select(func.count())
                .select_from(UploadRow)
                .join(Learner, UploadRow.learner_id == Learner.id)
                .where(Learner.key == learner)
            )
    finally:
        book.close()


def graded_uploads(db: Path, learner: str, count: int, tag: str) -> list[int]:
    """`count` distinct quiz uploads of `learner`, each with a final grade run stored first, so
    the queue marks its job done at once (the server grades nothing): their upload ids."""
    book = Gradebook(str(db))
    try:
        with book.sessions() as s:
            version = s.scalar(
                select(ExerciseVersion.id)
                .where(ExerciseVersion.name == QUIZ)
                .order_by(ExerciseVersion.id.desc())
            )
        sheets = [
            Incoming(learner=learner, files={"answers.toml": f"# {tag} {i}\n".encode()}) for i in range(count)
        ]
        with book.sessions() as s:
            for sub in store_submissions(s, QUIZ, sheets):
                grade = Grade(
                    exercise=QUIZ,
                    passed=False,
                    score=float(sub.id % 10),
                    max_score=10.0,
                    checks=[
                        CheckResult(
                            id="q1",
                            passed=False,
                            points=0,
                            max_points=10,
                            rule="quiz",
                            day=45,
                            message=BIG_MESSAGE,
                        )
                    ],
                )
                store_run(s, sub.id, version, Outcome(status="graded", grade=grade, worker="test"))
            s.commit()
        queue = Queue(book)
        made = [queue.submit(learner, QUIZ, version, sheet, max_stored=10**6) for sheet in sheets]
        assert all(u.status == "graded" and u.created for u in made)
        return [u.id for u in made]
    finally:
        book.close()


def all_pages(client: httpx.Client, limit: int | None = None) -> tuple[list[int], int]:
    """Every id the pages of GET /submissions?exercise=QUIZ give, in order; and how many pages."""
    ids, cursor, pages = [], None, 0
    while True:
        params = {
            "exercise": QUIZ,
            **({"limit": limit} if limit else {}),
            **({"cursor": cursor} if cursor else {}),
        }
        page = client.get("/submissions", params=params).raise_for_status().json()
        ids += [item["id"] for item in page["items"]]
        pages += 1
        cursor = page["next"]
        if cursor is None:
            return ids, pages
        assert pages <= MANY, "the pages never end"


# -- repeats ----------------------------------------------------------------------------------


def test_eighty_identical_uploads_are_one_stored_submission(server):
    with hard_timeout(TEST_LIMIT), server.client(server.tokens[RITA]) as api:
        sheet = quiz_sheet("rita")
        answers = [upload(api, QUIZ, sheet, key=str(uuid.uuid4())) for _ in range(80)]
        first = answers[0]
        assert first.status_code == 202 and first.json()["repeat"] is False, first.text
        assert {(r.status_code, r.json()["id"], r.json()["repeat"]) for r in answers[1:]} == {
            (200, first.json()["id"], True)
        }
        assert uploads_of(server.db, RITA) == 1
        (graded,) = wait_graded(api, [first.json()["id"]]).values()
        assert graded["status"] == "graded"
        again = upload(api, QUIZ, sheet, key=str(uuid.uuid4()))  # graded now: still the same one
        assert (again.status_code, again.json()["id"], again.json()["repeat"]) == (200, graded["id"], True)
        assert again.json()["score"] == graded["score"] and again.json()["grade"] == graded["grade"]
        runs = runs_per_upload(str(server.db))
        assert runs[graded["id"]] == ("done", 1) and uploads_of(server.db, RITA) == 1  # graded once
        (status,) = api.get("/status", params={"exercise": QUIZ}).json()
        assert status["submissions"] == 1 and status["tokens_left"] == 2  # one token of 3 spent, once
        # only the latest is repeated: another sheet, then the first again, are two new uploads
        other = upload(api, QUIZ, quiz_sheet("rita-2"), key=str(uuid.uuid4()))
        back = upload(api, QUIZ, sheet, key=str(uuid.uuid4()))
        assert (other.status_code, back.status_code) == (202, 202) and back.json()["id"] > other.json()["id"]
        assert uploads_of(server.db, RITA) == 3


def test_grader_submit_says_it_was_a_repeat(server, tmp_path):
    with hard_timeout(TEST_LIMIT):
        machine = Machine(tmp_path / "home")
        login = machine.run("login", "--server", server.url, "--token", server.tokens[ROSA])
        assert login.returncode == 0, login.stderr
        work = tmp_path / "work"
        work.mkdir()
        solution = (EXERCISES / QUIZ / "solution" / "answers.toml").read_text(encoding="utf-8")
        (work / "answers.toml").write_text(f"{solution}\n# rosa\n", encoding="utf-8")
        first = machine.run("submit", QUIZ, str(work))
        again = machine.run("submit", QUIZ, str(work))
        zh = machine.run("submit", QUIZ, str(work), "--lang", "zh-TW")
        assert first.returncode == again.returncode == zh.returncode == 0, (first.stderr, again.stderr)
        assert "not stored again" not in first.stderr
        shown = re.search(r"submission (\d+):", first.stdout)
        assert shown, first.stdout
        assert f"same as your latest submission {shown.group(1)} of {QUIZ}: not stored again" in again.stderr
        assert "不會再存一次" in zh.stderr and "Traceback" not in zh.stderr


def test_a_repeat_of_a_dead_letter_is_graded_again_and_repeats_spend_no_late_day(book):
    """At the store: the server failed the latest upload (a dead letter, refunded): the same files
    again are a new upload, graded anew. A repeat never writes the late-day ledger."""
    version = book.exercise_version(QUIZ, "v1", 10.0, "quiz")
    queue = Queue(book, "test:1:a")
    sheet = Incoming(learner="?", files={"answers.toml": b"# a\n"})
    first = queue.submit("lea", QUIZ, version, sheet, late_days_spent=1)
    again = queue.submit("lea", QUIZ, version, sheet, late_days_spent=1)
    assert (again.id, again.created, again.repeat) == (first.id, False, True)
    assert queue.repeat_of("lea", QUIZ, version, first.digest).id == first.id
    assert queue.repeat_of("lea", QUIZ, version + 1, first.digest) is None  # another version: graded again
    assert queue.late_days_spent("lea") == 1
    for _ in range(3):  # JOB_ATTEMPTS server-side failures: dead, refunded
        (lease,) = queue.lease()
        queue.fail(lease, "the worker died")
    assert queue.upload(first.id).status == "failed"
    retried = queue.submit("lea", QUIZ, version, sheet)
    assert retried.created and not retried.repeat and retried.id != first.id and retried.status == "queued"
    assert queue.stored("lea", QUIZ) == 1  # the dead letter does not count towards the cap
    with pytest.raises(TooManyUploads):
        queue.submit(
            "lea", QUIZ, version, Incoming(learner="?", files={"answers.toml": b"# b\n"}), max_stored=1
        )


def test_pages_and_siblings_at_the_store(book):
    """Keyset pages by id, both ways, on both backends; and the siblings that decide what counts."""
    version = book.exercise_version(QUIZ, "v1", 10.0, "quiz")
    queue = Queue(book, "test:1:a")
    ids = {
        who: [
            queue.submit(who, QUIZ, version, Incoming(learner="?", files={"answers.toml": b"# %d\n" % i})).id
            for i in range(5)
        ]
        for who in ("ann", "ben")
    }
    seen, after = [], None
    while True:
        page, more = queue.page("ann", QUIZ, after=after, limit=2)
        seen += [u.id for u in page]
        if not more:
            break
        after = page[-1].id
    assert seen == ids["ann"]
    newest, more = queue.page("ben", None, limit=3, newest_first=True)
    assert [u.id for u in newest] == ids["ben"][::-1][:3] and more
    older, more = queue.page("ben", None, after=newest[-1].id, limit=3, newest_first=True)
    assert [u.id for u in older] == ids["ben"][::-1][3:] and not more
    siblings = queue.siblings({("ann", QUIZ), ("ben", QUIZ), ("nobody", QUIZ)})
    assert {pair: [u.id for u in found] for pair, found in siblings.items()} == {
        ("ann", QUIZ): ids["ann"],
        ("ben", QUIZ): ids["ben"],
        ("nobody", QUIZ): [],
    }
    assert queue.pending("ann") == 5 and queue.stored("ben", QUIZ) == 5


# -- pages --------------------------------------------------------------------------------------


def test_a_learner_with_500_submissions_gets_pages_fast_each_once(server):
    with hard_timeout(TEST_LIMIT):
        ids = graded_uploads(server.db, HANA, MANY, "hana")
        with server.client(server.tokens[HANA]) as api:
            times = []
            for _ in range(3):
                started = time.perf_counter()
                r = api.get("/submissions", params={"exercise": QUIZ})
                times.append(time.perf_counter() - started)
            print(
                f"\nGET /submissions, {MANY} stored: {', '.join(f'{t * 1000:.0f} ms' for t in times)}, "
                f"{len(r.content):,} bytes"
            )
            assert r.status_code == 200 and min(times) < PAGE_SECONDS, times
            page = r.json()
            assert [i["id"] for i in page["items"]] == ids[:SUBMISSIONS_PAGE] and page["next"]
            item = page["items"][0]
            assert "grade" not in item and "checks" not in json.dumps(item) and BIG_MESSAGE not in r.text
            assert {"score", "max_score", "status", "received_at", "graded_at", "digest"} <= set(item)
            full = api.get(f"/submissions/{item['id']}").json()  # the whole grade on its own URL
            assert full["grade"]["checks"][0]["message"] == BIG_MESSAGE
            assert (full["score"], full["max_score"], full["counted"]) == (
                item["score"],
                item["max_score"],
                item["counted"],
            )
            assert sum(i["counted"] for i in page["items"]) <= 1
            for limit in (None, 7, SUBMISSIONS_PAGE_MAX):
                started = time.perf_counter()
                seen, pages = all_pages(api, limit)
                print(f"limit={limit}: {pages} pages in {time.perf_counter() - started:.2f} s")
                assert seen == ids, "every submission once, oldest first"
            assert api.get("/submissions", params={"limit": SUBMISSIONS_PAGE_MAX + 1}).status_code == 422
            assert api.get("/submissions", params={"limit": 0}).status_code == 422
            for cursor in ("nonsense", "YWZ0ZXI6LTE", "YWZ0ZXI6OTk5OTk5OTk5OTk5OTk5OTk5OTk5OQ", "%%%"):
                bad = api.get("/submissions", params={"cursor": cursor})
                assert bad.status_code == 422 and bad.json()["error"]["field"] == "cursor", bad.text
        with server.client(server.tokens[RITA]) as other:  # a cursor of hana's pages shows rita only hers
            theirs = other.get("/submissions", params={"cursor": page["next"], "limit": SUBMISSIONS_PAGE_MAX})
            assert {i["learner"] for i in theirs.json()["items"]} <= {RITA}


def test_the_home_page_lists_the_newest_page(server):
    with hard_timeout(TEST_LIMIT):
        if uploads_of(server.db, HANA) < MANY:
            graded_uploads(server.db, HANA, MANY, "hana")
        with server.client(server.tokens[HANA]) as api:
            newest = api.get("/submissions", params={"exercise": QUIZ, "limit": SUBMISSIONS_PAGE_MAX}).json()
            while newest["next"]:
                newest = api.get(
                    "/submissions", params={"cursor": newest["next"], "limit": SUBMISSIONS_PAGE_MAX}
                ).json()
            last = newest["items"][-1]["id"]
        with httpx.Client(base_url=server.url, timeout=60) as web:
            form = web.get("/")
            csrf = re.search(r'name="csrf" value="([^"]+)"', form.text)
            assert csrf, form.text[:2000]
            signed = web.post(
                "/login",
                data={"csrf": csrf.group(1), "token": server.tokens[HANA]},
                headers={"Origin": server.url},
            )
            assert signed.status_code in (302, 303), signed.text[:2000]
            started = time.perf_counter()
            home = web.get("/")
            print(f"\nthe home page, {MANY} submissions: {(time.perf_counter() - started) * 1000:.0f} ms")
        listed = [int(i) for i in re.findall(r'data-submission="(\d+)"', home.text)]
        assert home.status_code == 200 and listed == list(range(last, last - HOME_SUBMISSIONS, -1))


def test_grader_history_pages_through_500(server, tmp_path):
    with hard_timeout(TEST_LIMIT):
        if uploads_of(server.db, HANA) < MANY:
            graded_uploads(server.db, HANA, MANY, "hana")
        machine = Machine(tmp_path / "home")
        assert machine.run("login", "--server", server.url, "--token", server.tokens[HANA]).returncode == 0
        started = time.perf_counter()
        text = machine.run("history", QUIZ)
        print(f"\ngrader history, {MANY} submissions: {time.perf_counter() - started:.2f} s")
        assert text.returncode == 0, text.stderr
        assert len(re.findall(r"^[ *] \d+ ", text.stdout, re.M)) == MANY
        data = machine.run("history", QUIZ, "--format", "json")
        assert data.returncode == 0, data.stderr
        rows = json.loads(data.stdout)
        assert len(rows) == MANY and len({r["id"] for r in rows}) == MANY and "listed" not in data.stderr


def test_the_cap_refuses_a_new_upload_and_still_answers_a_repeat(server):
    with hard_timeout(TEST_LIMIT):
        ids = graded_uploads(server.db, CORA, SUBMISSIONS_PER_EXERCISE, "cora")
        with server.client(server.tokens[CORA]) as api:
            refused = upload(api, QUIZ, quiz_sheet("cora-new"), key=str(uuid.uuid4()))
            assert refused.status_code == 409 and refused.json()["error"]["code"] == "closed", refused.text
            assert f"{SUBMISSIONS_PER_EXERCISE} submissions of {QUIZ}" in refused.json()["error"]["message"]
            assert "Retry-After" not in refused.headers
            zh = upload(api, QUIZ, quiz_sheet("cora-new"), key=str(uuid.uuid4()))
            zh_text = api.post(
                f"/exercises/{QUIZ}/submissions?lang=zh-TW",
                content=quiz_sheet("cora-new"),
                headers={"Content-Type": "application/zip"},
            ).json()["error"]["message"]
            assert zh.status_code == 409 and "上限" in zh_text
            latest = zipped({"answers.toml": f"# cora {SUBMISSIONS_PER_EXERCISE - 1}\n"})
            repeat = upload(api, QUIZ, latest, key=str(uuid.uuid4()))
            assert (repeat.status_code, repeat.json()["id"], repeat.json()["repeat"]) == (200, ids[-1], True)
        assert uploads_of(server.db, CORA) == SUBMISSIONS_PER_EXERCISE  # nothing stored, nothing deleted


# -- the client's side, against tests/client_stub.py ---------------------------------------------


def stub_with(count: int) -> Stub:
    stub = Stub()
    stub.uploads = [
        {
            "id": 100 + i,
            "key": None,
            "exercise": "day49-data",
            "files": {"data.py": b"# %d\n" % i},
            "status": "graded",
            "received_at": datetime.now(UTC).isoformat(),
        }
        for i in range(count)
    ]
    return stub


def test_the_client_reads_the_pages_in_order_and_stops_at_its_bound():
    with stub_with(7) as stub, Api(stub.url, STUB_TOKEN) as api:
        stub.page_size = 3
        history = api.submissions("day49-data")
        assert [s.id for s in history.items] == list(range(100, 107)) and history.complete
        assert [r["id"] for r in history.raw] == list(range(100, 107))
        assert [q.get("cursor") for q in stub.list_queries] == [None, "3", "6"]
        stub.list_queries.clear()
        stub.page_size = None  # as many as asked
        capped = api.submissions("day49-data", most=5)
        assert [s.id for s in capped.items] == list(range(100, 105)) and not capped.complete
        assert [q["limit"] for q in stub.list_queries] == ["5"]  # never more than it keeps
        stub.list_answer = True  # a server of before the pages: its one list is all of them
        old = api.submissions("day49-data")
        assert [s.id for s in old.items] == list(range(100, 107)) and old.complete


def test_a_page_the_client_does_not_understand_is_the_servers_failure():
    with stub_with(SUBMISSIONS_PAGE_MAX + 1) as stub, Api(stub.url, STUB_TOKEN) as api:
        stub.page_size = SUBMISSIONS_PAGE_MAX + 1  # more than a page may hold, and than was asked
        with pytest.raises(ServerFailure):
            api.submissions("day49-data", most=SUBMISSIONS_PAGE_MAX + 1)
