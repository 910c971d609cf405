"""Issue 13 end to end: a course of three learners and an instructor on a real `grader serve`
(a subprocess on 127.0.0.1), driven by the real CLI (`grader login`, `starter --server`,
`submit --wait`, `status`, `history`) and by plain HTTP where a learner could go around the CLI.

The server serves a private edition (GRADER_EXERCISES_DIR: a copy of exercises/ with unique
strings planted in a hidden test, in a quiz key and in solutions); every answer a learner gets
(bodies, headers, unzipped starters, every report format and language, the pages, the CLI's
output) is recorded and searched for them. The tests share one server and run in file order
(pytest's): the last ones move learners' dates with extensions.
"""

from __future__ import annotations

import io
import json
import re
import shutil
import time
import uuid
import zipfile
from contextlib import contextmanager
from datetime import UTC, datetime, timedelta
from pathlib import Path

import httpx
import pytest

from tests.server_harness import (
    CODE,
    EXERCISES,
    QUIZ,
    Learner,
    Server,
    clean_env,
    hard_timeout,
    issue_token,
    upload,
    zipped,
)

START_LIMIT, TEST_LIMIT = 180, 300  # seconds: the tokens and the server's start; one test. A hang fails
A, B, C, PROF = "ana-7d1e", "ben-93fa", "cai-05b2", "prof-e2e"
NAMES = {A: "Ana Example", B: "Ben Example", C: "Cai Example", PROF: "Prof Example"}
PLANTS = {  # where each string is planted in the private edition
    "hidden test": f"PLANTED-HIDDEN-{uuid.uuid4().hex}",
    "key": f"PLANTED-KEY-{uuid.uuid4().hex}",
    "solution": f"PLANTED-SOLUTION-{uuid.uuid4().hex}",
}
EDITION_TITLE = "(private edition)"
AFTER_DUE = ("mha-has-no-future-leak", "causal-attention-has-no-future-leak")
HIDDEN_MESSAGE = "changing tokens after position"  # the after-due check's own message
FORMATS = ("text", "json", "html", "markdown")


def toml_time(when: datetime) -> str:
    return when.astimezone(UTC).strftime("%Y-%m-%dT%H:%M:%SZ")


def plant_edition(folder: Path) -> Path:
    """exercises/ copied, with PLANTS in a hidden test (on the line that fails the after-due
    check, where a traceback would show it), in the quiz key and in both solutions; and a title
    that says which edition the server serves."""
    edition = folder / "edition"
    shutil.copytree(EXERCISES, edition, ignore=shutil.ignore_patterns("__pycache__"))
    hidden = edition / CODE / "hidden" / "test_attention.py"
    text = hidden.read_text(encoding="utf-8")
    line = '        fail(msg("changing tokens after position {t} changed outputs at positions <= {t}: "'
    assert text.count(line) == 1
    text = text.replace(line, f"{line}  # {PLANTS['hidden test']}")
    hidden.write_text(f"# {PLANTS['hidden test']}\n{text}", encoding="utf-8")
    key = edition / QUIZ / "key.toml"
    key.write_text(
        f"# {PLANTS['key']}\n"
        + key.read_text(encoding="utf-8").replace("[[questions]]", f"# {PLANTS['key']}\n[[questions]]", 1),
        encoding="utf-8",
    )
    for solution in (
        edition / CODE / "solution" / "attention.py",
        edition / QUIZ / "solution" / "answers.toml",
    ):
        solution.write_text(
            f"# {PLANTS['solution']}\n" + solution.read_text(encoding="utf-8"), encoding="utf-8"
        )
    meta = edition / CODE / "exercise.toml"
    text = meta.read_text(encoding="utf-8")
    title = re.search(r'^en = "([^"]*)"', text, re.M)
    assert title, "exercise.toml has an English title"
    meta.write_text(
        text.replace(title.group(0), f'en = "{title.group(1)} {EDITION_TITLE}"', 1), encoding="utf-8"
    )
    return edition


