"""Learner-facing text in English and Traditional Chinese (zh-TW), through gettext catalogs.

A message is built where it is decided, with `msg(template, **params)`: the English template is
the msgid (as in gettext), and `{name}` placeholders (str.format syntax, format specs allowed:
`{err:.3g}`, `{n:,}`) are filled from the params. A `Message` *is* a `str` (its English text), so
code that compares, prints or caps messages keeps working; it also keeps its msgid and params,
which the grade stores (`message_id`, `message_params`) so that a report renders the same
message later in any language. A param may itself be a Message (a hint inside a sentence).

Catalogs live next to this file as `<lang>/LC_MESSAGES/grader.po` (zh_TW). They are read with
Babel's `read_po`, compiled in memory with `write_mo` and loaded as gettext `Translations`; a
msgid without a translation falls back to English. `python -m grader.locale update` extracts
every msgid from the sources (the same extractor `pybabel extract -F babel.cfg` uses) and merges
it into the catalogs; the test suite fails on any msgid that has no zh-TW translation.

The student's wheel has neither Babel nor grader.po (which holds the hidden tests' messages): it
ships `<lang>/LC_MESSAGES/client.mo`, the second domain, compiled by `update` from grader.po's
translations of the msgids the client's own modules use (client/pyproject.toml's files) and
nothing else, read with the standard library's gettext. Where grader.po is there (the grading
install, a checkout) it is the one read; translations are made in grader.po alone.
"""

from __future__ import annotations

import gettext as gettext_module
import io
import math
import os
import string
from functools import cache
from pathlib import Path

from grader.limits import MESSAGE_CHARS

LOCALE_DIR = Path(__file__).parent
DOMAIN = "grader"
CLIENT_DOMAIN = "client"  # the student wheel's compiled catalog: the client's msgids only
LANGS = ("en", "zh-TW")
DEFAULT_LANG = "en"
MAX_PARAM = MESSAGE_CHARS  # a learner's text inside a message is capped like a message


def N_(template: str) -> str:
    """Mark a constant string for extraction; it is translated where it is shown."""
    return template


# -- languages ----------------------------------------------------------------------------------


def normalize_lang(lang: str | None) -> str:
    """'zh-TW', 'zh_TW.UTF-8', 'zh_Hant', 'zh' -> 'zh-TW'; anything else -> 'en'."""
    if not lang:
        return DEFAULT_LANG
    tag = lang.split(".")[0].split("@")[0].replace("_", "-").lower()
    return "zh-TW" if tag == "zh" or tag.startswith("zh-") else DEFAULT_LANG


def lang_from_env(environ=None) -> str:
    """The language of the locale, as gettext looks for it: LANGUAGE, LC_ALL, LC_MESSAGES, LANG."""
    environ = os.environ if environ is None else environ
    locale = next((environ[v] for v in ("LC_ALL", "LC_MESSAGES", "LANG") if environ.get(v)), "")
    if not locale or locale in ("C", "POSIX") or locale.startswith("C."):
        return DEFAULT_LANG  # the C locale: no translation, LANGUAGE is ignored too
    language = environ.get("LANGUAGE")
    return normalize_lang((language or locale).split(":")[0])


def po_path(lang: str) -> Path:
    return LOCALE_DIR / normalize_lang(lang).replace("-", "_") / "LC_MESSAGES" / f"{DOMAIN}.po"


def mo_path(lang: str, domain: str = CLIENT_DOMAIN) -> Path:
    return LOCALE_DIR / normalize_lang(lang).replace("-", "_") / "LC_MESSAGES" / f"{domain}.mo"


@cache
def catalog(lang: str):
    """The Babel Catalog of `lang`'s .po file (None for English, the source language)."""
    from babel.messages.pofile import read_po

    lang = normalize_lang(lang)
    path = po_path(lang)
    if lang == DEFAULT_LANG or not path.exists():
        return None
    with open(path, "rb") as f:
        return read_po(f, locale=lang.replace("-", "_"), domain=DOMAIN)


