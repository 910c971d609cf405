"""Every cap the grader puts on what a learner sends, in one table.

`Limits` holds what an exercise may set in its exercise.toml `[limits]` table; it travels from
`grader.models.Exercise` through the session to the jail (`Limits.for_jail()`, plain values: the
jail's side imports nothing of the grader). The module constants below it are the caps that are
the same for every exercise. Each is used under this name (or imported under its old one) where it
bites; nothing else in grader/ or reports/ writes one of these numbers.

Per exercise (exercise.toml `[limits]`, defaults as SPEC.md's "Default limits"):

    =============  =========  ===============================================================
    key            default    bounds
    =============  =========  ===============================================================
    wall_seconds   120        the whole submission, every check's calls together
    call_seconds   60         any one call into the jail with no reference counterpart to
                              time (else see CALL_FLOOR_SECONDS); at most what wall_seconds left
    memory_mb      4096       address space on top of what the warm runtime maps (RLIMIT_AS)
    processes      256        processes and threads of the jail's own uid (RLIMIT_NPROC)
    file_size_mb   64         any file written, printed output included (RLIMIT_FSIZE)
    output_bytes   1 MiB      printed output kept for the report
    open_files     256        file descriptors (RLIMIT_NOFILE)
    tmp_mb         256        the jail's private /tmp (a tmpfs)
    cpu_seconds    (wall)     CPU time (RLIMIT_CPU); unset: wall_seconds
    =============  =========  ===============================================================

For every exercise:

    ============================  ========  =================================================
    constant                      value     bounds
    ============================  ========  =================================================
    LEARNER_FILE_BYTES            1 MiB     one learner file, read from disk or an archive
    SUBMISSION_BYTES              8 MiB     all of one submission's files, sent to the jail
    HELPER_FILES                  16        helper modules: other .py files beside the
                                            learner files, sent with them ...
    HELPER_BYTES                  256 KiB   ... and their size together (more: left out,
                                            with a warning)
    NOTEBOOK_BYTES                8 MiB     a notebook (.ipynb), outputs included, before it
                                            is parsed (grader.intake.notebooks) ...
    NOTEBOOK_CELLS                2,000     ... its cells, the code in them (characters) ...
    NOTEBOOK_CODE_CHARS           2 Mi
    NOTEBOOK_NOTES                50        ... and the notes of what assembling it left out
                                            (each a grade warning), the last one a count
    JAIL_READY_SECONDS            30        a jail's start-up (at most call_seconds)
    CALL_FLOOR_SECONDS            2         one call into the jail, at least (its budget is
    CALL_BUDGET_FACTOR            20        max(floor, factor x the reference's time for the
                                            same call); no reference counterpart: call_seconds
    CALL_TIMING_SECONDS           0.5       timing a reference call stops after this: longer
                                            work gets call_seconds (timing costs no more)
    REPLAY_EVENTS                 200       requests of one check recorded, to name its bug
    REPLAY_VALUE_ELEMENTS         1 Mi      tensor elements of a reply kept for that
    FINGERPRINT_SECONDS           20        naming a submission's bugs (replays, jail reruns)
    FINGERPRINT_NAMES             4         known bugs named as facts for one submission, at most
    FINGERPRINT_CANDIDATES        6         known bugs listed as its candidates, at most
    STACK_SAMPLE_SECONDS          0.2       a call over budget: the wait for its stack sample
    STACK_SAMPLE_BYTES            16 KiB    ... the bytes of it read (learner text)
    STACK_FRAMES                  3         ... the learner's frames kept, innermost first
    REPLAY_CACHE_BYTES            128 MiB   what a grading process keeps for the next grade
                                            (least recently used dropped): mutants' answers
                                            to a failed check's requests, ...
    BUDGET_SIGNATURES             10,000    ... call signatures' reference times ...
    EXPLORED_RUNS                 500       ... explorations' drawn cases ...
    PYTEST_SESSIONS               16        ... pytest sessions, hidden tests collected
    ARCHIVE_MEMBERS               50,000    members of one archive (a class's export)
    ARCHIVE_BYTES                 2 GiB     an archive on disk, and its members' inflated size
    NESTED_ARCHIVE_BYTES          64 MiB    a learner's own zip inside an export
    CENTRAL_DIRECTORY_BYTES       32 MiB    an archive's central directory, before it is parsed
    LEARNER_FOLDER_FILES          5,000     files walked in one learner's folder
    LEARNER_ID_CHARS              200       a learner id, after canonicalising
    WRONG_EXERCISE_SHARE          1/2       a batch refuses "wrong exercise?" when more than
    WRONG_EXERCISE_LEARNERS       2         this share of the learners, and at least this
                                            many, hold none of the exercise's files by name
    METADATA_BYTES                16 MiB    Gradescope's submission_metadata.yml
    METADATA_NODES                500,000   YAML nodes of that file (no aliases at all)
    METADATA_DEPTH                32        nesting of that file's mappings and lists
    INFLATION_RATIO               200       inflated / compressed size of one member ...
    INFLATION_CHECKED_ABOVE       1 MiB     ... larger than this
    MESSAGE_CHARS                 64 Ki     one message of a check (characters), and a learner
                                            text inside it (grader.locale)
    MESSAGE_BYTES                 64 KiB    one message in a report (UTF-8), printed output too
    REPORT_BYTES                  1 MiB     one whole report
    REPORT_CHROME_BYTES           160 KiB   of a report, kept for what is not learner text
    GRADE_TEXT_BYTES              1 MiB     a stored grade's messages, params and evidence
                                            together (printed output apart: output_bytes)
    GRADE_PART_BYTES              1 KiB     what each message keeps when they share that out
    SHORT_CHARS                   200       a key, a type name or a `file.py:12` location
                                            from the jail
    MSGID_CHARS                   4 Ki      a message's id (its English template)
    DATA_ITEMS                    1,000     entries of a list or dict in a grade's data
    DATA_DEPTH                    8         nesting of a grade's data (params, evidence)
    GRADER_ATTEMPTS               3         gradings the grader itself may fail on one
                                            submission and version before it is a `crash`
    COPY_NOISE_CHARS              25        copies: a match of normalised code this long
                                            counts (copydetect's noise threshold) ...
    COPY_GUARANTEE_CHARS          30        ... and any match this long is found
    NEAR_COPY_SIMILARITY          0.8       a near-copy pair: this share of one learner's own
                                            code (starter excluded) is in the other's ...
    NEAR_COPY_MIN_CHARS           100       ... and at least this much normalised code
    COPY_PAIRS_SHOWN              200       near-copy pairs listed in a class report
    COPY_VIEWS                    20        of those, side-by-side views
    COPY_VIEW_CHARS               20,000    of each file in a side-by-side view
    UPLOAD_BYTES                  8 MiB     one upload to the grading server (its zip)
    UPLOAD_FILES                  200       members of one upload
    REQUEST_BYTES                 64 KiB    any other request body (JSON)
    QUEUE_DEPTH                   2,000     queued jobs of one gradebook, then 429
    LEARNER_PENDING               50        one learner's uploads waiting or grading, then 429
    QUEUE_RETRY_SECONDS           30        the Retry-After of a full queue
    LEASE_SECONDS                 60        a job's lease, renewed every quarter of it
    JOB_ATTEMPTS                  3         leases of one job, then a dead letter
    TOKEN_BYTES                   32        random bytes of an access token (SHA-256 stored)
    IDEMPOTENCY_KEY_CHARS         200       an upload's Idempotency-Key
    SESSION_SECONDS               12 h      a browser session
    CLIENT_TIMEOUT_SECONDS        30        one HTTP request of the student client
    CLIENT_RETRIES                3         tries of a request after a network error
    WAIT_SECONDS                  900       how long `grader submit --wait` waits
    LONG_POLL_SECONDS             20        the most one GET of a submission waits for its grade
    LONG_POLL_RECHECK_SECONDS     3         a waiting GET looks at the gradebook itself so often
    CLIENT_RESPONSE_BYTES         64 MiB    one answer the student client reads
    CLIENT_JSON_VALUES            1,000,000 values in one JSON answer, counted before parsing
    CLIENT_JSON_CONTAINERS        100,000   objects and arrays in one JSON answer, likewise
    CLIENT_LIST_ITEMS             20,000    rows of one list answer (a class's grades, exercises)
    SUBMISSIONS_PAGE              50        submissions in a page of a list (no `limit` asked)
    SUBMISSIONS_PAGE_MAX          200       ... the most a page holds (`limit` above it: 422)
    SUBMISSIONS_PER_EXERCISE      200       one learner's stored uploads of one exercise, then
                                            409 (a repeat of the latest is no new upload)
    HOME_SUBMISSIONS              20        the newest submissions a learner's home page lists
    HISTORY_SUBMISSIONS           2,000     submissions `grader history` reads, page by page
    KEEP_ALIVE_SECONDS            5         an idle connection between two requests
    REQUEST_HEAD_SECONDS          10        a request's line and headers
    REQUEST_BODY_SECONDS          120       a request's body, after its headers
    HEAD_BYTES                    16 KiB    a request's line and headers
    CONNECTIONS_PER_CLIENT        256       open connections of one address, then 429 at accept
    MAX_CONNECTIONS               4,096     open connections in all, then 503 at accept ...
    FD_RESERVE                    256       ... and at most the open-file limit less these
    LISTEN_BACKLOG                128       connections waiting to be accepted; one accept burst
    UPLOAD_MEMORY_BYTES           256 KiB   of an upload in memory; the rest in a temporary file
    ANSWER_CHARS                  200       a quiz answer string, before and after normalising
    ANSWER_ELEMENTS               10,000    a list answer, all elements together
    ANSWER_DIMS                   4         nesting depth of a list answer
    ANSWER_DECIMAL_EXPONENT       400       |e| in a literal like 1.5e-7
    ANSWER_EXACT_BITS             4096      numerator / denominator of an exact intermediate
    ANSWER_SHOWN_CHARS            40        learner text quoted back in a quiz's feedback
    ============================  ========  =================================================

Inside the jail (grader/jail/wire.py, zygote.py, sandbox.py run on the untrusted side, which can
import only the files of its own folder, so they keep their own constants; `JAIL_SIDE` mirrors
them here and tests/test_exercise_files.py holds them equal):

    ============================  ========  =================================================
    wire.MAX_FRAME_BYTES          64 MiB    one message on the wire, tensors included
    wire.MAX_DEPTH                32        nesting of a decoded value
    wire.MAX_OBJECTS              256 Ki    values of one message, counted before decoding
    wire.DECODED_PER_BYTE         8         heap a decoded message may take per byte (+1 MiB)
    wire.MAX_STRING               64 KiB    an exception message and the like, from the jail
    zygote.MAX_CONTROL            64 KiB    one control message to the zygote
    zygote.DEFAULT_TMP_MB         256       the spare jail's /tmp (= Limits.tmp_mb's default)
    sandbox.SHM_MB, SHM_INODES    16, 256   the jail's /dev/shm: MiB and files
    sandbox.SUBMISSION_MB, ...    16, 256   the jail's /submission tmpfs: MiB and files
    sandbox.TMP_INODES            4096      files in the jail's /tmp (its size: Limits.tmp_mb)
    ============================  ========  =================================================

Example:

    >>> Limits()                                         # SPEC's defaults
    Limits(wall_seconds=120.0, call_seconds=60.0, memory_mb=4096, ...)
    >>> Limits.model_validate({"wall_seconds": 30, "memory_mb": 1024}).for_jail()["cpu_seconds"]
    30.0
    >>> Limits.model_validate({"wall_second": 30})       # a typo is an error, not the default
    Traceback (most recent call last):
    pydantic_core._pydantic_core.ValidationError: ... Extra inputs are not permitted ...
"""