def write_course(path: Path, now: datetime) -> Path:
    """day45-attention due two days and an hour ago (late uploads taken, 10 % a started day),
    B's due moved a week ahead by the file's extension; the quiz open for a week with one
    submission per 10 hours; day48-quiz not open yet; day49-quiz closed."""
    t = lambda **kw: toml_time(now + timedelta(**kw))  # noqa: E731
    path.write_text(
        f"""name = "LLM from scratch (e2e)"
timezone = "Asia/Taipei"
late_days = 2

[exercises.{CODE}]
opens = {t(days=-10)}
due = {t(days=-2, hours=-1)}
closes = {t(days=10)}
counts = "last-on-time"
late = {{ grace_minutes = 15, penalty_per_day = 0.10, max_penalty = 0.50 }}
visibility = {{ default = "visible", checks = {{ {", ".join(f'"{c}" = "after_due"' for c in AFTER_DUE)} }} }}

[exercises.{QUIZ}]
opens = {t(days=-1)}
due = {t(days=7)}
closes = {t(days=7)}
counts = "best"
rate = {{ capacity = 1, refill_minutes = 600 }}

[exercises.day48-quiz]
opens = {t(days=1)}
due = {t(days=8)}

[exercises.day49-quiz]
opens = {t(days=-9)}
due = {t(days=-2)}
closes = {t(days=-1)}

[[extensions]]
learner = "{B}"
exercise = "{CODE}"
due = {t(days=7)}
closes = {t(days=10)}
reason = "e2e: a week more"
""",
        encoding="utf-8",
    )
    return path


class Recorder:
    """Every answer a learner got: bodies (zips opened), headers, the CLI's stdout and stderr."""

    def __init__(self):
        self.seen: list[tuple[str, str]] = []

    def response(self, who: str, r: httpx.Response) -> None:
        r.read()
        label = f"{who}: {r.request.method} {r.request.url} -> {r.status_code}"
        self.seen.append((label, "\n".join(f"{k}: {v}" for k, v in r.headers.items())))
        self.seen.append((label, r.content.decode("utf-8", "replace")))
        if r.content[:4] == b"PK\x03\x04":
            with zipfile.ZipFile(io.BytesIO(r.content)) as zf:
                for name in zf.namelist():
                    self.seen.append((f"{label} [{name}]", zf.read(name).decode("utf-8", "replace")))

    def cli(self, who: str, args, proc) -> None:
        self.seen.append((f"{who}: grader {' '.join(map(str, args))}", proc.stdout + proc.stderr))

    def containing(self, needle: str) -> list[str]:
        return [label for label, text in self.seen if needle in text]


class Course:
    def __init__(self, server: Server, tokens: dict[str, str], homes: Path, recorder: Recorder):
        self.server, self.tokens, self.recorder = server, tokens, recorder
        self.learners = {who: Learner(homes / who) for who in (A, B, C)}
        self.uploads: dict[str, int] = {}  # learner -> their graded upload

    def cli(self, who: str, *args, timeout: float = 300):
        proc = self.learners[who].run(*args, timeout=timeout)
        self.recorder.cli(who, args, proc)
        assert "Traceback" not in proc.stderr, proc.stderr
        return proc

    def api(self, who: str) -> httpx.Client:
        recorder = self.recorder if who != PROF else None
        hooks = {"response": [lambda r: recorder.response(who, r)]} if recorder else {}
        return self.server.client(self.tokens[who], event_hooks=hooks)

    @contextmanager
    def browser(self, who: str):
        """A signed-in browser session (the sign-in form, its CSRF token, the session cookie)."""
        hooks = {"response": [lambda r: self.recorder.response(who, r)]} if who != PROF else {}
        web = httpx.Client(base_url=self.server.url, timeout=60, event_hooks=hooks)
        form = web.get("/")
        csrf = re.search(r'name="csrf" value="([^"]+)"', form.text)
        assert form.status_code == 200 and csrf, form.text[:2000]
        r = web.post(
            "/login",
            data={"csrf": csrf.group(1), "token": self.tokens[who]},
            headers={"Origin": self.server.url},
        )
        assert r.status_code in (302, 303), (r.status_code, r.text[:2000])
        try:
            yield web
        finally:
            web.close()


@pytest.fixture(scope="module")
def course(tmp_path_factory):
    folder = tmp_path_factory.mktemp("e2e")
    edition = plant_edition(folder)
    now = datetime.now(UTC)
    env = clean_env(GRADER_EXERCISES_DIR=str(edition))
    db = folder / "gradebook.db"
    server = Server(db, folder / "serve.log", course=write_course(folder / "course.toml", now), env=env)
    try:
        with hard_timeout(START_LIMIT):
            tokens = {
                who: issue_token(db, who, "instructor" if who == PROF else "student", NAMES[who], env=env)
                for who in (A, B, C, PROF)
            }
            server.start()
        c = Course(server, tokens, folder / "homes", Recorder())
        c.now, c.folder, c.db = now, folder, db
        yield c
    finally:
        server.stop()


