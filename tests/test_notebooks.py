"""Notebooks as submissions (grader/intake/notebooks.py, read through grader/intake/sources.py): a learner's
.ipynb is assembled into the exercise's files, every dropped line is listed, every line of the
result says which cell it came from, and a hostile notebook is that learner's clear problem.

The notebooks are built in code with nbformat (cell ids fixed, so the same notebook has the same
bytes in every run and on both xdist workers: its grade is made once, corpus_grades).
"""

from __future__ import annotations

import ast
import json
from pathlib import Path

import nbformat
import pytest
from nbformat.v4 import new_code_cell, new_markdown_cell, new_notebook

from grader.intake import notebooks
from grader.client.packing import pack, pack_notebook
from grader.errors import InvalidSubmission, NotebookError
from grader.catalog.exercises import load_exercise
from grader.limits import NOTEBOOK_BYTES, NOTEBOOK_CELLS, NOTEBOOK_NOTES
from grader.models import Exercise
from grader.intake.notebooks import assemble, located, origin
from grader.intake.sources import read_learner, read_source
from grader.intake.submission import check_files, precheck, read_submission

ROOT = Path(__file__).resolve().parents[1]
ATTENTION = load_exercise("day45-attention")
SOLUTION = (ROOT / "exercises/day45-attention/solution/attention.py").read_text(encoding="utf-8")
IMPORTS, SOFTMAX, SDPA, SPLIT, MERGE, MHA = SOLUTION.split("\n\n\n")


def notebook(*cells, nbformat_version: int = 4) -> bytes:
    """A notebook of these cells: a str is a code cell, ("md", text) a markdown cell."""
    made = []
    for i, cell in enumerate(cells):
        c = new_markdown_cell(cell[1]) if isinstance(cell, tuple) else new_code_cell(cell)
        c["id"] = f"cell-{i}"  # nbformat draws random ids: fixed, the same bytes every run
        made.append(c)
    return nbformat.writes(new_notebook(cells=made)).encode()


# The Done-when notebook: a shell escape, a magic, a training loop and prints, the
# solution's functions spread over cells (cell numbers as Jupyter's position: markdown counts)
DONE_WHEN = (
    ("md", "# Day 45: attention"),  # cell 1
    "!pip install torch\n%matplotlib inline",  # cell 2
    IMPORTS.split('"""\n', 2)[-1] + "\nimport matplotlib.pyplot as plt",  # cell 3 (docstring off)
    SOFTMAX,  # cell 4
    SDPA,  # cell 5
    ("md", "Heads: split, then merge."),  # cell 6
    SPLIT + "\n\n\n" + MERGE,  # cell 7
    MHA,  # cell 8
    "x = torch.randn(2, 5, 8)\n"  # cell 9: training, printing
    "mha = MultiHeadAttention(8, 2)\n"
    "opt = torch.optim.SGD(mha.parameters(), lr=0.1)\n"
    "for step in range(100):\n"
    "    loss = mha(x).pow(2).mean()\n"
    "    opt.zero_grad(); loss.backward(); opt.step()\n"
    "    print(step, loss.item())\n"
    "plt.plot([1, 2])",
    'if __name__ == "__main__":\n    print(merge_heads(split_heads(x, 2)).shape)',  # cell 10
)


def cell_lines(cells, number: int) -> list[str]:
    source = cells[number - 1]
    return notebooks.split_lines(source[1] if isinstance(source, tuple) else source)


def assert_lines_map_to_their_cells(assembled, cells) -> None:
    """Every line the file says came from cell N, line M is that line of that cell."""
    for name, text in assembled.files.items():
        lines = notebooks.split_lines(text)
        assert assembled.lines[name], name
        for line, (cell, cell_line) in assembled.lines[name].items():
            assert lines[line - 1] == cell_lines(cells, cell)[cell_line - 1], (name, line, cell, cell_line)


# -- the Done-when notebook ---------------------------------------------------------------------


