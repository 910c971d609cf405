"""The student client trusts nothing the server sends (issue 28, item 7), over real HTTP on loopback.

A hostile server (tests/client_stub.py, its `exercises` and `raw` knobs) names files that are no
learner file (`id_ed25519`, `secret_notes.txt`): `grader submit` reads and sends nothing and exits
4, the server's failure. It answers 4 MiB of `{}`, or 4 million of them: the client refuses the
answer before parsing it, within a second and 100 MB (measured in a fresh interpreter, the
numbers printed). `grader login` makes a config folder that others may write its owner's alone.
"""

from __future__ import annotations

import json
import os
import stat
import subprocess
import sys
from pathlib import Path

import pytest
import test_client
from client_stub import TOKEN, Stub
from test_client import run, work

from grader.client.api import Api, json_shape
from grader.client.errors import ServerFailure
from grader.client.models import ExerciseInfo, learner_file_name
from grader.client.packing import pack
from grader.limits import CLIENT_JSON_CONTAINERS, CLIENT_JSON_VALUES, CLIENT_LIST_ITEMS

ROOT = Path(__file__).resolve().parents[1]
stub, env, logged_in = test_client.stub, test_client.env, test_client.logged_in  # its fixtures


# -- a file the exercise does not have -------------------------------------------------------------


@pytest.mark.parametrize("extra", ["id_ed25519", "secret_notes.txt", ".bashrc", "__init__.py", "x.pyc"])
def test_a_server_naming_a_file_no_exercise_has_gets_nothing(logged_in, tmp_path, extra):
    folder = work(tmp_path)
    (folder / extra).write_text("PRIVATE KEY")
    logged_in.exercises[0]["files"] = ["data.py", extra]
    result = run("submit", "day49-data", str(folder))
    assert result.exit_code == 4, result.output
    assert repr(extra) in result.stderr and "PRIVATE KEY" not in result.output
    assert logged_in.posts == []  # nothing was sent


def test_pack_refuses_a_strange_name_before_reading_any_file(tmp_path, monkeypatch):
    import grader.intake.sources

    def read_learner(*args):
        raise AssertionError("a file was read")

    monkeypatch.setattr(grader.intake.sources, "read_learner", read_learner)
    exercise = ExerciseInfo.model_construct(id="x", kind="code", title={}, files=["id_ed25519"]).exercise()
    with pytest.raises(ServerFailure, match="id_ed25519") as e:
        pack(exercise, tmp_path)
    assert e.value.exit_code == 4


def test_the_names_an_exercise_may_declare():
    shipped = ["attention.py", "norms.py", "positions.py", "gpt.py", "data.py", "bughunt.py"]
    for name in [*shipped, "answers.toml", "diagnosis.toml"]:
        assert learner_file_name(name), name
    for name in ["id_ed25519", "notes.txt", "x.pyc", "class.py", "__init__.py", "a-b.py", "café.py",
                 ".py", "answers.TOML", "data.py.txt"]:  # fmt: skip
        assert not learner_file_name(name), name


# -- an answer too large in shape ------------------------------------------------------------------

PROBE = """
import json, resource, sys, time, tracemalloc
from grader.client.api import Api
from grader.client.errors import ServerFailure

url, token = sys.argv[1], sys.argv[2]
api = Api(url, token)
api.me()  # connected, every module imported: what follows is the answer alone


def exercises():
    try:
        api.exercises()
        return ""
    except ServerFailure as exc:
        return str(exc.message)


before = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss
start = time.perf_counter()
refused = exercises()
seconds = time.perf_counter() - start
after = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss
tracemalloc.start()  # once more, every allocation counted (the peak RSS above may be the imports')
exercises()
peak = tracemalloc.get_traced_memory()[1]
print(json.dumps({"refused": refused, "seconds": seconds, "grew_kib": after - before, "peak": peak}))
"""


