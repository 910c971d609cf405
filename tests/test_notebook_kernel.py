"""Submitting from inside a notebook (grader/client/notebook.py), as a learner in Jupyter does.

The real thing: notebooks executed by nbclient in a real ipykernel kernel (one kernel for the
file, its history made new before each notebook, as a restart would), against a real `grader
serve` on loopback (one for the file): the solution's functions spread over cells between
`!pip install`, `%matplotlib inline` and a training loop, then `notebook.login(url, token)` and
`notebook.submit(...)`; what is checked is what the learner sees, the executed notebook's
outputs. A bug in a cell fails in the report; a cell that never compiled is refused before
anything is sent (the server's count unchanged); every failure is text in the cell, never a
traceback.

The rest runs in this process against the stub server (tests/client_stub.py), with the kernel's
history given as a list: the core's rules (each cell once, where it last ran; a cell with a
syntax error left out and said), the report's frame (the server's HTML cannot run or load
anything), the language, and what a hostile history gets.
"""

from __future__ import annotations

import html
import itertools
import json
import re
import sys
from pathlib import Path
from types import SimpleNamespace

import nbformat
import pytest
from bs4 import BeautifulSoup
from client_stub import TOKEN, Stub, isolate_client
from nbformat.v4 import new_code_cell, new_notebook

from grader.client import notebook
from grader.client.config import read_login, save_login
from grader.client.errors import ClientError
from grader.limits import NOTEBOOK_BYTES
from server_harness import CODE, clean_env, hard_timeout, learner_server

ROOT = Path(__file__).resolve().parents[1]
SOLUTION = (ROOT / "exercises" / CODE / "solution" / "attention.py").read_text(encoding="utf-8")
START_LIMIT, NOTEBOOK_LIMIT = 240, 600  # seconds: the server and kernel's start; one notebook
LEARNER = "nb-learner"


# -- the learner's notebook -----------------------------------------------------------------------


def solution_cells(text: str = SOLUTION) -> list[str]:
    """attention.py split where its top-level definitions start: imports, then one cell each."""
    lines = text.splitlines()
    starts = [i for i, line in enumerate(lines) if line.startswith(("def ", "class "))]
    bounds = [0, *starts, len(lines)]
    return ["\n".join(lines[a:b]).strip() + "\n" for a, b in itertools.pairwise(bounds)]


def learner_cells(text: str = SOLUTION) -> list[str]:
    """How such a notebook looks: installs and magics, the functions over several cells, a
    training loop that prints."""
    first, *rest = solution_cells(text)
    return [
        "!pip install -q torch\n%matplotlib inline",
        first,
        *rest[:2],
        "x = torch.randn(2, 5, 8)\nprint(stable_softmax(x).sum(-1))",  # trying it out
        *rest[2:],
        "mha = MultiHeadAttention(8, 2)\nopt = torch.optim.SGD(mha.parameters(), lr=0.1)\n"
        "for step in range(3):\n    loss = mha(x).pow(2).mean()\n    opt.zero_grad()\n"
        "    loss.backward()\n    opt.step()\n    print(step, loss.item())",
    ]


def submitted(server, *cells: str) -> list[str]:
    return [
        *cells,
        "from grader.client import notebook",
        f'notebook.login("{server.url}", "{server.token}")',
        f'notebook.submit("{CODE}")',
    ]


def bugged(text: str) -> str:
    """The solution with the scale-by-d-model bug (mutants/: scores / d_model)."""
    line = "    scores = q @ k.transpose(-2, -1) / math.sqrt(q.size(-1))"
    assert line in text
    return text.replace(line, "    scores = q @ k.transpose(-2, -1) / q.size(-1) ** 2")


# -- the server and the kernel (one each for the file) ------------------------------------------


@pytest.fixture(scope="module")
def server(tmp_path_factory):
    with learner_server(tmp_path_factory.mktemp("nb-server"), LEARNER, start_limit=START_LIMIT) as srv:
        yield srv