def test_the_done_when_notebook_assembles_to_the_solution_and_lists_what_it_dropped():
    got = assemble(notebook(*DONE_WHEN), ATTENTION, "nb.ipynb")
    assert list(got.files) == ["attention.py"]
    [source] = got.files.values()
    assert precheck(ATTENTION, {"attention.py": source.encode()}) == []
    assert [str(n) for n in got.notes] == [
        'cell 2, line 1: dropped "!pip install torch" (a shell command)',
        'cell 2, line 2: dropped "%matplotlib inline" (an IPython magic)',
        "cell 3, line 6: dropped \"import matplotlib.pyplot as plt\" (not used by the exercise's names)",
        "cell 9, line 1: dropped \"x = torch.randn(2, 5, 8)\" (not used by the exercise's names)",
        "cell 9, line 2: dropped \"mha = MultiHeadAttention(8, 2)\" (not used by the exercise's names)",
        "cell 9, line 3: dropped \"opt = torch.optim.SGD(mha.parameters(), lr=0.1)\" (not used by the "
        "exercise's names)",
        'cell 9, lines 4-7: dropped "for step in range(100):" (top-level code that runs)',
        'cell 9, line 8: dropped "plt.plot([1, 2])" (top-level code that runs)',
        'cell 10, lines 1-2: dropped "if __name__ == \\"__main__\\":" (top-level code that runs)'.replace(
            '\\"', '"'
        ),
    ]
    assert "matplotlib" not in source.split("# grader-note")[0] and "print(" not in source
    assert_lines_map_to_their_cells(got, DONE_WHEN)
    assert origin(source).notes == got.notes  # the file carries its notes
    assert origin(source).cells == [3, 4, 5, 7, 8]
    # the module defines what the solution does, nothing else
    tree = ast.parse(source)
    assert notebooks.bound_names(tree.body)[0] == {
        "math", "torch", "nn", "Tensor", "stable_softmax", "scaled_dot_product_attention",
        "split_heads", "merge_heads", "MultiHeadAttention",
    }  # fmt: skip


def test_the_done_when_notebook_gets_full_marks_and_its_notes_as_warnings(corpus_grades, tmp_path):
    path = tmp_path / "nb.ipynb"
    path.write_bytes(notebook(*DONE_WHEN))
    grade = corpus_grades.grade("day45-attention", path)
    assert grade.error is None and grade.passed and grade.score == grade.max_score, grade.error
    warnings = [w.message for w in grade.warnings]
    assert 'cell 2, line 1: dropped "!pip install torch" (a shell command)' in warnings
    assert 'cell 9, lines 4-7: dropped "for step in range(100):" (top-level code that runs)' in warnings


def test_the_same_notebook_with_a_bug_names_its_cell_and_line(tmp_path):
    cells = list(DONE_WHEN)
    cells[6] = cells[6].replace("B, T, d_model = x.shape", "B, T, d_model = x.shape)")  # cell 7, line 2
    path = tmp_path / "nb.ipynb"
    path.write_bytes(notebook(*cells))
    with pytest.raises(InvalidSubmission) as e:  # grader grade: graded 0, invalid-submission, located
        read_submission(ATTENTION, path)
    assert str(e.value).startswith("nb.ipynb cell 7, line 2, column 28: syntax error: unmatched ')'")
    assert "(attention.py line " in str(e.value)
    # the client refuses it before anything is sent, with the same location
    packed = pack(ATTENTION, path)
    assert [str(p).split(":")[0] for p in packed.problems] == ["nb.ipynb cell 7, line 2, column 28"]


def test_a_bug_in_a_writefile_cell_is_located_too(tmp_path):
    cells = [
        ("md", "intro"),
        "%%writefile attention.py\n" + SOLUTION.replace("def merge_heads(x):", "def merge_heads(x)"),
    ]
    got = assemble(notebook(*cells), ATTENTION, "w.ipynb")
    problem = precheck(ATTENTION, {n: t.encode() for n, t in got.files.items()})[0]
    line = cell_lines(cells, 2).index("def merge_heads(x)") + 1
    assert str(problem).startswith(f"w.ipynb cell 2, line {line}, column 19: syntax error")