from __future__ import annotations

from pydantic import BaseModel, ConfigDict

KiB, MiB, GiB = 1 << 10, 1 << 20, 1 << 30


class Limits(BaseModel):
    """What one exercise allows a submission: exercise.toml `[limits]`, and the jail's limits."""

    model_config = ConfigDict(extra="forbid", frozen=True)

    wall_seconds: float = 120.0  # the whole submission
    call_seconds: float = 60.0  # any single call
    memory_mb: int = 4096  # address space on top of what the warm runtime maps
    processes: int = 256  # processes and threads of the jail's own uid
    file_size_mb: int = 64  # any file written, printed output included
    output_bytes: int = 1 * MiB  # printed output kept for the report
    open_files: int = 256  # file descriptors of a jail process
    tmp_mb: int = 256  # the jail's private /tmp
    cpu_seconds: float | None = None  # default: wall_seconds

    def for_jail(self) -> dict:
        """The limits as plain values, as the zygote and sandbox.set_limits read them."""
        d = self.model_dump()
        d["cpu_seconds"] = self.cpu_seconds or self.wall_seconds
        return d


# -- learner files ----------------------------------------------------------------------------
LEARNER_FILE_BYTES = 1 * MiB  # one learner file (grader.intake.submission, grader.intake.sources)
SUBMISSION_BYTES = 8 * MiB  # all files of one submission, as the jail receives them
HELPER_FILES = 16  # a learner's own helper modules (grader.intake.sources.match_files) ...
HELPER_BYTES = 256 * KiB  # ... and their bytes together; past either, the rest is left out
# a notebook, assembled into learner files (grader.intake.notebooks): its bytes (its outputs, plots
# included, are read too: "clear all outputs" is the hint), its cells, and the notes it carries
NOTEBOOK_BYTES = 8 * MiB
NOTEBOOK_CELLS = 2_000  # a course's notebook has a few hundred at most
# the code of its cells, all of them: the assembled file is a LEARNER_FILE_BYTES at most anyway, and
# reading it costs about 3 s a 2 MB of one-line statements (parsed, each looked at)
NOTEBOOK_CODE_CHARS = 2 * MiB
NOTEBOOK_NOTES = 50
JAIL_READY_SECONDS = 30.0  # a jail's start-up, when call_seconds is longer