class Kernel:
    """One ipykernel for the file; each notebook runs in it as in a kernel just restarted (its
    history and namespace made new by a silent execution, which IPython does not number)."""

    def __init__(self, home: Path):
        from jupyter_client.manager import KernelManager

        self.home = home
        (home / "work").mkdir(parents=True)
        env = clean_env(
            HOME=str(home), XDG_CONFIG_HOME=str(home / ".config"), IPYTHONDIR=str(home / ".ipython")
        )
        env["PYTHONPATH"] = str(ROOT)
        env.pop("GRADER_EXERCISES_DIR", None)  # a learner's machine has no exercises
        self.km = KernelManager(kernel_name="python3")
        with pytest.MonkeyPatch.context() as mp:  # ipykernel's own spec, not one in a home folder
            mp.setenv("JUPYTER_DATA_DIR", str(home / "jupyter"))
            self.km.start_kernel(
                env=env, cwd=str(home / "work"), extra_arguments=["--HistoryManager.hist_file=:memory:"]
            )
        self.kc = self.km.blocking_client()
        self.kc.start_channels()
        self.kc.wait_for_ready(timeout=120)
        self.silent(f"import sys\nassert sys.executable == {sys.executable!r}, sys.executable")

    def silent(self, code: str) -> None:
        reply = self.kc.execute_interactive(code, store_history=False, timeout=60)
        assert reply["content"]["status"] == "ok", reply["content"]

    def run(self, cells: list[str]) -> list:
        """The notebook of `cells` executed in this kernel, fresh: its cells, outputs and all."""
        from nbclient import NotebookClient

        self.silent("get_ipython().reset(new_session=True)")
        nb = new_notebook(cells=[new_code_cell(c) for c in cells])
        client = NotebookClient(nb, km=self.km, timeout=NOTEBOOK_LIMIT, allow_errors=True)
        try:
            client.execute()
        finally:
            if client.kc is not None:
                client.kc.stop_channels()
        return nb.cells

    def stop(self) -> None:
        self.kc.stop_channels()
        self.km.shutdown_kernel(now=True)


@pytest.fixture(scope="module")
def kernel(tmp_path_factory):
    with hard_timeout(START_LIMIT):
        k = Kernel(tmp_path_factory.mktemp("nb-kernel"))
    try:
        yield k
    finally:
        k.stop()


# -- what the learner sees ----------------------------------------------------------------------


def texts(cell, name: str | None = None) -> str:
    """A cell's stream output (stdout, stderr, or both)."""
    return "".join(
        o.get("text", "")
        for o in cell.outputs
        if o.output_type == "stream" and (name is None or o.name == name)
    )


def tracebacks(cells) -> list:
    return [(c.source, o) for c in cells for o in c.outputs if o.output_type == "error"]


def shown_report(cell) -> tuple[BeautifulSoup, str]:
    """The report a cell displayed: its frame's document, parsed, and the text alternative."""
    [shown] = [o for o in cell.outputs if o.output_type == "display_data"]
    frame = BeautifulSoup(shown.data["text/html"], "html.parser").find("iframe")
    assert frame is not None and frame["sandbox"] in ("", []), shown.data["text/html"][:500]  # bs4: a list
    return BeautifulSoup(frame["srcdoc"], "html.parser"), shown.data["text/plain"]


def uploads(server) -> list[dict]:
    with server.client(server.token) as c:
        return (
            c.get("/submissions", params={"exercise": CODE, "limit": 100}).raise_for_status().json()["items"]
        )


def test_a_notebook_gets_full_marks_from_inside_its_kernel(server, kernel):
    with hard_timeout(NOTEBOOK_LIMIT):
        cells = kernel.run(
            submitted(server, *learner_cells())
            + ["%load_ext grader.client.notebook", f"%grader_submit {CODE} --lang zh-TW"]
        )
    assert tracebacks(cells) == []
    said, magic = cells[-3], cells[-1]
    out = texts(said, "stdout")
    assert "logged in to" in texts(cells[-4]) and LEARNER in texts(cells[-4])
    digest = re.search(r"digest \(SHA-256\): ([0-9a-f]{64})", out)
    assert digest, out
    assert re.search(r"attention\.py  [\d,]+ bytes  from kernel-history\.ipynb, cells 2-4, 6-8\n", out), out
    assert "cell 11: your token is not sent (<token> in its place)" in out
    assert server.token not in out.split("logged in")[0]
    # the dropped lines are listed, at the cell and line the learner sees
    assert re.search(r"cell 1, line 1: dropped .*pip install", out), out
    assert re.search(r"cell 1, line 2: dropped .*matplotlib", out), out
    assert re.search(r"graded █+", texts(said, "stderr")), texts(said, "stderr")  # the bar, at its end
    page, text = shown_report(said)
    assert page.find(attrs={"data-score": True})["data-score"] in ("35.0", "35")
    assert "PASSED" in page.get_text() and "NOT PASSED" not in page.get_text()
    assert "35" in text
    [sub] = uploads(server)
    assert sub["digest"] == digest.group(1) and sub["score"] == sub["max_score"] == 35
    # the magic, after more cells ran: the same files, so not stored again; the report in zh-TW
    assert f"submission {sub['id']}" in texts(magic) or str(sub["id"]) in texts(magic), texts(magic)
    page, text = shown_report(magic)
    assert page.find("html")["lang"] == "zh-Hant-TW" and "35" in text
    assert len(uploads(server)) == 1