# -- %%writefile -------------------------------------------------------------------------------


def test_writefile_cells_are_the_files_and_the_other_cells_are_not_sent():
    cells = (
        "%%writefile attention.py\n" + IMPORTS + "\n" + SOFTMAX,  # cell 1
        "print(stable_softmax)",  # cell 2: the learner's driver code
        "%%writefile -a attention.py\n" + SDPA + "\n" + SPLIT,  # cell 3: appended
        "%%file -a ./attention.py\n" + MERGE + "\n" + MHA,  # cell 4: the %%file alias, ./ allowed
        "%%writefile helpers.py\nEPS = 1e-5\n",  # cell 5: a helper module
        "%%writefile notes.txt\nremember the mask\n",  # cell 6: not a learner file
    )
    got = assemble(notebook(*cells), ATTENTION, "w.ipynb")
    assert sorted(got.files) == ["attention.py", "helpers.py"]
    assert precheck(ATTENTION, {n: t.encode() for n, t in got.files.items()}) == []
    assert_lines_map_to_their_cells(got, cells)
    assert origin(got.files["attention.py"]).cells == [1, 3, 4]
    assert [str(n) for n in got.notes] == [
        "cell 6: %%writefile notes.txt is not sent: it is neither one of this exercise's files "
        "(attention.py) nor a .py module",
        "cells 2 are not sent: the notebook writes attention.py, helpers.py with %%writefile",
    ]


def test_writefile_again_replaces_and_says_so():
    cells = ("%%writefile attention.py\nx = 1\n", "%%writefile attention.py\n" + SOLUTION)
    got = assemble(notebook(*cells), ATTENTION)
    assert "x = 1" not in got.files["attention.py"]
    assert "cell 2: %%writefile attention.py replaces what cell 1 wrote" in [str(n) for n in got.notes]


def test_a_multi_file_exercise_from_writefile_cells_and_the_bug_hunt_from_code_cells(tmp_path):
    decoder = load_exercise("day48-decoder")
    solution = ROOT / "exercises/day48-decoder/solution"
    cells = [
        f"%%writefile {name}\n" + (solution / name).read_text(encoding="utf-8") for name in decoder.files
    ]
    got = assemble(notebook(*cells), decoder)
    assert sorted(got.files) == sorted(decoder.files)
    assert precheck(decoder, {n: t.encode() for n, t in got.files.items()}) == []
    # one file not written: said, and `grader submit` says what the notebook makes no file of
    short = assemble(notebook(*cells[:3]), decoder, "d.ipynb")
    assert str(short.notes[-1]).startswith("d.ipynb writes no gpt.py with %%writefile")
    (tmp_path / "d.ipynb").write_bytes(notebook(*cells[:3]))
    from grader.client.errors import ClientError

    with pytest.raises(ClientError, match=r"makes no gpt\.py .* %%writefile NAME"):
        pack(decoder, tmp_path / "d.ipynb")

    hunt = load_exercise("day49-bughunt")
    fixed = (ROOT / "exercises/day49-bughunt/solution/bughunt.py").read_text(encoding="utf-8")
    sheet = (ROOT / "exercises/day49-bughunt/solution/diagnosis.toml").read_text(encoding="utf-8")
    got = assemble(
        notebook(fixed, "losses = train(steps=5)\nprint(losses[-1])", "%%writefile diagnosis.toml\n" + sheet),
        hunt,
    )
    assert sorted(got.files) == ["bughunt.py", "diagnosis.toml"]
    assert "losses = train" not in got.files["bughunt.py"].split("# grader-note")[0]
    assert precheck(hunt, {n: t.encode() for n, t in got.files.items()}) == []


@pytest.mark.parametrize(
    "line",
    [
        "%%writefile ../../etc/x.py",
        "%%writefile a/b.py",
        "%%writefile /content/attention.py",
        "%%writefile C:\\attention.py",
        "%%writefile ~/attention.py",
        "%%writefile 'atten\x1b[2Jtion.py'",
        "%%writefile ..",
    ],
)
def test_a_writefile_to_a_path_is_refused_naming_the_cell(line):
    with pytest.raises(
        NotebookError, match=r"^x.ipynb: cell 2 writes .*, a path: write each file by its name alone"
    ):
        assemble(notebook("import torch", line + "\nx = 1\n"), ATTENTION, "x.ipynb")


