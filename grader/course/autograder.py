"""The Gradescope autograder of one exercise: what `grader gradescope build EX` puts in the zip, and
what its `run_autograder` does for each submission.

Gradescope's "Autograder Specifications" (gradescope-autograders.readthedocs.io/en/latest/specs/):
the zip holds `setup.sh` and `run_autograder` at its root; Gradescope unpacks it to
/autograder/source, runs setup.sh there once when it builds the image (as root, Ubuntu), copies
run_autograder to /autograder/run_autograder, and for each submission runs it in /autograder with
the learner's files in /autograder/submission; it reads /autograder/results/results.json and keeps
what run_autograder prints (results/stdout) for instructors only.

The zip (`members`) holds:
- setup.sh: a venv at /autograder/venv from a Python >= 3.11 (apt's python3.11 where the image has
  none), the pinned requirements (requirements.txt: `torch==2.13.0` and the versions the building
  machine grades with, of what grading imports), then the bundled source's two distributions (the
  client, client/, and the grading side), `pip install --no-deps`; bubblewrap from apt when it is
  missing (the jail falls back to a plain process without it).
- run_autograder: `python -m grader.course.autograder`, GRADER_EXERCISES_DIR and GRADER_MUTANTS_DIR naming
  the bundled exercises/ and mutants/ (no wheel carries them). It always leaves a valid
  results.json: a submission that cannot be read is a grade of 0 saying why, a failure of the
  grader itself a results.json of score 0 saying so; and when even Python cannot start,
  run_autograder copies failed-results.json (rendered at build time) into place.
- autograder.json (`AutograderConfig`): the exercise, the report's language and each check's
  Gradescope visibility, from the course.toml given to the build (grader/policy/course.py's
  GRADESCOPE_VISIBILITY: after_due -> after_due_date, after_release -> after_published, hidden ->
  hidden).
- the grader's source (grader/, reports/, reference_model/, pyproject.toml, and client/'s
  pyproject.toml and hatch_build.py) and, of exercises/ and mutants/, only this exercise: its own
  folder (hidden tests, solution, key, starter) and the shared mutants that edit it (they name its
  bugs); never another exercise's files.

GRADER_AUTOGRADER_ROOT (default /autograder) moves the root, so tests run it in a scratch folder
laid out as Gradescope's; GRADER_PYTHON names the Python setup.sh makes the venv from (else the
first of python3.13 ... python3 that is 3.11 or newer). The jail is whatever the machine allows
(grader/jail: bubblewrap, else a plain process with limits), as `grader doctor` reports it.
"""

from __future__ import annotations

import importlib.metadata
import io
import json
import os
import re
import sys
import tomllib
import traceback
import zipfile
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path

from pydantic import BaseModel, ConfigDict

from grader import __version__
from grader.errors import UsageError
from grader.locale import msg
from grader.policy.course import GRADESCOPE_VISIBILITY, CoursePolicy, GradescopeVisibility

ROOT_ENV = "GRADER_AUTOGRADER_ROOT"
DEFAULT_ROOT = Path("/autograder")
CONFIG = "autograder.json"
FALLBACK = "failed-results.json"
REQUIREMENTS = "requirements.txt"
PROJECT = Path(__file__).resolve().parents[2]  # the checkout the zip's source comes from
SOURCE_PACKAGES = ("grader", "reports", "reference_model")  # whole; exercises/ and mutants/ in part
CLIENT_BUILD = ("client/pyproject.toml", "client/hatch_build.py")  # the student distribution's build
SKIPPED = re.compile(r"(^|/)(__pycache__|\.[^/]*)(/|$)|\.(pyc|db)$")
# What grading imports (grader.grading.grade, the jail, reports.gradescope), pinned with all they
# require: not the server, gradebook or batch dependencies of the grading distribution
GRADING_DISTRIBUTIONS = (
    "torch",
    "numpy",
    "pydantic",
    "click",
    "pytest",
    "hypothesis",
    "msgpack",
    "pyyaml",
    "babel",
    "packaging",
    "einops",
    "jaxtyping",
)
TORCH = "torch==2.13.0"  # as pyproject.toml pins it: a grader must be reproducible
EXECUTABLE, REGULAR = 0o100755, 0o100644
ZIP_TIME = (1980, 1, 1, 0, 0, 0)  # the same sources make the same zip