def test_a_bug_in_the_cell_that_ran_last_fails_in_the_report(server, kernel):
    """The learner ran the right function, then changed the cell and ran it again with a bug:
    the kernel's state is the bug, and so is what is submitted."""
    cells = learner_cells()
    sdpa = next(i for i, c in enumerate(cells) if c.startswith("def scaled_dot_product_attention"))
    with hard_timeout(NOTEBOOK_LIMIT):
        ran = kernel.run(submitted(server, *cells, bugged(cells[sdpa])))
    assert tracebacks(ran) == []
    page, _text = shown_report(ran[-1])
    assert "NOT PASSED" in page.get_text()
    assert "attention-scaling" in page.decode() or "attention scaling" in page.get_text().lower()
    assert float(page.find(attrs={"data-score": True})["data-score"]) < 35


def test_a_cell_that_never_compiled_is_refused_before_anything_is_sent(server, kernel):
    before = len(uploads(server))
    cells = learner_cells()
    merge = next(i for i, c in enumerate(cells) if c.startswith("def merge_heads"))
    cells[merge] = cells[merge].replace("def merge_heads(x):", "def merge_heads(x)")  # never fixed
    with hard_timeout(NOTEBOOK_LIMIT):
        ran = kernel.run(submitted(server, *cells))
    assert tracebacks(ran[-3:]) == []  # the learner's own cells failed (the training loop too); ours did not
    said = texts(ran[-1])
    assert f"cell {merge + 1}, line 1: a syntax error" in said, said
    assert re.search(r"problem: .*merge_heads", texts(ran[-1], "stdout")), said
    assert "error: nothing was sent, and no submission spent" in texts(ran[-1], "stderr")
    assert [o for o in ran[-1].outputs if o.output_type == "display_data"] == []
    assert len(uploads(server)) == before  # nothing spent


def test_every_failure_is_text_in_the_cell(server, kernel, tmp_path):
    nowhere = tmp_path / "nowhere"
    cells = [
        "from grader.client import notebook\nimport os",
        f"os.environ['XDG_CONFIG_HOME'] = {str(nowhere)!r}",
        f'notebook.submit("{CODE}")',  # no login
        f'notebook.login("{server.url}", "not-the-token")',  # refused
        "import grader.client.api as api\napi.BACKOFF_SECONDS = 0",  # retries at once: no waiting here
        'notebook.login("http://127.0.0.1:9", "some-token")',  # nothing listens there
        'notebook.login("http://grader.invalid", "some-token")',  # plain http:// elsewhere: not sent
        "%load_ext grader.client.notebook",
        "%grader_submit",
        f"%grader_submit {CODE} --lang fr",
        f'notebook.login("{server.url}", "{server.token}")',
        'notebook.submit("no-such-exercise")',
    ]
    with hard_timeout(NOTEBOOK_LIMIT):
        ran = kernel.run(cells)
    assert tracebacks(ran) == []
    err = [texts(c, "stderr") for c in ran]
    assert "error: not logged in" in err[2] and "notebook.login(" in err[2]
    assert "did not accept the token" in err[3] and server.url in err[3]
    assert "error: cannot reach http://127.0.0.1:9" in err[5]
    assert "plain http://" in err[6]
    assert "%grader_submit" in err[8] and "exercise" in err[8]
    assert "lang: fr is not a language of the course" in err[9]
    assert "no exercise no-such-exercise" in err[11]
    saved = json.loads((nowhere / "gpt-bughunt-grader" / "login.json").read_text())
    assert saved["token"] == server.token  # the refused one was never kept


# -- in this process: the core, against the stub --------------------------------------------------


class Shell:
    """What notebook.py asks of IPython's shell: the raw history and the cell transformation."""

    def __init__(self, history: list):
        from IPython.core.inputtransformer2 import TransformerManager

        self.history_manager = SimpleNamespace(input_hist_raw=["", *history])
        self.transform_cell = TransformerManager().transform_cell


def problem(source: str):
    return notebook.cell_problem(Shell([]), source)


def test_each_cell_counts_once_where_it_last_ran():
    history = ["a = 1", "def f():\n    return 1", "a = 1", "", "   \n", "def f():\n    return 2"]
    cells = notebook.executed_cells(["", *history], problem)
    assert [(c.number, c.source) for c in cells.ran] == [
        (2, "def f():\n    return 1"),
        (3, "a = 1"),
        (6, "def f():\n    return 2"),
    ]
    assert cells.notes == []