# -- time per call (grader.grading.budgets): max(floor, factor x the reference's own time for that call) --
CALL_FLOOR_SECONDS = 2.0  # any call into the jail may take this long, however fast the reference
CALL_BUDGET_FACTOR = 20.0  # ... or this many times the reference's time for the same call
CALL_TIMING_SECONDS = 0.5  # a reference call timed no longer than this (the bug hunt's whole train())
# -- naming a failed check's bug (grader.grading.replay, grader.grading.fingerprints) ---------------
REPLAY_EVENTS = 200  # requests of one check recorded for replay; the rest are not compared
REPLAY_VALUE_ELEMENTS = 1 << 20  # a reply with more tensor elements is not kept for comparing
FINGERPRINT_SECONDS = 20.0  # naming one submission's bugs, in all (replays and jail reruns)
FINGERPRINT_NAMES = 4  # known bugs named as facts for one submission, at most (a bug hunt's starter has 4)
FINGERPRINT_CANDIDATES = 6  # known bugs listed as candidates for one submission, at most
STACK_SAMPLE_SECONDS = 0.2  # a call over budget: how long the jail's stack sample is waited for
STACK_SAMPLE_BYTES = 16 * KiB  # ... and read of it (the text is the learner's)
STACK_FRAMES = 3  # the learner's frames kept from it, innermost first