@pytest.fixture(autouse=True)
def bounded():
    with hard_timeout(TEST_LIMIT):
        yield


def submission_json(course: Course, who: str, upload_id: int) -> dict:
    with course.api(who) as api:
        return api.get(f"/submissions/{upload_id}").raise_for_status().json()


def checks_of(sub: dict) -> dict[str, dict]:
    return {c["id"]: c for c in sub["grade"]["checks"]}


# -- the course, through the CLI ------------------------------------------------------------------


def test_each_learner_logs_in_gets_the_starter_submits_and_waits_for_the_report(course, tmp_path):
    from grader.catalog.exercises import load_exercise
    from grader.catalog.mutants import apply_mutant, load_mutants
    from grader.catalog.quiz import pose, starter_text

    for who in (A, B, C):
        proc = course.cli(who, "login", "--server", course.server.url, "--token", course.tokens[who])
        assert proc.returncode == 0, proc.stderr
        assert who in proc.stdout and "student" in proc.stdout
        login = course.learners[who].home / ".config" / "gpt-bughunt-grader" / "login.json"
        assert login.stat().st_mode & 0o777 == 0o600

    # A: the exercise's own solution (from the public sample: A's files hold no planted string)
    work = {who: course.learners[who].home / "work" for who in (A, B, C)}
    for who, exercise in ((A, CODE), (B, CODE), (C, QUIZ)):
        proc = course.cli(who, "starter", exercise, work[who], "--server", course.server.url)
        assert proc.returncode == 0, proc.stderr
    starter = (EXERCISES / CODE / "starter" / "attention.py").read_bytes()
    assert (work[A] / "attention.py").read_bytes() == starter == (work[B] / "attention.py").read_bytes()
    shutil.copy(EXERCISES / CODE / "solution" / "attention.py", work[A] / "attention.py")
    # B: a mutant that leaks the future (fails the after-due checks)
    (work[B] / "attention.py").unlink()
    mutant = next(m for m in load_mutants() if m.id == "no-causal-mask")
    apply_mutant(mutant, CODE, tmp_path / "mutant")
    shutil.copy(tmp_path / "mutant" / "attention.py", work[B] / "attention.py")
    # C: their own quiz variant, answered right
    sheet = (work[C] / "answers.toml").read_text(encoding="utf-8")
    assert sheet == starter_text(load_exercise(QUIZ), C)
    answers = {p.item.id: p.question.answer for p in pose(QUIZ, C)}
    for qid, answer in answers.items():
        assert f'\n{qid} = ""\n' in sheet
        sheet = sheet.replace(f'\n{qid} = ""\n', f"\n{qid} = {json.dumps(answer)}\n")
    (work[C] / "answers.toml").write_text(sheet, encoding="utf-8")

    expected = {A: (CODE, 0), B: (CODE, 1), C: (QUIZ, 0)}
    for who, (exercise, code) in expected.items():
        proc = course.cli(who, "submit", exercise, work[who], "--wait", timeout=600)
        assert proc.returncode == code, (who, proc.returncode, proc.stdout, proc.stderr)
        found = re.search(r"submission (\d+)", proc.stderr)
        assert found, proc.stderr
        course.uploads[who] = int(found.group(1))
        assert "digest (SHA-256)" in proc.stderr
        assert ("attention.py" if exercise == CODE else "answers.toml") in proc.stderr
        assert ("NOT PASSED" in proc.stdout) == (code != 0), proc.stdout  # the text report
    for who, (exercise, code) in expected.items():
        sub = submission_json(course, who, course.uploads[who])
        assert sub["status"] == "graded" and sub["learner"] == who and sub["exercise"] == exercise
        assert sub["passed"] is (code == 0)

    # the JSON report on stdout, as a file would get it; the same files again are that very
    # submission, a repeat (issue 28): not stored again
    proc = course.cli(A, "submit", CODE, work[A], "--wait", "--format", "json", timeout=600)
    assert proc.returncode == 0, proc.stderr
    assert json.loads(proc.stdout)["exercise"] == CODE
    assert f"latest submission {course.uploads[A]} of {CODE}: not stored again" in proc.stderr


