"""The server's pages as a person sees them: fetched from the pages (as tests/test_pages.py does),
then rendered in headless Chromium with tests/test_reports_browser.py's helpers, offline, under
the pages' own Content-Security-Policy (put in a <meta> of the saved file, since a file:// page
has no response headers): a page that needed a script, a stylesheet or a font from elsewhere
would come out unstyled. Skipped where Chromium is not installed (scripts/setup.sh installs it).
"""

import pytest
from test_pages import EXERCISE, course, signed_in  # noqa: F401 - course is the fixture
from test_reports_browser import BLUE, CHROMIUM, INK, RED, count, read_png, screenshot

from grader.service.pages import SECURITY_HEADERS

pytestmark = pytest.mark.skipif(CHROMIUM is None, reason="Chromium is not installed (scripts/setup.sh)")

GREEN = (0x16, 0xA3, 0x4A)
CSP = SECURITY_HEADERS["Content-Security-Policy"]


def under_csp(html: str) -> str:
    policy = CSP.replace("frame-ancestors 'none'; ", "")  # a <meta> policy cannot say it
    head = f'<meta http-equiv="Content-Security-Policy" content="{policy}">'
    return html.replace("<head>", "<head>\n" + head, 1)


def shot(html, tmp_path, name, size=(1100, 1300)):
    width, height, pixels = read_png(screenshot(under_csp(html), tmp_path, name, size))
    assert (width, height) == size
    return pixels


def test_a_learners_report_page_renders_in_english_and_chinese(course, tmp_path):  # noqa: F811
    client = signed_in(course, "alice")
    en = client.get("/submissions/2")
    zh = client.get("/submissions/2?lang=zh-TW")
    assert en.status_code == zh.status_code == 200
    for lang, response in (("en", en), ("zh", zh)):
        pixels = shot(response.text, tmp_path, f"report-{lang}")
        assert count(pixels, INK, tol=6) > 1100 * 30      # the site bar across the top, and the text
        assert count(pixels, RED) > 300                    # the failing hero's border, ✗ marks, badge
        assert len(set(pixels[::97])) > 50                 # a styled report, not a blank page
    pixels = shot(client.get("/submissions/1").text, tmp_path, "report-pass")
    assert count(pixels, GREEN) > 300                      # the passing badge, border and ✓ marks


def test_the_sign_in_page_renders(course, tmp_path):  # noqa: F811
    page = course.client().get("/")
    assert page.status_code == 200
    pixels = shot(page.text, tmp_path, "signin", (1000, 700))
    assert count(pixels, INK, tol=6) > 1000 * 30           # the bar
    assert count(pixels, BLUE) > 400                       # the sign-in button
    assert count(pixels, GREEN) > 300                      # the hero's border


def test_the_instructors_class_report_and_a_learners_grades_render(course, tmp_path):  # noqa: F811
    client = signed_in(course, "prof")
    for lang in ("en", "zh-TW"):
        report = client.get(f"/class/{EXERCISE}?lang={lang}")
        assert report.status_code == 200
        pixels = shot(report.text, tmp_path, f"class-{lang}")
        assert count(pixels, INK, tol=6) > 1100 * 30       # the site bar and the table's text
        assert count(pixels, BLUE) > 2000                  # the score histogram's bars
        assert count(pixels, GREEN) > 1000                 # the per-check pass-rate bars, the hero
    alice = client.get(f"/class/{EXERCISE}/alice")
    assert alice.status_code == 200
    pixels = shot(alice.text, tmp_path, "learner-alice", (1000, 800))
    assert count(pixels, INK, tol=6) > 1000 * 30           # the bar and the submissions table
    assert count(pixels, GREEN) > 300                      # the hero's border