# -- what is kept: the names' needs ---------------------------------------------------------------


def assembled_source(*cells, exercise=ATTENTION) -> tuple[str, list[str]]:
    got = assemble(notebook(*cells), exercise)
    [(_name, text)] = [(n, t) for n, t in got.files.items() if n.endswith(".py")]
    return text.split("# grader-note")[0], [str(n) for n in got.notes]


def test_a_function_local_named_like_a_driver_variable_does_not_keep_the_driver_line():
    # bughunt's train() has a local `losses`; the notebook's `losses = train()` runs training
    hunt = load_exercise("day49-bughunt")
    fixed = (ROOT / "exercises/day49-bughunt/solution/bughunt.py").read_text(encoding="utf-8")
    source, notes = assembled_source(fixed, "losses = train(steps=300)", exercise=hunt)
    assert "train(steps=300)" not in source
    assert "cell 2, line 1: dropped \"losses = train(steps=300)\" (not used by the exercise's names)" in notes


def test_constants_and_configs_the_names_use_are_kept_and_others_dropped():
    source, notes = assembled_source(
        "import torch\nimport numpy as np\nNEG_INF = float('-inf')\nSEED = 0",
        "from dataclasses import dataclass\n@dataclass\nclass Cfg:\n    n_head: int = 2\nCFG = Cfg()",
        IMPORTS.split('"""\n', 2)[-1],
        "def stable_softmax(z, dim=-1):\n    z = z.masked_fill(z == NEG_INF, 0)\n    return z.softmax(dim)",
        "def split_heads(x, n_head=CFG.n_head):\n    return x",
        "if torch.cuda.is_available():\n    device = 'cuda'\nelse:\n    device = 'cpu'",
        "def merge_heads(x):\n    return x.to(device)",
    )
    for kept in ("NEG_INF = float('-inf')", "class Cfg:", "@dataclass", "CFG = Cfg()", "device = 'cpu'"):
        assert kept in source, kept
    assert "numpy" not in source and "SEED" not in source
    assert any("dropped \"import numpy as np\"" in n for n in notes)
    compile(source, "attention.py", "exec")


def test_future_imports_go_first_and_star_imports_stay_when_needed():
    source, _ = assembled_source(
        "from torch.nn.functional import *",
        "from __future__ import annotations\n"
        "def stable_softmax(z: Tensor, dim: int = -1):\n    return softmax(z, dim)",
    )
    body = [line for line in source.splitlines() if line and not line.startswith("#")]
    assert body[0] == "from __future__ import annotations"
    assert "from torch.nn.functional import *" in source  # `softmax` is bound by nothing else
    compile(source, "attention.py", "exec")


def test_a_name_set_only_by_dropped_code_is_said():
    _, notes = assembled_source(
        "import json\nwith open('vocab.json') as f:\n    VOCAB = json.load(f)",
        "def stable_softmax(z, dim=-1):\n    return z[VOCAB]",
    )
    assert notes[0].startswith(
        "cell 1, line 2: VOCAB is set here, in code that is dropped (top-level code that runs)"
    )


def test_an_nbconvert_export_pasted_in_a_cell_loses_its_get_ipython_lines():
    source, notes = assembled_source(
        "get_ipython().system('pip install torch')\nget_ipython().run_line_magic('matplotlib', 'inline')\n"
        + SOLUTION
    )
    assert "get_ipython" not in source
    assert notes[:2] == [
        'cell 1, line 1: dropped "get_ipython().system(\'pip install torch\')" (a shell command)',
        "cell 1, line 2: dropped \"get_ipython().run_line_magic('matplotlib', 'inline')\" (an IPython magic)",
    ]