def test_status_and_history(course):
    for who, exercise in ((A, CODE), (B, CODE), (C, QUIZ)):
        proc = course.cli(who, "status")
        assert proc.returncode == 0, proc.stderr
        assert CODE in proc.stdout and QUIZ in proc.stdout
        proc = course.cli(who, "history", exercise)
        assert proc.returncode == 0, proc.stderr
        assert re.search(rf"\*\s+{course.uploads[who]}\b", proc.stdout) or who == A, proc.stdout
        proc = course.cli(who, "history", exercise, "--format", "json")
        assert proc.returncode == 0, proc.stderr
        mine = json.loads(proc.stdout)
        assert mine and {s["learner"] for s in mine} == {who}
        assert course.uploads[who] in {s["id"] for s in mine}
    # A sent the same files twice, one submission (the second was a repeat): late, and it counts
    history = json.loads(course.cli(A, "history", CODE, "--format", "json").stdout)
    assert [(s["id"], s["counted"]) for s in history] == [(course.uploads[A], True)]
    status = json.loads(course.cli(C, "status", QUIZ, "--format", "json").stdout)
    assert status[0]["counted"] == course.uploads[C] and status[0]["tokens_left"] == 0
    # the course's clock (timezone = "Asia/Taipei"), the late days left, the next submission
    table = course.cli(C, "status", "--lang", "zh-TW")
    assert table.returncode == 0, table.stderr
    assert re.search(r"\d{4}-\d\d-\d\d \d\d:\d\d \+08:00", table.stdout) and " UTC" not in table.stdout
    assert re.search(r"剩餘遲交額度：\d 天，共 2 天", table.stdout), table.stdout
    assert f"{QUIZ}：目前沒有繳交次數了" in table.stdout  # capacity 1, spent
    # grader report: the latest report of an exercise, as the learner may see it now
    report = course.cli(A, "report", CODE, "--format", "json")
    assert report.returncode in (0, 1), report.stderr
    assert json.loads(report.stdout)["exercise"] == CODE
    assert f"submission {course.uploads[A]} of {CODE}, received " in report.stderr


# -- visibility, lateness, the rate limit ------------------------------------------------------------


def test_before_due_an_after_due_check_shows_only_title_rule_and_result(course):
    sub = submission_json(course, B, course.uploads[B])  # B's due: a week ahead (the extension)
    checks = checks_of(sub)
    for cid in AFTER_DUE:
        c = checks[cid]
        assert c["passed"] is False and c["title"] and c["rule"] == "causal-mask"
        assert not c.get("message") and not c.get("evidence") and not c.get("symptoms") and not c.get("curve")
    shown = checks["mha-matches-reference"]  # a visible failing check keeps its explanation
    assert shown["passed"] is False and shown["message"]
    assert not any(d.get("check") in AFTER_DUE for d in sub["grade"]["diagnosis"])
    with course.api(B) as api:
        for fmt in FORMATS:
            for lang in ("en", "zh-TW"):
                r = api.get(f"/submissions/{course.uploads[B]}/report", params={"format": fmt, "lang": lang})
                assert r.status_code == 200, r.text
                assert HIDDEN_MESSAGE not in r.text, (fmt, lang)
    # the instructor sees everything, before anyone's due
    with course.api(PROF) as api:
        full = checks_of(api.get(f"/submissions/{course.uploads[B]}").raise_for_status().json())
    assert HIDDEN_MESSAGE in full["mha-has-no-future-leak"]["message"]


def test_a_late_submission_gets_the_course_penalty(course):
    sub = submission_json(course, A, course.uploads[A])  # due 2 days 1 hour ago, 15 min of grace
    assert sub["late"]["days"] == 3 and sub["late"]["penalty"] == pytest.approx(0.30)
    assert sub["passed"] is True and sub["max_score"] == 35
    assert sub["score"] == pytest.approx(35 * 0.70)
    with course.api(A) as api:
        text = api.get(f"/submissions/{course.uploads[A]}/report").text
    assert "late" in text.lower()
    on_time = submission_json(course, C, course.uploads[C])
    assert on_time["late"]["penalty"] == 0 and on_time["score"] == on_time["max_score"]