class AutograderConfig(BaseModel):
    """autograder.json in the zip: what run_autograder grades, and how results.json shows it."""

    model_config = ConfigDict(extra="forbid", frozen=True)

    exercise: str
    lang: str = "en"
    default_visibility: GradescopeVisibility = "visible"
    visibility: dict[str, GradescopeVisibility] = {}  # check id -> its own
    grader_version: str = __version__

    def of(self, check: str) -> GradescopeVisibility:
        return self.visibility.get(check, self.default_visibility)


def config_for(exercise: str, policy: CoursePolicy, lang: str) -> AutograderConfig:
    """The exercise's visibility in `policy`, in Gradescope's words."""
    vis = policy.exercise(exercise).visibility
    return AutograderConfig(
        exercise=exercise,
        lang=lang,
        default_visibility=GRADESCOPE_VISIBILITY[vis.default],
        visibility={check: GRADESCOPE_VISIBILITY[v] for check, v in vis.checks.items()},
    )


# -- the zip ------------------------------------------------------------------------------------

SETUP_SH = r"""#!/usr/bin/env bash
# Gradescope runs this once, as root, when it builds the autograder's image (grader/course/autograder.py).
set -euo pipefail
SOURCE="$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)"
ROOT="${GRADER_AUTOGRADER_ROOT:-/autograder}"
apt_install() {  # only where apt works: Gradescope's Ubuntu image, as root
    if [ "$(id -u)" = 0 ] && command -v apt-get >/dev/null; then
        DEBIAN_FRONTEND=noninteractive apt-get install -y --no-install-recommends "$@"
    else
        return 1
    fi
}
python_ok() { "$1" -c 'import sys, venv, ensurepip; sys.exit(sys.version_info < (3, 11))' 2>/dev/null; }
find_python() {
    for candidate in ${GRADER_PYTHON:-} python3.13 python3.12 python3.11 python3; do
        if command -v "$candidate" >/dev/null && python_ok "$candidate"; then
            command -v "$candidate"
            return 0
        fi
    done
    return 1
}
PYTHON="$(find_python || { apt_install python3.11 python3.11-venv >&2 && find_python; })" || {
    echo "setup.sh: the grader needs Python 3.11 or newer with venv; choose a newer base image" >&2
    exit 1
}
if ! command -v bwrap >/dev/null; then
    apt_install bubblewrap || echo "setup.sh: no bubblewrap: learner code runs in a plain process jail" >&2
fi
"$PYTHON" -m venv "$ROOT/venv"
PIP=("$ROOT/venv/bin/python" -m pip --disable-pip-version-check)
"${PIP[@]}" install -r "$SOURCE/requirements.txt"
"${PIP[@]}" install --no-deps "$SOURCE/client" "$SOURCE"
"$ROOT/venv/bin/python" -c \
    'import grader.grading.grade, torch; print("setup.sh: ready; torch", torch.__version__)'
"""

RUN_AUTOGRADER = r"""#!/usr/bin/env bash
# Gradescope runs this for every submission (grader/course/autograder.py): it always leaves a results.json.
ROOT="${GRADER_AUTOGRADER_ROOT:-/autograder}"
mkdir -p "$ROOT/results"
rm -f "$ROOT/results/results.json"
cd "$ROOT" || exit 1
GRADER_AUTOGRADER_ROOT="$ROOT" GRADER_EXERCISES_DIR="$ROOT/source/exercises" \
    GRADER_MUTANTS_DIR="$ROOT/source/mutants" "$ROOT/venv/bin/python" -m grader.course.autograder
status=$?
if [ ! -s "$ROOT/results/results.json" ]; then
    echo "run_autograder: the grader exited with $status and wrote no results.json" >&2
    cp "$ROOT/source/failed-results.json" "$ROOT/results/results.json"
fi
exit 0
"""


@dataclass(frozen=True)
class Member:
    name: str  # inside the zip
    data: bytes
    executable: bool = False