def test_shared_lines_keep_the_definition_and_drop_the_call():
    source, notes = assembled_source("import torch; print(torch.__version__)\n" + SOLUTION)
    assert "import torch; 0" in source
    assert 'cell 1, line 1: dropped "print(torch.__version__)" (top-level code that runs)' in notes
    compile(source, "attention.py", "exec")


def test_ipython_syntax_is_found_as_ipython_finds_it():
    lines = [
        "!pip install torch",  # 0 shell
        "files = !ls",  # 1 shell
        "%time x = 1",  # 2 magic
        "torch.nn?",  # 3 magic (help)
        "?torch",  # 4 magic
        "text = '''",  # 5 a string ...
        "!not a command inside a string",  # 6
        "'''",  # 7
        "y = (1",  # 8 brackets ...
        "     % 2)",  # 9 ... a continuation, not a magic
        "!echo a \\",  # 10 a shell line continued
        "  b",  # 11
        "def f():",  # 12
        "    %timeit g()",  # 13 an indented magic
        "z = x != 1",  # 14 Python
    ]
    assert notebooks.escaped_lines(lines) == {
        0: "shell", 1: "shell", 2: "magic", 3: "magic", 4: "magic", 10: "shell", 11: "cont", 13: "magic"
    }  # fmt: skip
    source, notes = assembled_source("\n".join(lines) + "\ndef stable_softmax(z):\n    return f()")
    assert "    pass" in source  # the magic inside f, which the names need: a placeholder
    assert (
        sum("(a shell command)" in n for n in notes) == 3
        and sum("(an IPython magic)" in n for n in notes) == 4
    )


def test_cell_magics_other_than_writefile_are_dropped_and_time_keeps_its_body():
    source, notes = assembled_source(
        "%%bash\npip install torch\necho done",
        "%%time\n" + SOLUTION,
        "%%capture\n!pip install einops",
    )
    assert "def stable_softmax" in source and "pip" not in source
    assert notes[0] == 'cell 1, lines 1-3: dropped "%%bash" (an IPython magic)'
    assert 'cell 2, line 1: dropped "%%time" (an IPython magic)' in notes


def test_a_cell_that_does_not_parse_is_kept_as_it_is_so_its_error_is_located():
    cells = ("import torch", "def stable_softmax(z:\n    return z", SOLUTION)
    got = assemble(notebook(*cells), ATTENTION, "nb.ipynb")
    [problem] = precheck(ATTENTION, {"attention.py": got.files["attention.py"].encode()})
    assert str(problem).startswith("nb.ipynb cell 2, line 1, column ")


def test_a_scratch_cell_that_does_not_parse_is_dropped_not_fatal():
    source, notes = assembled_source(SOLUTION, "plt.plot(losses\nplt.show()")
    assert "plt" not in source
    assert notes[-1] == (
        'cell 2, lines 1-2: dropped "plt.plot(losses" (a cell that does not parse, defining nothing '
        "the code sent needs)"
    )
    compile(source, "attention.py", "exec")
    assert notebooks._guess_binds(["import torch.nn as nn", "from a import (b, c as d", "def f(:"]) == {
        "nn", "b", "d", "f"
    }  # fmt: skip


def test_a_name_defined_only_under_the_main_guard_is_said_where_it_is():
    cells = (
        "\n\n\n".join([IMPORTS, SOFTMAX, SDPA, MERGE, MHA]),
        'if __name__ == "__main__":\n    def split_heads(x, n_head):\n        return x',
    )
    _, notes = assembled_source(*cells)
    assert notes[0] == (
        "cell 2, line 1: split_heads is set here, in code that is dropped (top-level code that runs), "
        "and the code that is sent uses it: set it in a cell of its own (an assignment or a def at "
        "the top level)"
    )


def test_without_names_every_definition_is_kept():
    bare = Exercise.model_validate({**ATTENTION.model_dump(), "names": {}})
    source, _notes = assembled_source(
        "import torch\ndef helper():\n    return torch.ones(1)\nhelper()", exercise=bare
    )
    assert "def helper" in source and "import torch" in source and "helper()\n" not in source


# -- reading it back ------------------------------------------------------------------------------


