"""The HTML reports as a person sees them: rendered once in headless Chromium to a screenshot.

Chromium runs offline (no network flags it could use) on the file itself. The screenshot is
decoded with Pillow and must show the plots: the class report's blue
histogram bars, and the bug-hunt report's loss curve with its orange entropy-floor line and the
red band of NaN losses. Skipped where Chromium is not installed (scripts/setup.sh installs it).
"""
import shutil
import subprocess
from pathlib import Path

import pytest
from PIL import Image

from reports import render
from reports.class_report import render_class_html
from test_reports_class import class_of_grades
from test_reports_grades import only_bug_d_grade, starter_grade

CHROMIUM = shutil.which("chromium") or ("/usr/bin/chromium" if Path("/usr/bin/chromium").exists() else None)
pytestmark = pytest.mark.skipif(CHROMIUM is None, reason="Chromium is not installed (scripts/setup.sh)")

BLUE, ORANGE, RED, INK = (0x25, 0x63, 0xEB), (0xD9, 0x77, 0x06), (0xDC, 0x26, 0x26), (0x1F, 0x29, 0x33)


def screenshot(html: str, folder: Path, name: str, size=(1100, 1600)) -> Path:
    page, png = folder / f"{name}.html", folder / f"{name}.png"
    page.write_text(html, encoding="utf-8")
    profile = folder / f"{name}-profile"
    proc = subprocess.run(
        [CHROMIUM, "--headless", "--no-sandbox", "--disable-gpu", "--disable-background-networking",
         "--disable-component-update", "--disable-sync", "--no-first-run", "--hide-scrollbars",
         "--disable-extensions", "--mute-audio", f"--user-data-dir={profile}",
         f"--window-size={size[0]},{size[1]}", f"--screenshot={png}", page.as_uri()],
        capture_output=True, text=True, timeout=120)
    assert png.exists(), proc.stderr[-2000:]
    return png


def read_png(path: Path) -> tuple[int, int, list[tuple[int, int, int]]]:
    """(width, height, RGB pixels) of the screenshot."""
    with Image.open(path) as image:
        assert image.format == "PNG"
        rgb = image.convert("RGB")
        pixels = getattr(rgb, "get_flattened_data", None) or rgb.getdata     # Pillow 13 renamed it
        return rgb.width, rgb.height, list(pixels())


def count(pixels, color, tol=24) -> int:
    """How many pixels are within `tol` of `color` in every channel."""
    r0, g0, b0 = color
    return sum(1 for r, g, b in pixels if abs(r - r0) <= tol and abs(g - g0) <= tol and abs(b - b0) <= tol)


def test_the_class_report_renders_with_its_plots(tmp_path):
    png = screenshot(render_class_html(class_of_grades(), lang="zh-TW"), tmp_path, "class", (1100, 2200))
    width, height, pixels = read_png(png)
    assert (width, height) == (1100, 2200)
    assert count(pixels, BLUE) > 2000          # histogram bars
    assert count(pixels, RED) > 300            # low pass rates in the per-check bars
    assert len(set(pixels[::97])) > 50         # text and plots, not a blank page


def test_the_bug_hunt_reports_render_with_the_loss_plot(tmp_path):
    png = screenshot(render(only_bug_d_grade(), "html", "zh-TW"), tmp_path, "collapse", (1100, 1300))
    _, _, pixels = read_png(png)
    assert count(pixels, ORANGE) > 150         # the entropy floor, dashed, and its label
    assert count(pixels, INK, tol=10) > 300    # the loss curve and the text
    png = screenshot(render(starter_grade(), "html", "en"), tmp_path, "starter", (1100, 1300))
    _, _, pixels = read_png(png)
    assert count(pixels, RED) > 3000           # the NaN band across the whole run