# -- what a grading process keeps for the next grade (least recently used dropped first) --------
# a mutant's answers to a failed check's requests (grader.grading.replay: deterministic, and learners with
# one bug fail one check alike, with the same requests) ...
REPLAY_CACHE_BYTES = 128 * MiB
BUDGET_SIGNATURES = 10_000  # ... the reference's time per call signature (grader.grading.budgets) ...
EXPLORED_RUNS = 500  # ... an exploration's drawn cases, when none failed (grader.grading.explore) ...
PYTEST_SESSIONS = 16  # ... a pytest session with an exercise's hidden tests collected (grader.grading.runner)

# -- archives (grader.intake.sources: a class's export, read in memory, never extracted) ------------
ARCHIVE_MEMBERS = 50_000  # members of one archive
ARCHIVE_BYTES = 2 * GiB  # an archive on disk, and its members' declared inflated size
NESTED_ARCHIVE_BYTES = 64 * MiB  # a learner's own zip inside the export
METADATA_BYTES = 16 * MiB  # submission_metadata.yml
INFLATION_RATIO = 200  # inflated / compressed size of one member, and of a whole archive ...
INFLATION_CHECKED_ABOVE = 1 * MiB  # ... that inflates to more than this
# read from the End Of Central Directory record before zipfile parses the directory: 50,000
# members with 600-byte names fit; 1.4 million entries (686 MB as ZipInfo objects) do not
CENTRAL_DIRECTORY_BYTES = 32 * MiB
LEARNER_FOLDER_FILES = 5_000  # one learner's folder: more fails that learner, and is not walked
LEARNER_ID_CHARS = 200  # a learner id (an alias bomb made a 5 MB one); longer ends in a hash.
# The gradebook's learners.key column is this long (PostgreSQL refused a 256-character id).
# a batch whose learners mostly hand in none of the exercise's files by name was likely started
# with the wrong exercise (grader.intake.sources.wrong_exercise; refused unless --force): more than this
# share of the learners who handed in files, and at least this many (one odd learner is no pattern)
WRONG_EXERCISE_SHARE = 0.5
WRONG_EXERCISE_LEARNERS = 2
METADATA_NODES = 500_000  # YAML nodes in submission_metadata.yml: ~200 per submission of a big class
METADATA_DEPTH = 32  # its nesting (Gradescope's is 4 deep); deeper raised RecursionError

