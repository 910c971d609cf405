"""Submitting from inside a Jupyter or Colab notebook: the kernel's cells, assembled and sent.

    from grader.client import notebook
    notebook.login("https://grader.example.edu")   # once; asks for the token without showing it
    notebook.submit("day45-attention")             # or: %load_ext grader.client.notebook
                                                   #     %grader_submit day45-attention

What is sent is what the kernel ran: IPython's input history as typed (`In`, raw: magics and
`!pip` lines as the learner wrote them), each cell's text once, at the place it last ran, in the
order the cells ran, the way the kernel's state was made. A cell that did not compile never ran
and is left out, with a note that says where its syntax error is. The cells become a notebook
(nbformat), which is assembled into the exercise's files exactly as `grader submit EX nb.ipynb`
assembles a notebook file (grader.intake.notebooks): its notes, the local pre-checks that refuse a
submission bound to fail (nothing is spent), the files with their sizes, digest and the cells
they came from. Then the upload, with its Idempotency-Key, a progress bar (tqdm.auto) while the
grade is made, and the report shown in the cell as the HTML the server's pages show, in the
learner's language.

"cell N" is the cell's number as the notebook shows it (`In [N]`, `[N]:`), its execution count.

The report is the server's HTML, and a server's text is untrusted like any other: it is shown in
a sandboxed iframe (no script, no form, no navigation; a Content-Security-Policy that loads
nothing from anywhere, as the server's own header for a report), whose styles cannot reach the
notebook's page. Its text/plain alternative is the text report, for a front end that shows no
HTML or a saved notebook that is no longer trusted.

Every failure is said in the cell as text (`error: ...` on stderr, and what to do), never as a
traceback: no login, a refused token, a syntax error at cell N, line M, the server unreachable.

IPython and tqdm are the `notebook` extra (`pip install "gpt-bughunt-grader[notebook]"`; Colab
and Jupyter have both): only this module imports them, and only when it runs.
"""

from __future__ import annotations

import argparse
import ast
import html
import re
import shlex
import sys
import warnings
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field, replace
from typing import TYPE_CHECKING

from grader.client import show
from grader.client.errors import ClientError
from grader.errors import GraderError
from grader.limits import MESSAGE_BYTES, NOTEBOOK_BYTES, NOTEBOOK_CELLS, REPORT_BYTES
from grader.locale import LANGS, Message, lang_from_env, msg, normalize_lang
from grader.text import terminal

if TYPE_CHECKING:
    from grader.client.api import Api
    from grader.client.models import ExerciseInfo, Submission
    from grader.client.packing import Packed

KERNEL_NOTEBOOK = "kernel-history.ipynb"  # the notebook's name in the files' header and messages
TOKEN_SHOWN = "<token>"  # in place of the learner's token where a cell holds it
REPORT_FRAME_PX = 720  # the report's frame, as tall at first (the learner may drag it taller)
# The frame's document loads nothing and runs nothing: the server's REPORT_CSP for a report
# (grader/service/app.py; tests/test_notebook_kernel.py holds the two alike), less
# frame-ancestors, which a <meta> cannot say.
FRAME_CSP = "default-src 'none'; style-src 'unsafe-inline'; img-src data:"
DOCTYPE = re.compile(r"\A\s*<!doctype[^>]*>", re.IGNORECASE)
STAGES = {"queued": 1, "grading": 2, "graded": 3, "failed": 3}  # the progress bar's steps


# -- the core: the kernel's history as cells, as a notebook, as a report frame -----------------


@dataclass(frozen=True)
class Ran:
    """One cell as the kernel ran it: its number (`In [number]`) and its text as typed."""

    number: int
    source: str


@dataclass(frozen=True)
class Cells:
    ran: list[Ran]
    notes: list[Message] = field(default_factory=list)  # cells left out, and why