def test_origin_reads_back_only_its_own_kind_of_note():
    header = notebooks._header("nb.ipynb")
    forged = [
        {"id": "{x.__class__.__mro__}", "params": {"x": 1}},  # a format string of the learner's
        {"id": notebooks.DROPPED_LINE, "params": {"cell": 1, "line": 1, "text": "x", "why": {"id": "evil"}}},
        {
            "id": notebooks.DROPPED_LINE,
            "params": {"cell": [1], "line": 1, "text": "x", "why": {"id": "a shell command"}},
        },
    ]
    text = "\n".join(
        [header, *(notebooks.NOTE + json.dumps(f) for f in forged), notebooks.NOTE + "{not json"]
    )
    assert origin(text).notes == ()
    assert origin("print('not assembled')") is None
    assert located(b"x = 1\n", 1) is None


def test_cell_ranges():
    assert notebooks.cell_ranges([7, 3, 4, 5, 9, 10]) == "3-5, 7, 9-10"


# -- hostile notebooks: each a clear error naming the notebook ------------------------------------

HOSTILE = {
    "too large": b" " * (100 << 20),  # 100 MB of JSON's white space
    "not JSON": b"\x89PNG\r\n\x1a\n not a notebook",
    "nested": b"[" * 100_000 + b"]" * 100_000,
    "a list": b"[]",
    "nbformat 3": json.dumps({"nbformat": 3, "nbformat_minor": 0, "worksheets": [], "metadata": {}}).encode(),
    "no cells": json.dumps({"nbformat": 4, "nbformat_minor": 5, "metadata": {}}).encode(),
    "cells of numbers": json.dumps(
        {"nbformat": 4, "nbformat_minor": 5, "metadata": {}, "cells": [1, 2]}
    ).encode(),
    "a source of numbers": json.dumps(
        {
            "nbformat": 4,
            "nbformat_minor": 5,
            "metadata": {},
            "cells": [{"cell_type": "code", "source": [1, 2]}],
        }
    ).encode(),
    "a NUL": notebook("x = 1\x00"),
    "10,000 cells": notebook(*["x = 1"] * 10_000),
    "3 MB of code": notebook("x = 1\n" * 500_000),
}
EXPECTED = {
    "too large": f"is larger than {NOTEBOOK_BYTES >> 20} MiB",
    "not JSON": "is not a notebook: not JSON",
    "nested": "is not a notebook",
    "a list": "is not a notebook: its JSON is not an object",
    "nbformat 3": "is a notebook of nbformat 3, not 4",
    "no cells": "has no list of cells",
    "cells of numbers": "cell 1 is not a cell",
    "a source of numbers": "cell 1 is not a cell",
    "a NUL": "cell 1 holds a NUL character",
    "10,000 cells": f"has 10000 cells, more than the {NOTEBOOK_CELLS}",
    "3 MB of code": "the code of its cells is larger than 2 MiB",
}


@pytest.mark.parametrize("case", sorted(HOSTILE))
def test_a_hostile_notebook_is_a_clear_error_naming_it(case, tmp_path):
    with pytest.raises(NotebookError) as e:
        assemble(HOSTILE[case], ATTENTION, "evil.ipynb")
    assert str(e.value).startswith("evil.ipynb"), str(e.value)
    assert EXPECTED[case] in str(e.value), str(e.value)
    assert len(str(e.value)) < 400
    # read as a learner's file: that learner's problem, never an exception
    path = tmp_path / "evil.ipynb"
    path.write_bytes(HOSTILE[case])
    matched = read_learner(path, ATTENTION)
    assert matched.files == {} and matched.problem.startswith("evil.ipynb"), matched.problem
    with pytest.raises(InvalidSubmission):
        read_submission(ATTENTION, path)


def test_a_nul_in_a_writefile_name_is_refused():
    with pytest.raises(NotebookError, match="cell 1 holds a NUL character"):
        assemble(notebook("%%writefile 'attention.py\x00'\nx = 1"), ATTENTION, "x.ipynb")