def test_the_rate_limit_answers_429_with_retry_after_and_submit_exits_3(course):
    work = course.learners[C].home / "work"
    proc = course.cli(C, "submit", QUIZ, work, "--wait")  # the same files: a repeat, even at the limit
    assert proc.returncode == 0 and "not stored again" in proc.stderr, (proc.stdout, proc.stderr)
    sheet = work / "answers.toml"
    sheet.write_text(sheet.read_text(encoding="utf-8") + "\n# once more\n", encoding="utf-8")
    proc = course.cli(C, "submit", QUIZ, work, "--wait")
    assert proc.returncode == 3, (proc.stdout, proc.stderr)
    assert "next submission is possible at" in proc.stderr, proc.stderr
    from tests.server_harness import upload, zipped

    with course.api(C) as api:
        r = upload(api, QUIZ, zipped({"answers.toml": (work / "answers.toml").read_bytes()}))
        assert r.status_code == 429 and r.json()["error"]["code"] == "rate-limited", r.text
        wait = int(r.headers["Retry-After"])
        assert 0 < wait <= 600 * 60
        assert len(api.get("/submissions", params={"exercise": QUIZ}).json()["items"]) == 1  # nothing stored
    # not open yet, and closed: refused for now, exit 3
    for exercise, says in (("day48-quiz", "next submission is possible at"), ("day49-quiz", "no longer")):
        proc = course.cli(C, "submit", exercise, work, "--wait")
        assert proc.returncode == 3, (exercise, proc.stdout, proc.stderr)
        assert says in proc.stderr, proc.stderr


# -- A cannot see B ---------------------------------------------------------------------------------


def b_data(course: Course) -> list[str]:
    sub = submission_json(course, PROF, course.uploads[B])
    return [B, NAMES[B], sub["digest"]]


def test_learner_a_cannot_reach_b_by_any_route(course):
    import sqlite3

    with sqlite3.connect(course.db) as db:
        (b_job,) = db.execute("SELECT id FROM jobs WHERE upload_id = ?", (course.uploads[B],)).fetchone()
    secret = b_data(course)
    values = {"upload_id": course.uploads[B], "job_id": b_job, "exercise": CODE, "learner": B}
    missing = {"upload_id": 987654, "job_id": 987654, "exercise": CODE, "learner": "nobody-here"}
    with course.api(A) as api:
        spec = api.get("/openapi.json").raise_for_status().json()
        routes = [(m.upper(), p) for p, ops in spec["paths"].items() for m in ops]
        assert len(routes) >= 14, routes
        tried = 0
        for method, path in routes:
            if method == "POST" and path.endswith("/exercises/{exercise}/submissions"):
                continue  # A's own upload: made by the CLI above
            params = re.findall(r"{(\w+)}", path)
            assert set(params) <= set(values), (path, params)
            url = path.removeprefix("/api/v1")
            body = {"learner": B, "exercise": CODE, "due": toml_time(course.now + timedelta(days=30))}
            query = {"learner": B, "exercise": CODE} if method == "GET" else {}
            kw = {"params": query, **({"json": body} if method == "POST" else {})}
            r = api.request(method, url.format(**values), **kw)
            tried += 1
            for needle in secret:
                assert needle not in r.text, (method, path, r.status_code, needle)
            if {"upload_id", "job_id", "learner"} & set(params):
                assert r.status_code in (403, 404), (method, path, r.status_code, r.text[:500])
                twin = api.request(method, url.format(**missing), **kw)
                assert (twin.status_code, twin.content) == (r.status_code, r.content), (method, path)
            elif method == "GET" and path.endswith("/submissions"):
                assert {s["learner"] for s in r.json()["items"]} == {A}  # ?learner=B: still A's own
        assert tried == len(routes) - 1
    with course.browser(A) as web:
        home = web.get("/")
        assert home.status_code == 200 and A in home.text
        pages = [
            f"/submissions/{course.uploads[B]}",
            f"/class/{CODE}",
            f"/class/{CODE}/{B}",
            f"/class/{QUIZ}",
        ]
        for page in pages:
            r = web.get(page)
            assert r.status_code in (403, 404), (page, r.status_code)
            for needle in secret:
                assert needle not in r.text, (page, needle)
        assert (
            web.get(f"/submissions/{course.uploads[B]}").status_code
            == web.get("/submissions/987654").status_code
            == 404
        )
        own = web.get(f"/submissions/{course.uploads[A]}")
        assert own.status_code == 200 and "<html" in own.text.lower()
    with course.browser(PROF) as web:  # the instructor does see B
        assert B in web.get(f"/class/{CODE}").text


# -- extensions move one learner's dates -----------------------------------------------------------------


def test_an_extension_moves_one_learners_dates(course):
    later = course.now + timedelta(days=1)
    with course.api(PROF) as api:
        r = api.post(
            "/extensions", json={"learner": A, "exercise": CODE, "due": later.isoformat(), "reason": "e2e"}
        )
        assert r.status_code == 200, r.text
    sub = submission_json(course, A, course.uploads[A])  # now on time: no penalty
    assert sub["late"]["penalty"] == 0 and sub["score"] == 35
    status = json.loads(course.cli(A, "status", CODE, "--format", "json").stdout)[0]
    assert abs(datetime.fromisoformat(status["deadlines"]["due"]) - later) < timedelta(seconds=1)
    other = json.loads(course.cli(C, "status", CODE, "--format", "json").stdout)[0]
    assert datetime.fromisoformat(other["deadlines"]["due"]) < course.now  # C's dates stay


