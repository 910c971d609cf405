"""Templates of text that other parts of the grader build as plain English strings.

Grading and jail errors (grader/grading.py, grader/submission.py, grader/jail/, grader/session.py)
reach a report as plain text. Their templates are listed here, marked for extraction, so the
catalogs translate them: a report matches such text against the templates (grader.locale
.localize_text) and shows the zh-TW form with the same values. Text that matches no template is
shown as it is, in English. Keep these in step with the code that writes the strings;
tests/test_i18n.py checks a sample of real ones.
"""
from grader.locale import N_

GRADING = [
    N_("importing {module}.py raised {type} at {where}: {message}"),
    N_("importing {module}.py raised {type}: {message}"),
    N_("{file} does not define {missing} (SPEC asks for {names})"),
    N_("the submission could not be loaded: {detail}"),
    N_("the submission used up its {seconds} s wall-clock budget; the checks it had not reached "
       "by then fail"),
]

SUBMISSION = [
    N_("{path} is a symbolic link; submit the file itself"),
    N_("{name} is not one of this exercise's files: {files}"),
    N_("missing file: {missing} (this exercise needs {files})"),
    N_("missing files: {missing} (this exercise needs {files})"),
    N_("{name} is a symbolic link; symbolic links are refused"),
    N_("{name} is not a regular file"),
    N_("{name} is larger than {size} KiB"),
    N_("{name} is not UTF-8 text (byte {byte})"),
    N_("{name} line {line}, column {column}: syntax error: {error}"),
    N_("{name} cannot be parsed: {type}"),
]

JAIL = [
    N_("the submission's files are larger than the jail accepts"),
    N_("no jail could be started: {detail}"),
    N_("the jail could not be set up: {detail}"),
    N_("the submission ran out of memory (limit {mb} MiB): {type}: {message}"),
    N_("the jail did not read its input within {seconds} s"),
    N_("the jail broke the protocol ({detail})"),
    N_("no answer within {seconds} s"),
    N_("the jail's zygote failed: {detail}"),
    N_("the submission closed its connection to the grader and was stopped"),
    N_("the jail was stopped by the grader"),
    N_("the submission used up its {seconds} s of CPU time"),
    N_("the process was killed (SIGKILL) by the kernel, most likely for using too much memory"),
    N_("the submission made a system call the jail forbids (such as mount, ptrace, unshare or "
       "bpf) and was stopped"),
    N_("the submission wrote more than {mb} MiB (printed output or a file) and was stopped"),
    N_("the process died with {signal}"),
    N_("the process exited (code {code}) while the grader was waiting for an answer: exit(), "
       "os._exit() or a fatal error in the submission"),
    N_("the submission used up its {seconds} s"),
    N_("importing {module}.py again in a fresh jail raised {type}: {message}"),
    N_("this object lived in a jail that has since died"),
    N_("a segmentation fault (SIGSEGV)"),
    N_("a bus error (SIGBUS)"),
    N_("an abort (SIGABRT)"),
    N_("an illegal instruction (SIGILL)"),
    N_("an arithmetic fault (SIGFPE)"),
]