def executed_cells(history: Sequence[object], problem: Callable[[str], SyntaxError | None]) -> Cells:
    """The cells of `history` (IPython's raw input history: entry N is `In [N]`, entry 0 empty)
    that make the kernel's state: each text once, at the place it last ran (a cell run again
    unchanged counts where it ran last), blank ones skipped, and those `problem` finds a syntax
    error in (they never ran) left out with a note naming the cell and line. ClientError, before
    anything is compiled, when they would make a notebook larger than a notebook may be
    (NOTEBOOK_BYTES of text, NOTEBOOK_CELLS cells: cell N is `In [N]`)."""
    latest: dict[str, int] = {}
    for number, source in enumerate(history):
        if number and isinstance(source, str) and source.strip():
            latest[source] = number
    order = sorted(latest.items(), key=lambda item: item[1])
    last = order[-1][1] if order else 0
    if sum(len(source) for source, _ in order) > NOTEBOOK_BYTES or last > NOTEBOOK_CELLS:
        raise ClientError(
            msg(
                "this kernel has run {count} cells ({mib:.1f} MiB), more than a notebook may hold "
                "({cells} cells, {limit} MiB): restart the kernel and run only your solution's "
                "cells, or submit a saved notebook with grader submit EXERCISE NOTEBOOK",
                count=last,
                mib=sum(len(source) for source, _ in order) / 2**20,
                cells=NOTEBOOK_CELLS,
                limit=NOTEBOOK_BYTES >> 20,
            )
        )
    ran, notes = [], []
    for source, number in order:
        error = problem(source)
        if error is None:
            ran.append(Ran(number, source))
            continue
        notes.append(
            msg(
                "cell {cell}, line {line}: a syntax error ({error}); this cell never ran, so it is left out",
                cell=number,
                line=error.lineno or 1,
                error=str(error.msg or "invalid syntax")[:200],
            )
        )
    return Cells(ran, notes)


def history_notebook(cells: Sequence[Ran]) -> bytes:
    """The cells as an nbformat 4 notebook whose cell N is `In [N]` (grader.intake.notebooks numbers
    cells by their place): each cell at its number, with its execution count, and an empty code
    cell at every number left out."""
    import nbformat

    at = {c.number: c for c in cells}
    nb = nbformat.v4.new_notebook(
        cells=[
            nbformat.v4.new_code_cell(at[n].source, execution_count=n)
            if n in at
            else nbformat.v4.new_code_cell()
            for n in range(1, max(at, default=0) + 1)
        ]
    )
    nb.metadata["language_info"] = {"name": "python"}
    return nbformat.writes(nb).encode("utf-8")


def report_frame(report: str, title: str, height: int = REPORT_FRAME_PX) -> str:
    """The server's HTML report inside a sandboxed iframe: nothing in it runs (no allow-scripts),
    submits, navigates or loads (FRAME_CSP, the first thing of its head), and its styles stay
    inside it."""
    body = DOCTYPE.sub("", report, count=1)
    document = f'<!DOCTYPE html><meta http-equiv="Content-Security-Policy" content="{FRAME_CSP}">{body}'
    return (
        f'<iframe sandbox="" referrerpolicy="no-referrer" title="{html.escape(title, quote=True)}" '
        f'style="width: 100%; height: {int(height)}px; border: 1px solid #ccc; resize: vertical" '
        f'srcdoc="{html.escape(document, quote=True)}"></iframe>'
    )


def check_lang(lang: str | None, saved: str | None) -> str:
    """The report's language: `lang` if given (one of the course's, else ClientError naming the
    argument), else the one kept at login, else the locale's."""
    if lang is None:
        return normalize_lang(saved) if saved else lang_from_env()
    chosen = normalize_lang(lang)
    if chosen == "en" and not lang.lower().startswith("en"):
        raise ClientError(
            msg(
                "lang: {lang} is not a language of the course ({langs})",
                lang=str(lang)[:40],
                langs=", ".join(LANGS),
            )
        )
    return chosen


# -- the kernel ----------------------------------------------------------------------------------


def kernel():
    """This kernel's IPython shell, or ClientError: the module runs inside a notebook."""
    try:
        from IPython import get_ipython
    except ImportError:
        get_ipython = None
    shell = get_ipython() if get_ipython else None
    if shell is None or not hasattr(shell, "history_manager"):
        raise ClientError(
            msg(
                "notebook.submit runs in a Jupyter or Colab notebook (with IPython: pip install "
                '"gpt-bughunt-grader[notebook]"); elsewhere use grader submit EXERCISE PATH'
            )
        )
    return shell