def probe(stub: Stub) -> dict:
    """GET /exercises in a fresh interpreter: refused or not, how long, and its peak RSS growth."""
    out = subprocess.run(
        [sys.executable, "-c", PROBE, stub.url, TOKEN],
        capture_output=True,
        text=True,
        cwd=ROOT,
        env={**os.environ, "PYTHONPATH": str(ROOT)},
        timeout=60,
    )
    assert out.returncode == 0, out.stderr
    return json.loads(out.stdout)


@pytest.mark.parametrize(
    "label, body",
    [
        ("4 MiB of {}", b"[" + b"{}," * ((4 << 20) // 3 - 1) + b"{}]"),
        ("4 million {}", b"[" + b"{}," * (4_000_000 - 1) + b"{}]"),
        ("4 MiB of []", b"[" * (2 << 20) + b"]" * (2 << 20)),
        ("4 MiB of 1.5", b"[" + b"1.5," * ((4 << 20) // 4 - 1) + b"1.5]"),
    ],
)
def test_an_answer_of_millions_of_values_is_refused_fast_and_small(stub, label, body):
    stub.raw["/api/v1/exercises"] = body
    got = probe(stub)
    print(
        f"\n{label}: {len(body) / 2**20:.1f} MiB refused in {got['seconds'] * 1000:.0f} ms, peak RSS "
        f"+{got['grew_kib'] / 1024:.1f} MiB, allocated at most {got['peak'] / 2**20:.1f} MiB"
    )
    assert "refusing to read it" in got["refused"], got
    assert got["seconds"] < 1.0 and got["grew_kib"] < 100 * 1024 and got["peak"] < 100 * 2**20, got


def test_a_list_longer_than_any_endpoint_has_is_refused_before_its_rows_are_read(stub):
    stub.raw["/api/v1/exercises"] = json.dumps(["x"] * (CLIENT_LIST_ITEMS + 1)).encode()
    with Api(stub.url, TOKEN) as api, pytest.raises(ServerFailure, match="more than the 20,000") as e:
        api.exercises()
    assert e.value.exit_code == 4


def test_the_shape_counts_values_and_containers_without_what_strings_hold():
    assert json_shape(b"[]") == (2, 1) and json_shape(b'{"a": [1, 2, {}]}') == (6, 3)
    text = json.dumps(["{[,"] * (CLIENT_JSON_VALUES // 2)).encode()  # brackets inside strings
    values, containers = json_shape(text)
    assert containers == 1 and values <= CLIENT_JSON_VALUES  # counted again without the strings
    assert json_shape(b"[" * (CLIENT_JSON_CONTAINERS + 1))[1] > CLIENT_JSON_CONTAINERS


def test_a_real_answer_is_far_inside_the_caps(logged_in, tmp_path):
    run("submit", "day49-data", str(work(tmp_path)), "--wait")
    with Api(logged_in.url, TOKEN) as api:
        for path in ("/exercises", "/status", "/submissions"):
            body = api.request("GET", path).body
            values, containers = json_shape(body)
            assert values < CLIENT_JSON_VALUES // 100 and containers < CLIENT_JSON_CONTAINERS // 100


# -- the config folder -----------------------------------------------------------------------------


def test_login_makes_a_world_writable_config_folder_private(env, stub):
    folder = env / "config" / "gpt-bughunt-grader"
    folder.mkdir(parents=True)
    folder.chmod(0o777)
    result = run("login", "--server", stub.url, "--token", TOKEN)
    assert result.exit_code == 0, result.output
    assert stat.S_IMODE(folder.stat().st_mode) == 0o700


def test_login_refuses_another_users_folder_that_others_may_write(env, stub, monkeypatch):
    folder = env / "config" / "gpt-bughunt-grader"
    folder.mkdir(parents=True)
    folder.chmod(0o777)
    monkeypatch.setattr(os, "getuid", lambda: folder.stat().st_uid + 1)  # as if it were not ours
    result = run("login", "--server", stub.url, "--token", TOKEN)
    assert result.exit_code == 2 and "another user's folder" in result.stderr, result.output
    assert not (folder / "login.json").exists()