def test_notes_are_capped():
    got = assemble(notebook(*[f"print({i})" for i in range(200)]), ATTENTION)
    assert len(got.notes) == NOTEBOOK_NOTES
    assert str(got.notes[-1]) == f"and {200 - NOTEBOOK_NOTES + 1} more notes"


# -- where notebooks are read: grade, batch, the client -------------------------------------------


def test_a_class_that_hands_in_notebooks(tmp_path):
    cls = tmp_path / "class"
    (cls / "carol").mkdir(parents=True)
    (cls / "alice.ipynb").write_bytes(notebook(*DONE_WHEN))
    (cls / "bob.ipynb").write_bytes(b"{broken")
    (cls / "carol" / "work.ipynb").write_bytes(notebook(SOLUTION))
    (cls / "carol" / "helpers.py").write_text("EPS = 1e-5\n")
    (cls / "dave.py").write_text(SOLUTION)  # the class layout's rule is kept: dave's attention.py
    found = {i.learner: i for i in read_source(cls, ATTENTION).incoming}
    assert sorted(found) == ["alice", "bob", "carol", "dave"]
    assert found["alice"].problem is None and found["alice"].found == {"attention.py": "alice.ipynb"}
    assert found["bob"].files == {} and "bob.ipynb is not a notebook: not JSON" in found["bob"].problem
    assert sorted(found["carol"].files) == ["attention.py", "helpers.py"]
    assert found["dave"].files == {"attention.py": SOLUTION.encode()}
    # a batch grades the files it stored: their notes are the grade's warnings there too
    warnings = [str(w) for w in check_files(ATTENTION, found["alice"].files).warnings]
    assert 'cell 2, line 1: dropped "!pip install torch" (a shell command)' in warnings


def test_a_file_named_as_the_exercise_wins_over_a_notebook_and_a_notebook_over_a_stray_py(tmp_path):
    (tmp_path / "a").mkdir()
    (tmp_path / "a" / "attention.py").write_text(SOLUTION)
    (tmp_path / "a" / "nb.ipynb").write_bytes(b"{broken")  # never read
    assert read_learner(tmp_path / "a", ATTENTION).files == {"attention.py": SOLUTION.encode()}
    (tmp_path / "b").mkdir()
    (tmp_path / "b" / "scratch.py").write_text("EPS = 1\n")
    (tmp_path / "b" / "nb.ipynb").write_bytes(notebook(SOLUTION))
    files = read_learner(tmp_path / "b", ATTENTION).files
    assert sorted(files) == ["attention.py", "scratch.py"] and origin(files["attention.py"]) is not None
    (tmp_path / "b" / "nb2.ipynb").write_bytes(notebook(SOLUTION))
    assert "2 notebooks" in read_learner(tmp_path / "b", ATTENTION).problem


def test_pack_notebook_packs_what_pack_packs(tmp_path):
    data = notebook(*DONE_WHEN)
    (tmp_path / "nb.ipynb").write_bytes(data)
    on_disk, in_kernel = pack(ATTENTION, tmp_path / "nb.ipynb"), pack_notebook(ATTENTION, data, "nb.ipynb")
    assert on_disk.files == in_kernel.files and on_disk.digest == in_kernel.digest
    assert str(on_disk.origins["attention.py"]) == "from nb.ipynb, cells 3-5, 7-8"
    assert on_disk.notes == in_kernel.notes and len(on_disk.notes) == 9 and on_disk.problems == ()


def test_an_import_error_of_an_assembled_file_names_its_cell(corpus_grades, tmp_path):
    # the constant the functions need is kept, and raises when the module is imported
    cells = ("import torch", "NEG = torch.finfo(dtype).min", SOLUTION.replace("float(\"-inf\")", "NEG"))
    path = tmp_path / "nb.ipynb"
    path.write_bytes(notebook(*cells))
    grade = corpus_grades.grade("day45-attention", path)
    assert grade.error is not None and not grade.passed
    assert "raised NameError at attention.py:" in grade.error.message
    assert "(nb.ipynb cell 2, line 1): name 'dtype' is not defined" in grade.error.message