def kernel_history(shell) -> list[object]:
    """IPython's input history as typed (`In [N]` is entry N), a copy."""
    return list(shell.history_manager.input_hist_raw)


def cell_problem(shell, source: str) -> SyntaxError | None:
    """The syntax error IPython met in `source` (a cell it therefore never ran), or None. Its
    own transformation first (magics, `!` lines), then a parse as the kernel compiles a cell
    (a top-level `await` allowed); no line of it runs."""
    try:
        code = shell.transform_cell(source)
        compile(code, "<cell>", "exec", ast.PyCF_ONLY_AST | ast.PyCF_ALLOW_TOP_LEVEL_AWAIT, dont_inherit=True)
    except SyntaxError as exc:
        return exc
    except Exception as exc:  # noqa: BLE001 - a cell IPython cannot transform never ran either
        return SyntaxError(f"{type(exc).__name__}: {exc}"[:200])
    return None


# -- saying it in the cell -----------------------------------------------------------------------


def out(message, lang: str, *, err: bool = False) -> None:
    text = show.say(message, lang) if isinstance(message, Message) else str(message)
    print(terminal(text, MESSAGE_BYTES), file=sys.stderr if err else sys.stdout, flush=True)


def failed(exc: GraderError, lang: str, server: str | None) -> None:
    """A failure as the CLI says one, `error: MESSAGE` and what to do, as text in the cell."""
    out(f"error: {show.say(getattr(exc, 'message', None) or str(exc), lang)}", lang, err=True)
    for hint in hints(exc, server):
        out(hint, lang, err=True)


def hints(exc: GraderError, server: str | None) -> list:
    """What to do, as `grader` says it (grader.cli.client.hints: when the next submission is
    possible, a closed exercise), but for a refused token the notebook's own way to give another."""
    said = show.hints(exc)
    if getattr(exc, "code", None) == "unauthorized":
        said = [h for h in said if h is not getattr(exc, "hint", None)]
        said.append(msg('paste your token again: notebook.login("{server}")', server=server or "-"))
    return said


# -- login ---------------------------------------------------------------------------------------


def login(server: str, token: str | None = None, *, lang: str | None = None, insecure: bool = False) -> None:
    """Check your token with the course's server and keep it, as `grader login` does (a 0600 file
    in your config folder), with `lang` as your reports' language. Without `token`, a prompt asks
    for it without showing it. A failure is said in the cell, never as a traceback."""
    from grader.client.config import read_login

    shown_lang = "en"
    try:
        shown_lang = check_lang(lang, read_login(server=None).lang if lang is None else None)
        _login(server, token, lang, shown_lang, insecure)
    except GraderError as exc:
        failed(exc, shown_lang, server)


def _login(server: str, token: str | None, lang: str | None, shown_lang: str, insecure: bool) -> None:
    import getpass

    from grader.client.api import log_in

    def ask() -> str:
        return getpass.getpass(show.say(msg("Token"), shown_lang) + ": ")

    keep_lang = normalize_lang(lang) if lang else None
    out(log_in(server, token, ask, insecure=insecure, lang=shown_lang, keep_lang=keep_lang), shown_lang)


# -- submit --------------------------------------------------------------------------------------


def submit(
    exercise: str,
    *,
    lang: str | None = None,
    wait: bool = True,
    use_late_day: bool = False,
    insecure: bool = False,
) -> None:
    """Submit the cells this kernel ran for `exercise`: assembled as `grader submit EX nb.ipynb`
    would, checked here first (a submission bound to fail is refused before anything is sent),
    uploaded, and (with `wait`) its report shown in the cell in `lang` (default: the language kept
    at login, else the locale's). Every failure is said in the cell as text."""
    from grader.client.config import read_login

    shown_lang, server = "en", None
    try:
        saved = read_login()
        server = saved.server
        shown_lang = check_lang(lang, saved.lang)
        if saved.server is None:
            raise ClientError(
                msg(
                    'not logged in: run notebook.login("https://...") with your course\'s server '
                    "first (or grader login --server URL in a terminal)"
                )
            )
        if saved.token is None:
            raise ClientError(
                msg('not logged in to {server}: run notebook.login("{server}")', server=saved.server)
            )
        shell = kernel()
        cells = executed_cells(kernel_history(shell), lambda source: cell_problem(shell, source))
        _submit(exercise, cells, saved.server, saved.token, shown_lang, wait, use_late_day, insecure)
    except GraderError as exc:
        failed(exc, shown_lang, server)