# -- messages and reports (SPEC: "64 KiB a message, 1 MiB a report") -------------------------
MESSAGE_CHARS = 64 * KiB  # a check's message, and a learner's text inside one
MESSAGE_BYTES = 64 * KiB  # one message in a report (UTF-8); printed output too
REPORT_BYTES = 1 * MiB  # one whole report
REPORT_CHROME_BYTES = 160 * KiB  # of a report, what is not learner-influenced text

# -- a stored grade (grader.models via grader.text.bounded: whatever the jail sent) ------------
GRADE_TEXT_BYTES = REPORT_BYTES  # all messages, params and evidence of one grade together
GRADE_PART_BYTES = 1 * KiB  # each message's floor when a grade's text is shared out
SHORT_CHARS = 200  # a dict key, a type name, a `file.py:12` location
MSGID_CHARS = 4 * KiB  # a message's id: its English template, the grader's own text
DATA_ITEMS = 1_000  # entries of one list or dict inside a grade's data
DATA_DEPTH = 8  # nesting of a grade's data

# -- the batch (grader.course.batch) ------------------------------------------------------------------
GRADER_ATTEMPTS = 3  # gradings of one submission and version the grader may fail, then `crash`

# -- copies in the class report (grader.course.copies): a hint for a person, never a verdict ---------
# Winnowing as copydetect (and MOSS) does it, over the code with names and strings replaced by one
# letter each (so renamed variables still match), the starter's fingerprints removed: a match
# must be COPY_NOISE_CHARS of that code long to count, and any match of COPY_GUARANTEE_CHARS is
# found (the winnowing window is the difference plus one).
COPY_NOISE_CHARS = 25  # copydetect's default noise threshold
# copydetect's default too: window 1, every k-gram kept. A wider window keeps fewer, but which
# ones depends on Python's hash(), randomised per process: the same class would get another
# report on every run (30 gave 247 to 254 pairs of 60 learners in three runs).
COPY_GUARANTEE_CHARS = 25
NEAR_COPY_SIMILARITY = 0.8  # a pair listed: this share of one learner's own code is in the other's
NEAR_COPY_MIN_CHARS = 100  # ... and at least this much of it (a few common lines are no copy)
COPY_PAIRS_SHOWN = 200  # near-copy pairs listed in a class report, most similar first
COPY_VIEWS = 20  # of those, side-by-side views shown
COPY_VIEW_CHARS = 20_000  # of each file in a side-by-side view

# -- the grading server (grader.service, grader.store.queue, grader.client) ------------------
UPLOAD_BYTES = 8 * MiB  # one upload (a zip of the learner files), the request body included
UPLOAD_FILES = 200  # members of one upload; its learner files are capped as above
REQUEST_BYTES = 64 * KiB  # any other request body (JSON)
QUEUE_DEPTH = 2_000  # queued jobs of one gradebook; more answers 429 with Retry-After
QUEUE_RETRY_SECONDS = 30  # the Retry-After of a full queue
# one learner's uploads queued or grading; more answers 429 rate-limited, so an exercise without a
# rate limit cannot let one learner fill the queue ahead of everyone (the load tests send 40 at once)
LEARNER_PENDING = 50
LEASE_SECONDS = 60.0  # a job's lease; a grading server renews it every LEASE_SECONDS / 4
JOB_ATTEMPTS = GRADER_ATTEMPTS  # leases of one job (a lost lease counts), then a dead letter
TOKEN_BYTES = 32  # random bytes of an access token (only its SHA-256 is stored)
IDEMPOTENCY_KEY_CHARS = 200  # an upload's Idempotency-Key (the client sends a UUID, 36)
SESSION_SECONDS = 12 * 3600  # a browser session's cookie
CLIENT_TIMEOUT_SECONDS = 30.0  # one HTTP request of the student client
CLIENT_RETRIES = 3  # tries of one request after a network error (same idempotency key)
WAIT_SECONDS = 900.0  # `grader submit --wait` gives up waiting after this (the grade goes on)
# GET /submissions/{id}?wait=S answers once the grade is recorded or S (at most this) has passed;
# well inside CLIENT_TIMEOUT_SECONDS, so a waiting request is never taken for a lost one
LONG_POLL_SECONDS = 20.0
# this server's dispatcher wakes a waiting GET at once; another server's grade (one gradebook, several
# `grader serve`) is seen by looking this often, as the client's own polls at their slowest did
LONG_POLL_RECHECK_SECONDS = 3.0
CLIENT_RESPONSE_BYTES = 64 * MiB  # one answer the client reads: a history with its grades, a report
# a JSON answer's shape, counted in its bytes before it is parsed (grader.client.api): 4 MiB of `{}`
# would parse into 1.4 million dicts, 90 MB and more once read into models
CLIENT_JSON_VALUES = 1_000_000  # values: a grade's evidence, a class's grades, far below this
CLIENT_JSON_CONTAINERS = 100_000  # objects and arrays (~60 bytes each parsed): a class of 20,000 has 40,000
CLIENT_LIST_ITEMS = 20_000  # rows of one list answer: a class's grades, the exercises, a status