@cache
def translations(lang: str) -> gettext_module.NullTranslations:
    """gettext Translations for `lang`: compiled in memory from its .po file with Babel where both
    are there (the grading install), else the client's compiled catalog (the student's wheel),
    else none (English)."""
    lang = normalize_lang(lang)
    if lang != DEFAULT_LANG and po_path(lang).exists():
        try:
            return _compiled(lang)
        except ImportError:  # grader.po without Babel: the client's catalog still speaks
            pass
    client = mo_path(lang)
    if lang != DEFAULT_LANG and client.is_file():
        with open(client, "rb") as f:
            return gettext_module.GNUTranslations(f)
    return gettext_module.NullTranslations()


def _compiled(lang: str) -> gettext_module.NullTranslations:
    from babel.messages.mofile import write_mo
    from babel.support import Translations

    cat = catalog(lang)
    if cat is None:
        return gettext_module.NullTranslations()
    buf = io.BytesIO()
    write_mo(buf, cat)  # fuzzy entries are left out, as msgfmt does
    buf.seek(0)
    return Translations(buf, domain=DOMAIN)


def gettext(msgid: str, lang: str) -> str:
    if normalize_lang(lang) == DEFAULT_LANG or not msgid:
        return msgid
    return translations(lang).gettext(msgid)


def has_translation(msgid: str, lang: str) -> bool:
    """Whether `lang`'s catalog translates `msgid` (English needs no catalog)."""
    if normalize_lang(lang) == DEFAULT_LANG or not msgid:
        return True
    entry = catalog(lang).get(msgid) if catalog(lang) is not None else None
    return bool(entry and entry.string and not entry.fuzzy)


# -- messages -----------------------------------------------------------------------------------


class Message(str):
    """English text that remembers its msgid and params, so it can be shown in another language."""

    msgid: str
    params: dict
    cap: bool

    def __new__(cls, msgid: str, params: dict | None = None, cap: bool = False):
        params = {k: _freeze(v) for k, v in (params or {}).items()}
        self = super().__new__(cls, _render(msgid, params, DEFAULT_LANG, cap))
        self.msgid, self.params, self.cap = msgid, params, cap
        return self

    def __reduce__(self):
        return (_restore, (self.msgid, self.params, self.cap))

    def render(self, lang: str = DEFAULT_LANG) -> str:
        if normalize_lang(lang) == DEFAULT_LANG:
            return str.__str__(self)
        return _render(self.msgid, self.params, lang, self.cap)

    def capitalized(self) -> Message:
        """Sentence case in English (first letter upper case); no effect on other languages."""
        return Message(self.msgid, self.params, cap=True)

    def to_data(self) -> dict:
        data: dict = {"id": self.msgid, "params": {k: _data(v) for k, v in self.params.items()}}
        if self.cap:
            data["cap"] = True
        return data

    @classmethod
    def from_data(cls, data: dict) -> Message:
        params = {
            k: (cls.from_data(v) if _is_message_data(v) else v) for k, v in (data.get("params") or {}).items()
        }
        return cls(str(data["id"]), params, bool(data.get("cap")))


def message_fields(message, limit: int = MAX_PARAM) -> dict:
    """The fields a model stores for a message: `message` (English, capped to `limit`), and for
    a Message its `message_id` and `message_params`, from which a report renders any language."""
    if isinstance(message, Message):
        data = message.to_data()
        if data.get("cap"):  # sentence case: keep it as a wrapped message
            data = {"id": "{text}", "params": {"text": data}}
        return dict(
            message=str.__str__(message)[:limit], message_id=data["id"], message_params=data["params"]
        )
    return dict(message=str(message)[:limit])


def message_of(exc: BaseException):
    """What an exception says: the Message it was raised with, or else its text."""
    first = exc.args[0] if len(exc.args) == 1 else None
    return first if isinstance(first, Message) else str(exc)


def _restore(msgid, params, cap):
    return Message(msgid, params, cap)


def msg(template: str, /, **params) -> Message:
    """A translatable message: `template` is English with {name} placeholders (the msgid)."""
    return Message(template, params)


def join(items, sep: str = "; "):
    """Items (Messages or text) joined by "; ", ", " or " ", as one translatable message."""
    items = list(items)
    if not items:
        return ""
    out = items[0]
    for item in items[1:]:
        if sep == "; ":
            out = Message("{a}; {b}", {"a": out, "b": item})
        elif sep == ", ":
            out = Message("{a}, {b}", {"a": out, "b": item})
        else:
            out = Message("{a} {b}", {"a": out, "b": item})
    return out