def prepare(info: ExerciseInfo, cells: Cells, token: str) -> Packed:
    """The exercise's files from the cells, as `grader submit EX NOTEBOOK` makes them from a
    notebook on disk (grader.client.packing.pack_notebook: assembled by grader.intake.notebooks, checked
    by grader.intake.submission.precheck, zipped), then again from only the cells some line of a file
    came from: a kernel's history grows with every cell run (the submit itself, a print to try
    something), and the notes of cells that give nothing would make each submission of the same
    code a new one. The learner is shown every note of the first; the files sent carry the
    second's. Where a cell holds the learner's token (`notebook.login(URL, "...")`), TOKEN_SHOWN
    stands in its place: whatever is sent (a line, or a note quoting it) the server keeps and its
    staff read."""
    from grader.client.packing import pack_notebook
    from grader.intake.notebooks import origin

    exercise, ran, notes = info.exercise(), [], list(cells.notes)
    for cell in cells.ran:
        if token in cell.source:
            cell = Ran(cell.number, cell.source.replace(token, TOKEN_SHOWN))
            notes.append(
                msg(
                    "cell {cell}: your token is not sent ({shown} in its place)",
                    cell=cell.number,
                    shown=TOKEN_SHOWN,
                )
            )
        ran.append(cell)
    first = pack_notebook(exercise, history_notebook(ran), KERNEL_NOTEBOOK)
    used = {n for data in first.files.values() for n in getattr(origin(data), "cells", ())}
    giving = [c for c in ran if c.number in used]
    packed = first
    if used and len(giving) < len(ran):
        packed = pack_notebook(exercise, history_notebook(giving), KERNEL_NOTEBOOK)
    return replace(packed, notes=(*notes, *first.notes))


def _submit(
    exercise: str,
    cells: Cells,
    server: str,
    token: str,
    lang: str,
    wait: bool,
    use_late_day: bool,
    insecure: bool,
) -> None:
    from grader.client.api import Api, graded, upload

    with Api(server, token, insecure=insecure, lang=lang) as api:
        info = api.exercise(exercise)
        prepared = prepare(info, cells, token)
        for line in show.packed_lines(prepared, lang):  # as grader submit shows what it sends
            out(line, lang)
        if prepared.problems:  # a problem that would fail the grade at once: said above
            raise ClientError(
                msg(
                    "nothing was sent, and no submission spent: fix what is said above, run the cell "
                    "again, then submit again"
                )
            )
        sub = upload(api, exercise, prepared.archive, use_late_day=use_late_day)
        for kind, line in show.uploaded_lines(sub, prepared.digest, exercise, wait):
            out(line, lang, err=kind == "warning")
        if not wait:
            return
        sub = graded(waited(api, sub, lang))
        show_report(api, sub, lang)


class Bar:
    """grader.client.wait's spinner, as a tqdm.auto progress bar (a widget in Jupyter and Colab,
    text elsewhere): received, grading, graded, with the time waited. Without tqdm, one line per
    change of status. It stays until `done` shows where the waiting ended."""

    live = True  # wait_until_finished polls in a thread and calls show() meanwhile

    def __init__(self, lang: str):
        self.lang, self.status, self.bar = lang, "", None
        try:
            with warnings.catch_warnings():  # "IProgress not found": text bars instead of widgets
                warnings.simplefilter("ignore")
                from tqdm.auto import tqdm

                self.bar = tqdm(total=max(STAGES.values()), bar_format="{desc} {bar} {elapsed}", leave=True)
        except ImportError:
            self.bar = None

    def show(self, text: str) -> None:
        if self.bar is not None:
            self.bar.set_description_str(text, refresh=False)
            self.bar.refresh()

    def clear(self) -> None:  # wait_until_finished's end: the bar stays for done()
        pass

    def step(self, status: str, text: str) -> None:
        if status == self.status:
            return
        self.status = status
        if self.bar is None:
            out(text, self.lang)
        else:
            self.bar.n = STAGES.get(status, 0)

    def done(self, status: str, text: str) -> None:
        self.step(status, text)
        self.show(text)
        if self.bar is not None:
            self.bar.close()