def test_after_due_everything_shows(course):
    earlier = course.now - timedelta(hours=1)  # B's extension taken back: B's due is past
    with course.api(PROF) as api:
        r = api.post(
            "/extensions",
            json={
                "learner": B,
                "exercise": CODE,
                "due": earlier.isoformat(),
                "closes": (course.now + timedelta(days=10)).isoformat(),
            },
        )
        assert r.status_code == 200, r.text
    sub = submission_json(course, B, course.uploads[B])
    c = checks_of(sub)["mha-has-no-future-leak"]
    assert c["passed"] is False and HIDDEN_MESSAGE in c["message"]
    assert "future-leak" in c["symptoms"]
    with course.api(B) as api:
        for fmt in FORMATS:
            r = api.get(f"/submissions/{course.uploads[B]}/report", params={"format": fmt})
            # its own message, or (text, markdown) its line under the root cause it builds on
            grouped = c["caused_by"] and c["title"] in r.text and "fix that first" in r.text
            assert HIDDEN_MESSAGE in r.text or grouped, fmt


# -- nothing planted ever reaches a learner --------------------------------------------------------------


def test_no_answer_to_a_learner_holds_a_planted_string(course):
    with course.api(PROF) as api:  # the server does serve the private edition
        assert EDITION_TITLE in json.dumps(api.get("/exercises").json())
    for who in (A, B, C):  # everything a learner can ask for, in every format and language
        with course.api(who) as api:
            for path in ("/health", "/me", "/exercises", "/status", "/submissions", "/openapi.json"):
                assert api.get(path).status_code == 200
            for exercise in (CODE, QUIZ):
                assert api.get(f"/exercises/{exercise}/starter").status_code == 200
            for s in api.get("/submissions").json()["items"]:
                for fmt in FORMATS:
                    for lang in ("en", "zh-TW"):
                        api.get(f"/submissions/{s['id']}/report", params={"format": fmt, "lang": lang})
        with course.browser(who) as web:
            web.get("/")
            for s in submission_json_list(course, who):
                web.get(f"/submissions/{s['id']}")
                web.get(f"/submissions/{s['id']}", params={"lang": "zh-TW"})
    assert len(course.recorder.seen) > 200
    assert any(EDITION_TITLE in text for _, text in course.recorder.seen)
    for where, plant in PLANTS.items():
        assert course.recorder.containing(plant) == [], f"the {where}'s planted string reached a learner"


def submission_json_list(course: Course, who: str) -> list[dict]:
    with course.api(who) as api:
        return api.get("/submissions").raise_for_status().json()["items"]


# -- a waiting GET (a long poll) ---------------------------------------------------------------------


def test_a_waiting_get_answers_with_the_grade_and_never_before_it(course):
    solution = (EXERCISES / CODE / "solution" / "attention.py").read_bytes()
    with course.api(A) as api:
        r = upload(api, CODE, zipped({"attention.py": solution + b"\n# a long poll\n"}))
        assert r.status_code == 202, r.text
        upload_id = r.json()["id"]
        began = time.monotonic()
        sub = api.get(f"/submissions/{upload_id}", params={"wait": 20}).raise_for_status().json()
        held = time.monotonic() - began
        assert sub["status"] == "graded" or held >= 19, (sub["status"], held)
        if sub["status"] != "graded":  # a CI machine slower than 20 s a grading: the next one has it
            sub = api.get(f"/submissions/{upload_id}", params={"wait": 20}).raise_for_status().json()
        assert sub["status"] == "graded" and sub["passed"] is True and sub["grade"]["checks"]
        for odd in ("21", "-1", "nan", "inf", "1e400", "soon", "0x10"):  # none may hold a request
            refused = api.get(f"/submissions/{upload_id}", params={"wait": odd})
            assert refused.status_code == 422 and refused.json()["error"]["field"] == "wait", odd
        began = time.monotonic()
        others = api.get(f"/submissions/{course.uploads[B]}", params={"wait": 20})
        missing = api.get("/submissions/987654", params={"wait": 20})
        assert others.status_code == missing.status_code == 404 and others.content == missing.content
        assert time.monotonic() - began < 19, "no such submission is answered at once, not after waiting"
