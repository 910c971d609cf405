"""Where the client finds its server and token, and which servers a token may be sent to.

`grader login` keeps `{"server", "token"}` (and the learner's `lang`, when they chose one: the
notebook's `notebook.login(..., lang=)`) in `login.json` under click.get_app_dir (on Linux
~/.config/gpt-bughunt-grader/): the folder 0700, the file 0600, written whole or not at all (a
temporary file renamed over it). An existing folder that group or others may write (where anyone
could swap the file for their own server's) is made 0700 when it is the learner's, else refused.
GRADER_SERVER and GRADER_TOKEN override it; the file's token is only ever sent to the file's
server. A token goes over plain http:// only to this machine (127.0.0.0/8, ::1, localhost) unless
the learner says --insecure: anyone on the path could read it.
"""

from __future__ import annotations

import ipaddress
import json
import os
from dataclasses import dataclass
from pathlib import Path
from urllib.parse import urlsplit

from grader.client.errors import ClientError
from grader.limits import SHORT_CHARS
from grader.locale import msg, normalize_lang

APP_NAME = "gpt-bughunt-grader"
LOGIN_FILE = "login.json"
MAX_LOGIN_BYTES = 64 * 1024  # a login file is two short strings; more is not one
MAX_TOKEN_CHARS = 1024  # far above any token the server issues (TOKEN_BYTES, base64)


@dataclass(frozen=True)
class Login:
    server: str | None
    token: str | None
    lang: str | None = None  # the reports' language the learner chose at login, if any


def login_path() -> Path:
    import click  # the CLI's dependency anyway; only its app-dir rule is wanted here

    return Path(click.get_app_dir(APP_NAME)) / LOGIN_FILE


def normalize_server(url: str) -> str:
    """`url` as one spelling: scheme and host lower case, no trailing slash (a path prefix stays,
    for a server behind a proxy at https://host/grader). Refuses anything but http(s)://host."""
    url = url.strip()
    parts = urlsplit(url)
    if parts.scheme.lower() not in ("http", "https") or not parts.hostname:
        raise ClientError(msg("--server: {url} is not an http:// or https:// URL", url=url[:SHORT_CHARS]))
    if parts.username or parts.password or parts.query or parts.fragment:
        raise ClientError(
            msg("--server: {url} must be scheme://host[:port][/path] only", url=url[:SHORT_CHARS])
        )
    try:
        port = parts.port
    except ValueError:
        raise ClientError(msg("--server: {url} has a bad port", url=url[:SHORT_CHARS])) from None
    host = parts.hostname.lower()
    netloc = f"[{host}]" if ":" in host else host
    netloc += f":{port}" if port is not None else ""
    return f"{parts.scheme.lower()}://{netloc}{parts.path.rstrip('/')}"


def is_loopback(host: str) -> bool:
    """127.0.0.0/8, ::1 or the name localhost: this machine, whose traffic no one else sees."""
    host = host.strip("[]").rstrip(".").lower()
    if host == "localhost":
        return True
    try:
        return ipaddress.ip_address(host).is_loopback
    except ValueError:
        return False


def check_token_url(server: str, *, insecure: bool) -> None:
    """Refuse to send a token to `server` over plain http:// unless it is this machine or the
    learner said --insecure (exit 2, saying why)."""
    parts = urlsplit(server)
    if parts.scheme == "http" and not is_loopback(parts.hostname or "") and not insecure:
        raise ClientError(
            msg(
                "refusing to send your token to {server} over plain http://: anyone on the way "
                "could read it and submit as you. Use the server's https:// address, or --insecure "
                "if you really mean it",
                server=server,
            )
        )


def check_token(token: str) -> str:
    """A token as it may go in a header: printable ASCII without spaces (the server's are
    URL-safe base64). Anything else is a paste gone wrong, said now rather than as a network error."""
    token = token.strip()
    if (
        not token
        or len(token) > MAX_TOKEN_CHARS
        or not (token.isascii() and token.isprintable())
        or " " in token
    ):
        raise ClientError(msg("the token is not one the server issues (printable ASCII, no spaces)"))
    return token