def waited(api: Api, sub: Submission, lang: str) -> Submission:
    """The submission once graded (or failed), the bar moving meanwhile. An interrupt (the
    notebook's stop button) stops the waiting, not the grading: said as such."""
    from grader.client.wait import wait_until_finished

    out(msg("submission {id}: waiting for the grade", id=sub.id), lang)
    bar = Bar(lang)

    def label(s: Submission, elapsed: float) -> str:
        text = show.say(show.status_text(s.status), lang)
        bar.step(s.status, text)
        return text

    try:
        sub = wait_until_finished(
            lambda seconds: api.submission(sub.id, wait=seconds), sub, spinner=bar, label=label
        )
    except KeyboardInterrupt:
        bar.done(sub.status, show.say(show.status_text(sub.status), lang))
        raise ClientError(
            msg(
                "stopped waiting; submission {id} is still graded: its report then: grader report {id}",
                id=sub.id,
            )
        ) from None
    bar.done(sub.status, show.say(show.status_text(sub.status), lang))
    return sub


def show_report(api: Api, sub: Submission, lang: str) -> None:
    """The report in the cell: the server's HTML in a sandboxed frame, the text report as the
    plain alternative."""
    from IPython.display import display

    page = api.report(sub.id, "html", lang)
    text = api.report(sub.id, "text", lang)
    frame = report_frame(page, show.say(msg("Grade report"), lang))
    display({"text/html": frame, "text/plain": terminal(text.rstrip("\n"), REPORT_BYTES)}, raw=True)


# -- %load_ext grader.client.notebook --------------------------------------------------------------


class _Arguments(argparse.ArgumentParser):
    """argparse that raises its complaint instead of exiting the kernel."""

    def error(self, message: str):
        raise ClientError(msg("%{magic}: {problem}", magic=self.prog, problem=message))

    def exit(self, status: int = 0, message: str | None = None):
        raise ClientError(msg("%{magic}: {problem}", magic=self.prog, problem=(message or "").strip()))


def magic_arguments(prog: str, line: str, build: Callable[[argparse.ArgumentParser], None]):
    parser = _Arguments(prog=prog, add_help=False)
    build(parser)
    try:
        words = shlex.split(line)
    except ValueError as exc:
        raise ClientError(msg("%{magic}: {problem}", magic=prog, problem=str(exc))) from None
    return parser.parse_args(words)


def grader_submit_magic(line: str) -> None:
    """%grader_submit EXERCISE [--lang en|zh-TW] [--no-wait] [--use-late-day] [--insecure]"""

    def build(p: argparse.ArgumentParser) -> None:
        p.add_argument("exercise")
        p.add_argument("--lang")
        p.add_argument("--no-wait", action="store_true")
        p.add_argument("--use-late-day", action="store_true")
        p.add_argument("--insecure", action="store_true")

    try:
        args = magic_arguments("grader_submit", line, build)
    except ClientError as exc:
        failed(exc, lang_from_env(), None)
        return
    submit(
        args.exercise,
        lang=args.lang,
        wait=not args.no_wait,
        use_late_day=args.use_late_day,
        insecure=args.insecure,
    )


def grader_login_magic(line: str) -> None:
    """%grader_login SERVER [--lang en|zh-TW] [--insecure]: the token is asked for, never typed
    into a cell (a cell's text stays in the notebook and in the kernel's history)."""

    def build(p: argparse.ArgumentParser) -> None:
        p.add_argument("server")
        p.add_argument("--lang")
        p.add_argument("--insecure", action="store_true")

    try:
        args = magic_arguments("grader_login", line, build)
    except ClientError as exc:
        failed(exc, lang_from_env(), None)
        return
    login(args.server, lang=args.lang, insecure=args.insecure)


def load_ipython_extension(ipython) -> None:
    """`%load_ext grader.client.notebook`: the %grader_submit and %grader_login line magics."""
    ipython.register_magic_function(grader_submit_magic, "line", "grader_submit")
    ipython.register_magic_function(grader_login_magic, "line", "grader_login")