JOINERS = [N_("{a}; {b}"), N_("{a}, {b}"), N_("{a} {b}")]


def _is_message_data(value) -> bool:
    return isinstance(value, dict) and "id" in value and isinstance(value.get("params", {}), dict)


def _freeze(value):
    """Params as plain data that survives JSON: numbers, text, None, lists, nested Messages."""
    if isinstance(value, Message) or value is None or isinstance(value, (bool, int, float)):
        return value
    if isinstance(value, str):
        return str(value)[:MAX_PARAM]
    if isinstance(value, tuple):
        return str(value)[:MAX_PARAM]  # shown as Python shows a shape: (2, 3)
    if isinstance(value, list):
        return [_freeze(v) for v in value]
    item = getattr(value, "item", None)  # numpy / torch scalars
    if callable(item):
        try:
            got = item()
            if isinstance(got, (bool, int, float)):
                return got
        except Exception:  # noqa: BLE001 - a learner's object: shown as text instead
            pass
    return str(value)[:MAX_PARAM]


def _data(value):
    if isinstance(value, Message):
        return value.to_data()
    if isinstance(value, list):
        return [_data(v) for v in value]
    return value


class _Formatter(string.Formatter):
    """str.format that renders nested messages in the same language and never raises on a
    param whose type does not fit its format spec (a NaN stored as null, say)."""

    def __init__(self, lang: str):
        self.lang = lang

    def get_value(self, key, args, kwargs):
        if isinstance(key, str) and key in kwargs:
            return render_value(kwargs[key], self.lang)
        return "{" + str(key) + "}"

    def format_field(self, value, format_spec):
        try:
            return format(value, format_spec)
        except (ValueError, TypeError):
            return str(value)


def render_value(value, lang: str):
    if isinstance(value, Message):
        return value.render(lang)
    if _is_message_data(value):
        return Message.from_data(value).render(lang)
    return value


def _render(msgid: str, params: dict, lang: str, cap: bool = False) -> str:
    lang = normalize_lang(lang)
    template = gettext(msgid, lang)
    try:
        text = _Formatter(lang).vformat(template, (), params) if params or "{" in template else template
    except (ValueError, IndexError, KeyError, AttributeError):
        try:  # a broken translation must never hide the message: fall back to English
            text = _Formatter(lang).vformat(msgid, (), params)
        except (ValueError, IndexError, KeyError, AttributeError):
            text = msgid
    text = text.strip()  # an empty optional part ("... {hint}") leaves no trailing space
    if cap and lang == DEFAULT_LANG and text[:1].islower():
        text = text[:1].upper() + text[1:]
    return text


def render(message, lang: str = DEFAULT_LANG, msgid: str | None = None, params: dict | None = None) -> str:
    """Show a message in `lang`: a Message, stored (msgid, params), or plain text.

    Plain text without a msgid (a grade stored before its message had an id, text that is data)
    is shown as it is: every learner-facing message is made as a Message where it is decided."""
    lang = normalize_lang(lang)
    if isinstance(message, Message):
        return message.render(lang)
    if msgid:
        stored = Message.from_data({"id": msgid, "params": params or {}})
        return stored.render(lang)
    return "" if message is None else str(message)


def translate(text: str, lang: str) -> str:
    """A constant string (a title, a label) in `lang`."""
    return gettext(text, lang)


# -- numbers as the reports show them --------------------------------------------------------------


def number(value, digits: int = 4) -> str:
    """A float for people: 4.6052, 0.0312, 1.2e-07, NaN, inf."""
    if value is None:
        return "NaN"
    if isinstance(value, float) and not math.isfinite(value):
        return "NaN" if math.isnan(value) else ("inf" if value > 0 else "-inf")
    if isinstance(value, int):
        return str(value)
    return f"{value:.{digits}g}"


__all__ = [
    "DEFAULT_LANG",
    "LANGS",
    "N_",
    "Message",
    "catalog",
    "gettext",
    "has_translation",
    "join",
    "lang_from_env",
    "message_fields",
    "message_of",
    "mo_path",
    "msg",
    "normalize_lang",
    "number",
    "po_path",
    "render",
    "translate",
    "translations",
]