# -- history and lists (grader.store.queue, grader.service, grader.client) ---------------------
# a list of submissions is paged by id (GET /api/v1/submissions?limit=&cursor=), each item a summary
# (no checks, no evidence): a page costs the same with 5 submissions stored or 500
SUBMISSIONS_PAGE = 50  # a page when the caller asks for no `limit`
SUBMISSIONS_PAGE_MAX = 200  # the most one page holds; a larger `limit` is refused (422)
# one learner's uploads of one exercise that the server stores (a dead letter, the server's failure,
# not counted); past it 409: what counts, a status and a class report read them all
SUBMISSIONS_PER_EXERCISE = 200
HOME_SUBMISSIONS = 20  # the newest submissions a learner's home page lists
HISTORY_SUBMISSIONS = 2_000  # `grader history` reads at most this many, page by page, then says so
# the HTTP edge (grader.service.edge, grader.service.app): what one connection may hold, how long
KEEP_ALIVE_SECONDS = 5.0  # an idle connection between two requests (uvicorn's timeout_keep_alive)
REQUEST_HEAD_SECONDS = 10.0  # a request's line and headers, from its first byte or the connection's
# a body, from its headers: UPLOAD_BYTES at 70 KB/s (a slow link); an upload is a few KiB of code
REQUEST_BODY_SECONDS = 120.0
HEAD_BYTES = 16 * KiB  # a request's line and headers (h11's max_incomplete_event_size)
# open connections of one client address: a classroom behind one NAT address stays well inside it
CONNECTIONS_PER_CLIENT = 256
MAX_CONNECTIONS = 4_096  # open connections in all, and never more than the open-file limit allows ...
FD_RESERVE = 256  # ... less these: the gradebook, the workers' pipes, the logs, a burst of accepts
# the listening socket's queue, and how many connections asyncio accepts at one wake-up (each an open
# file before the edge can refuse it): FD_RESERVE keeps room for one such burst
LISTEN_BACKLOG = 128
UPLOAD_MEMORY_BYTES = 256 * KiB  # of an upload kept in memory; the rest is spooled to a temporary file

# -- quiz answers (grader.catalog.answers) ------------------------------------------------------------
ANSWER_CHARS = 200  # a string answer, before and after normalisation
ANSWER_ELEMENTS = 10_000  # a list answer, all elements together
ANSWER_DIMS = 4  # nesting depth of a list answer
ANSWER_DECIMAL_EXPONENT = 400  # |e| in a literal like 1.5e-7
ANSWER_EXACT_BITS = 4096  # numerator / denominator of an exact intermediate value
ANSWER_SHOWN_CHARS = 40  # learner text quoted back in a quiz's feedback

# -- the jail's own constants (its side cannot import this module; mirrored, held equal in tests)
JAIL_SIDE = {
    "wire.MAX_FRAME_BYTES": 64 * MiB,  # one message on the wire, tensors included
    "wire.MAX_DEPTH": 32,  # nesting of lists, tuples and dicts of a decoded value
    "wire.MAX_OBJECTS": 256 * KiB,  # values of one message, counted before it is decoded
    "wire.DECODED_PER_BYTE": 8,  # heap a decoded message may take per byte, plus 1 MiB
    "wire.MAX_STRING": 64 * KiB,  # exception messages and the like are cut to this
    "zygote.MAX_CONTROL": 64 * KiB,  # one control message to the zygote
    "zygote.DEFAULT_TMP_MB": Limits.model_fields["tmp_mb"].default,  # the spare's /tmp
    "sandbox.SHM_MB": 16,  # the jail's /dev/shm
    "sandbox.SHM_INODES": 256,
    "sandbox.SUBMISSION_MB": 16,  # the tmpfs the learner's files are copied into
    "sandbox.SUBMISSION_INODES": 256,
    "sandbox.TMP_INODES": 4096,  # files in the jail's /tmp
}