def pinned_requirements() -> str:
    """requirements.txt: torch==2.13.0 and, at the versions this machine grades with, what grading
    imports and all it requires (a local version label such as +cpu dropped: PyPI has none)."""
    from grader.jail.launcher import canonical_name, requirement_closure

    def requires(name: str) -> list[str] | None:
        try:
            return importlib.metadata.distribution(name).requires or []
        except importlib.metadata.PackageNotFoundError:
            return None

    pins = {"torch": TORCH}
    for name in requirement_closure(GRADING_DISTRIBUTIONS, requires):
        if name not in pins:
            version = importlib.metadata.version(name).split("+")[0]
            pins[name] = f"{name}=={version}"
    lines = [pins[name] for name in sorted(pins, key=canonical_name)]
    return (
        "# what the autograder grades with (grader/course/autograder.py pinned_requirements)\n"
        + "\n".join(lines)
        + "\n"
    )


def _tree(folder: Path, prefix: str) -> Iterator[Member]:
    for path in sorted(folder.rglob("*")):
        rel = path.relative_to(folder).as_posix()
        if path.is_file() and not SKIPPED.search(rel):
            yield Member(f"{prefix}/{rel}", path.read_bytes())


def exercise_members(exercise: str) -> list[Member]:
    """exercises/ and mutants/ as the zip has them: only this exercise's files."""
    import exercises as exercises_package
    import mutants as mutants_package
    from grader.catalog.exercises import exercise_dir, read_toml_model
    from grader.catalog.mutants import Mutant, mutant_files
    from grader.errors import MutantError

    out = [Member("exercises/__init__.py", Path(exercises_package.__file__).read_bytes())]
    out += _tree(exercise_dir(exercise), f"exercises/{exercise}")
    out.append(Member("mutants/__init__.py", Path(mutants_package.__file__).read_bytes()))
    for path, default in mutant_files():
        if default:
            continue  # an exercise's own mutants/: in its folder above
        if exercise in read_toml_model(path, Mutant, MutantError).exercises:
            out.append(Member(f"mutants/{path.name}", own_edits(path, exercise).encode()))
    return out


def own_edits(path: Path, exercise: str) -> str:
    """A shared mutant's TOML with only the edits of `exercise`: another exercise's edits quote
    its solution."""
    data = tomllib.loads(path.read_text(encoding="utf-8"))
    data["edit"] = [e for e in data.get("edit", []) if e.get("exercise") == exercise]
    text = toml_text(data)
    if tomllib.loads(text) != data:  # the writer below knows the mutant files' shapes only
        raise UsageError(f"{path}: cannot be rewritten with only the edits of {exercise}")
    return text


def toml_text(data: dict) -> str:
    """TOML of a mutant file's shape: keys, a table of strings, an array of tables."""

    def value(v) -> str:
        if isinstance(v, bool):
            return "true" if v else "false"
        if isinstance(v, int | float):
            return repr(v)
        if isinstance(v, str):  # a JSON string is a TOML basic string, but for DEL
            return json.dumps(v, ensure_ascii=False).replace("\x7f", "\\u007f")
        if isinstance(v, list) and not any(isinstance(x, dict) for x in v):
            return "[" + ", ".join(value(x) for x in v) + "]"
        raise TypeError(f"not in a mutant file: {v!r}")

    def pairs(table: dict) -> list[str]:
        return [f"{json.dumps(k)} = {value(v)}" for k, v in table.items()]

    def tables(v) -> bool:
        return isinstance(v, list) and bool(v) and all(isinstance(x, dict) for x in v)

    lines = pairs({k: v for k, v in data.items() if not isinstance(v, dict) and not tables(v)})
    for k, v in data.items():
        if isinstance(v, dict):
            lines += ["", f"[{json.dumps(k)}]", *pairs(v)]
        elif tables(v):
            for table in v:
                lines += ["", f"[[{json.dumps(k)}]]", *pairs(table)]
    return "\n".join(lines) + "\n"