def read_login(path: Path | None = None, environ=None, server: str | None = None) -> Login:
    """The server (`server` if given, else GRADER_SERVER, else the login file's) and the token
    for it: GRADER_TOKEN when it goes with that server (GRADER_SERVER unset or the same), else
    the login file's when the file is for that server. A token is never paired with a server it
    was not given for."""
    environ = os.environ if environ is None else environ
    saved = _read_file(path or login_path()) or {}
    saved_server = normalize_server(saved["server"]) if saved.get("server") else None
    env_server = normalize_server(environ["GRADER_SERVER"]) if environ.get("GRADER_SERVER") else None
    server = normalize_server(server) if server else env_server or saved_server
    if environ.get("GRADER_TOKEN") and env_server in (None, server):
        token = environ["GRADER_TOKEN"]
    elif saved_server is not None and saved_server == server:
        token = saved["token"]
    else:
        token = None
    lang = saved.get("lang") if isinstance(saved.get("lang"), str) else None
    return Login(server=server, token=token, lang=normalize_lang(lang) if lang else None)


def _read_file(path: Path) -> dict | None:
    try:
        with open(path, "rb") as f:
            raw = f.read(MAX_LOGIN_BYTES + 1)
    except FileNotFoundError:
        return None
    except OSError as exc:
        raise ClientError(
            msg("{path} cannot be read: {error}", path=str(path), error=exc.strerror or "")
        ) from None
    try:
        data = json.loads(raw) if len(raw) <= MAX_LOGIN_BYTES else None
    except (ValueError, RecursionError):
        data = None
    if not (
        isinstance(data, dict) and isinstance(data.get("server"), str) and isinstance(data.get("token"), str)
    ):
        raise ClientError(msg("{path} is not a login file; run grader login again", path=str(path)))
    return data


def private_folder(folder: Path) -> None:
    """Make `folder` 0700 when it is the learner's and group or others may read or write it;
    refuse (ClientError, exit 2) one that is another user's and that others may write: the token
    would be kept where someone else can replace or read it."""
    if os.name != "posix":  # Windows keeps a user's AppData private by its ACLs
        return
    try:
        st = os.stat(folder)
        if st.st_mode & 0o077 == 0:
            return
        if st.st_uid == os.getuid():
            os.chmod(folder, 0o700)
        elif st.st_mode & 0o022:
            raise ClientError(
                msg(
                    "{path} is another user's folder that others may write: the token is not kept there",
                    path=str(folder),
                )
            )
    except OSError as exc:
        raise ClientError(
            msg("{path} cannot be made private: {error}", path=str(folder), error=exc.strerror or "")
        ) from None


def save_login(server: str, token: str, path: Path | None = None, lang: str | None = None) -> Path:
    """Keep the login (and `lang`, the reports' language, when given): the folder made 0700, the
    file 0600 from its first byte (O_EXCL on a temporary name, then renamed over the old one, so a
    reader never sees half a file)."""
    path = path or login_path()
    path.parent.mkdir(mode=0o700, parents=True, exist_ok=True)
    private_folder(path.parent)
    tmp = path.with_name(f".{path.name}.{os.getpid()}.tmp")
    try:
        tmp.unlink(missing_ok=True)  # left by a process of this pid that died mid-write
        fd = os.open(tmp, os.O_WRONLY | os.O_CREAT | os.O_EXCL | getattr(os, "O_NOFOLLOW", 0), 0o600)
        with open(fd, "w", encoding="utf-8") as f:
            json.dump({"server": server, "token": token, **({"lang": lang} if lang else {})}, f)
            f.flush()
            os.fsync(f.fileno())
        os.replace(tmp, path)
    except OSError as exc:
        tmp.unlink(missing_ok=True)
        raise ClientError(
            msg("{path} cannot be written: {error}", path=str(path), error=exc.strerror or "")
        ) from None
    return path