def test_a_cell_that_never_compiled_is_left_out_and_said():
    history = ["def f(:\n    pass", "x = 1\n\ny = (", "%time z = 1\n!ls\nw = 2", "await something()"]
    cells = notebook.executed_cells(["", *history], problem)
    assert [c.number for c in cells.ran] == [3, 4]  # magics, shell lines and await are IPython's
    assert [str(n) for n in cells.notes] == [
        "cell 1, line 1: a syntax error (invalid syntax); this cell never ran, so it is left out",
        "cell 2, line 3: a syntax error ('(' was never closed); this cell never ran, so it is left out",
    ]


def test_a_hostile_history_is_bounded():
    many = [f"v{i} = {i}" for i in range(1_990)]
    cells = notebook.executed_cells(["", *many, None, 7, b"x = 1", ["y"]], problem)
    assert len(cells.ran) == 1_990  # what is not text is not a cell
    for history in (
        ["", *(f"v{i} = {i}" for i in range(10_000))],  # more cells than a notebook may have
        ["", *["x = 1"] * 10_000],  # one cell run 10,000 times: it is In [10000]
        ["", "x = 1\n" * (NOTEBOOK_BYTES // 6 + 1)],  # more text than a notebook may hold
    ):
        with pytest.raises(ClientError, match="restart the kernel and run only your solution's cells"):
            notebook.executed_cells(history, problem)
    deep = "x = " + "[" * 5000 + "]" * 5000
    assert notebook.executed_cells(["", deep], problem).notes  # too deep to parse: left out, said
    assert notebook.executed_cells(["", "x = 1\x00"], problem).notes  # Python cannot read a NUL


def test_the_history_is_a_notebook_whose_cell_n_is_in_n():
    data = notebook.history_notebook([notebook.Ran(3, "a = 1"), notebook.Ran(6, "%%writefile x.py\nb = 2")])
    nb = nbformat.reads(data.decode(), as_version=4)
    nbformat.validate(nb)
    assert [(c.execution_count, c.source) for c in nb.cells] == [
        (None, ""),
        (None, ""),
        (3, "a = 1"),
        (None, ""),
        (None, ""),
        (6, "%%writefile x.py\nb = 2"),
    ]
    assert nbformat.reads(notebook.history_notebook([]).decode(), as_version=4).cells == []


HOSTILE_REPORT = (
    '<!DOCTYPE html><html><head><title>x</title></head><body>PASSED 35/35'
    '<script>alert(1)</script><img src="https://tracker.example/p.png">'
    '"></iframe><script>parent.alert(2)</script></body></html>'
)


def test_the_report_frame_runs_and_loads_nothing():
    frame = notebook.report_frame(HOSTILE_REPORT, 'a "title"')
    soup = BeautifulSoup(frame, "html.parser")
    [iframe] = soup.find_all("iframe")
    assert soup.find("script") is None  # nothing got out of the frame's attribute
    assert iframe["sandbox"] in ("", []) and iframe["referrerpolicy"] == "no-referrer"
    document = iframe["srcdoc"]
    assert document.startswith(
        f'<!DOCTYPE html><meta http-equiv="Content-Security-Policy" content="{notebook.FRAME_CSP}">'
    )
    assert document.count("<!DOCTYPE") == 1 and "PASSED 35/35" in document
    assert html.unescape(frame.split('srcdoc="', 1)[1].rsplit('"', 1)[0]) == document


def test_the_frame_csp_is_the_servers_for_a_report():
    from grader.service.app import REPORT_CSP

    server = [p.strip() for p in REPORT_CSP.split(";") if not p.strip().startswith("frame-ancestors")]
    assert [p.strip() for p in notebook.FRAME_CSP.split(";")] == server


def test_the_language_is_the_argument_then_the_login_then_the_locale(monkeypatch):
    monkeypatch.setenv("LANG", "zh_TW.UTF-8")
    monkeypatch.delenv("LC_ALL", raising=False)
    monkeypatch.delenv("LANGUAGE", raising=False)
    assert notebook.check_lang(None, None) == "zh-TW"
    assert notebook.check_lang(None, "en") == "en"
    assert notebook.check_lang("zh_TW", "en") == "zh-TW" and notebook.check_lang("EN", None) == "en"
    for bad in ("fr", "", "x" * 1000):
        with pytest.raises(ClientError, match="lang: "):
            notebook.check_lang(bad, None)


@pytest.fixture
def env(tmp_path, monkeypatch):
    return isolate_client(tmp_path, monkeypatch)


def test_login_asks_for_the_token_without_echo_and_keeps_the_language(env, monkeypatch, capsys):
    asked = []
    monkeypatch.setattr("getpass.getpass", lambda prompt: asked.append(prompt) or f"  {TOKEN} ")
    with Stub() as stub:
        notebook.login(stub.url, lang="zh-TW")
    out, err = capsys.readouterr()
    assert asked == ["Token: "] or asked == ["權杖: "] or len(asked) == 1
    assert err == "" and TOKEN not in out and "alice" in out
    saved = read_login()
    assert (saved.server, saved.token, saved.lang) == (stub.url, TOKEN, "zh-TW")


def test_login_refused_or_unreachable_is_text(env, capsys):
    with Stub() as stub:
        notebook.login(stub.url, "wrong")
        out, err = capsys.readouterr()
        assert f"error: {stub.url} did not accept the token" in err and "nothing was kept" in err
        assert f'paste your token again: notebook.login("{stub.url}")' in err
        assert out == "" and "Traceback" not in err
        assert read_login().token is None
    notebook.login(stub.url, TOKEN)  # the stub is gone: nothing answers there
    err = capsys.readouterr().err
    assert f"error: cannot reach {stub.url}" in err
    notebook.login("ftp://example.com", TOKEN)
    assert "is not an http:// or https:// URL" in capsys.readouterr().err


def test_submit_outside_a_notebook_says_where_it_runs(env, capsys, monkeypatch):
    save_login("http://127.0.0.1:9", TOKEN)
    monkeypatch.setattr("IPython.get_ipython", lambda: None)
    notebook.submit("day49-data")
    err = capsys.readouterr().err
    assert "error: notebook.submit runs in a Jupyter or Colab notebook" in err


def test_a_token_in_a_cell_is_never_sent(env, capsys, monkeypatch):
    """`notebook.login(URL, "TOKEN")` typed into a cell: the cell is in the history, and a dropped
    line's note quotes it; what is sent holds neither."""
    history = [
        "import torch",
        f'TOKEN = "{TOKEN}"',
        "def make_xy(chunk):\n    return chunk[:-1], chunk[1:]",
        f'notebook.login("http://127.0.0.1:1", "{TOKEN}")',
    ]
    monkeypatch.setattr(notebook, "kernel", lambda: Shell(history))
    with Stub() as stub:
        save_login(stub.url, TOKEN)
        notebook.submit("day49-data")
        [upload] = stub.uploads
    out = capsys.readouterr().out
    assert TOKEN not in out and TOKEN.encode() not in upload["files"]["data.py"]
    assert "note: cell 2: your token is not sent (<token> in its place)" in out
    assert "note: cell 4: your token is not sent" in out
    assert b"def make_xy(chunk):" in upload["files"]["data.py"]


def test_the_magics_parse_their_line_or_say_what_is_wrong(env, capsys, monkeypatch):
    seen = []
    monkeypatch.setattr(notebook, "submit", lambda *a, **kw: seen.append((a, kw)))
    notebook.grader_submit_magic("day45-attention --lang zh-TW --no-wait --use-late-day")
    assert seen == [
        (("day45-attention",), {"lang": "zh-TW", "wait": False, "use_late_day": True, "insecure": False})
    ]
    for line in ("", "a b", '"unclosed', "x --what"):
        notebook.grader_submit_magic(line)
        assert "error: %grader_submit:" in capsys.readouterr().err, line
    assert len(seen) == 1
    registered = {}
    ip = SimpleNamespace(register_magic_function=lambda f, kind, name: registered.update({name: (kind, f)}))
    notebook.load_ipython_extension(ip)
    assert set(registered) == {"grader_submit", "grader_login"}


@pytest.mark.parametrize(
    "cell, said",
    [
        ("%%writefile ../../etc/x.py\nprint(1)", "cell 1 writes '../../etc/x.py', a path"),
        ("%%writefile /content/data.py\ndef make_xy(c): pass", "cell 1 writes '/content/data.py', a path"),
        ("%%writefile data.py\x00\ndef make_xy(c): pass", "cell 1 holds a NUL character"),
    ],
)
def test_a_hostile_cell_is_refused_as_text_and_nothing_is_sent(env, capsys, monkeypatch, cell, said):
    monkeypatch.setattr(notebook, "kernel", lambda: Shell([cell]))
    with Stub() as stub:
        save_login(stub.url, TOKEN)
        notebook.submit("day49-data")
        assert stub.uploads == []
    err = capsys.readouterr().err
    assert err.startswith("error: ") and said in err, err