def members(config: AutograderConfig, requirements: str, failed_results: str) -> list[Member]:
    """Every file of the zip, setup.sh and run_autograder first."""
    if not (PROJECT / "pyproject.toml").is_file():
        raise UsageError(
            f"the grader's source checkout is needed to build an autograder; {PROJECT} is not one"
        )
    out = [
        Member("setup.sh", SETUP_SH.encode(), executable=True),
        Member("run_autograder", RUN_AUTOGRADER.encode(), executable=True),
        Member(CONFIG, config.model_dump_json(indent=2).encode() + b"\n"),
        Member(FALLBACK, failed_results.encode()),
        Member(REQUIREMENTS, requirements.encode()),
        Member("pyproject.toml", (PROJECT / "pyproject.toml").read_bytes()),
        *(Member(name, (PROJECT / name).read_bytes()) for name in CLIENT_BUILD),
    ]
    for package in SOURCE_PACKAGES:
        out += _tree(PROJECT / package, package)
    return out + exercise_members(config.exercise)


def zip_bytes(files: list[Member]) -> bytes:
    buffer = io.BytesIO()
    with zipfile.ZipFile(buffer, "w", zipfile.ZIP_DEFLATED) as zf:
        for m in files:
            info = zipfile.ZipInfo(m.name, ZIP_TIME)
            info.external_attr = (EXECUTABLE if m.executable else REGULAR) << 16
            info.create_system = 3  # Unix: the mode above is read by unzip and Gradescope
            info.compress_type = zipfile.ZIP_DEFLATED
            zf.writestr(info, m.data)
    return buffer.getvalue()


def build(exercise: str, out: Path, policy: CoursePolicy, lang: str) -> list[Member]:
    """Write the autograder zip of `exercise` to `out`; its members."""
    from reports.jsonfmt import dumps

    config = config_for(exercise, policy, lang)
    failed = dumps(failure_results(config, msg("the autograder could not start")))
    files = members(config, pinned_requirements(), failed)
    out.write_bytes(zip_bytes(files))
    return files


# -- run_autograder -------------------------------------------------------------------------------


def failure_results(config: AutograderConfig, reason: str) -> dict:
    """results.json when the grader itself failed: score 0, saying so, for the learner too.
    `reason`: a Message (shown in the report's language) or the grader's own English text."""
    text = msg(
        "This submission was not graded: {reason}. Your score is 0 until your instructor regrades it.",
        reason=reason,
    )
    return {
        "score": 0,
        "output": text.render(config.lang),
        "output_format": "text",
        "visibility": "visible",
        "stdout_visibility": "hidden",
        "extra_data": {
            "exercise": config.exercise,
            "error": "grader-failure",
            "reason": str(reason),
            "grader_version": config.grader_version,
        },
        "tests": [],
    }


def run(root: Path) -> dict:
    """Grade root/submission as root/source/autograder.json says and write
    root/results/results.json; what it wrote. Never raises for a submission or a grader failure."""
    from reports.gradescope import results

    config = AutograderConfig.model_validate_json((root / "source" / CONFIG).read_bytes())
    try:
        from grader.grading.grade import grade

        g = grade(config.exercise, root / "submission")
        data = results(
            g,
            config.lang,
            visibility={c.id: config.of(c.id) for c in g.checks},
            default_visibility=config.default_visibility,
        )
    except UsageError as exc:  # no submission folder, or a jail that failed its self-check
        print(f"run_autograder: {exc}", file=sys.stderr)
        data = failure_results(config, str(exc))
    except Exception:  # noqa: BLE001 - a grader bug still gives the learner a results.json
        traceback.print_exc()
        data = failure_results(config, msg("the grader failed (your instructor can see why)"))
    write_results(root / "results" / "results.json", data)
    return data


def write_results(path: Path, data: dict) -> None:
    from reports.jsonfmt import dumps

    path.parent.mkdir(parents=True, exist_ok=True)
    partial = path.with_suffix(".json.partial")
    partial.write_text(dumps(data), encoding="utf-8")
    os.replace(partial, path)  # never half a results.json


def main() -> int:
    root = Path(os.environ.get(ROOT_ENV) or DEFAULT_ROOT)
    data = run(root)
    print(f"run_autograder: {summary_line(data)}")  # to results/stdout: the instructor's
    return 0


def summary_line(data: dict) -> str:
    extra = data.get("extra_data", {})
    return f"{extra.get('exercise')} score {data.get('score')} error {extra.get('error')}"


if __name__ == "__main__":
    sys.exit(main())
