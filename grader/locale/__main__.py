"""Keep the message catalogs in step with the sources.

python -m grader.locale update   extract every msgid, write grader.pot, merge it into each .po
                                 (new msgids get an empty translation, to be filled in), and
                                 compile each language's client.mo: the student wheel's catalog
python -m grader.locale check    exit 1 listing the msgids that have no zh-TW translation, or
                                 when a client.mo is not what update would compile now
"""

from __future__ import annotations

import io
import sys
from datetime import UTC, datetime

from babel.messages.pofile import read_po, write_po

from grader.locale import CLIENT_DOMAIN, DEFAULT_LANG, LANGS, LOCALE_DIR, mo_path, po_path
from grader.locale.extract import client_msgids, template_catalog

# the compiled client catalog's header dates: fixed, so that update writes the same bytes for
# the same translations (a .mo in git changes only when a translation does)
CLIENT_MO_DATE = datetime(2026, 1, 1, tzinfo=UTC)


def client_catalog(lang: str, source=None):
    """The client's catalog for `lang`: grader.po's translation of each msgid the client's modules
    use (client_msgids), nothing else: no hidden test's message reaches the student's wheel."""
    from babel.messages.catalog import Catalog

    if source is None:
        with open(po_path(lang), "rb") as f:
            source = read_po(f, locale=lang.replace("-", "_"))
    out = Catalog(
        locale=lang.replace("-", "_"),
        domain=CLIENT_DOMAIN,
        project="gpt-bughunt-grader",
        version="",
        creation_date=CLIENT_MO_DATE,
        revision_date=CLIENT_MO_DATE,
        fuzzy=False,
    )
    out.last_translator = out.language_team = "course staff"
    for msgid in client_msgids():
        entry = source.get(msgid)
        if entry is not None and entry.string and not entry.fuzzy:
            out.add(msgid, entry.string)
    return out


def client_mo(lang: str, source=None) -> bytes:
    from babel.messages.mofile import write_mo

    buf = io.BytesIO()
    write_mo(buf, client_catalog(lang, source))
    return buf.getvalue()


def update() -> None:
    template = template_catalog()
    with open(LOCALE_DIR / "grader.pot", "wb") as f:
        write_po(f, template, width=100, omit_header=False, sort_output=False)
    for lang in LANGS:
        if lang == DEFAULT_LANG:
            continue
        path = po_path(lang)
        path.parent.mkdir(parents=True, exist_ok=True)
        if path.exists():
            with open(path, "rb") as f:
                catalog = read_po(f, locale=lang.replace("-", "_"))
        else:
            from babel.messages.catalog import Catalog

            catalog = Catalog(locale=lang.replace("-", "_"), domain="grader")
        catalog.update(template, no_fuzzy_matching=True)
        catalog.obsolete.clear()
        catalog.project, catalog.version, catalog.fuzzy = "gpt-bughunt-grader", "", False
        catalog.last_translator = catalog.language_team = "course staff"
        with open(path, "wb") as f:
            write_po(f, catalog, width=100, sort_output=False, ignore_obsolete=True, no_location=True)
        untranslated = [m.id for m in catalog if m.id and not m.string]
        print(f"{path}: {len(catalog)} messages, {len(untranslated)} without a translation")
        mo = mo_path(lang)
        mo.write_bytes(client_mo(lang, catalog))
        print(f"{mo}: the client's {len(client_catalog(lang, catalog))} translated messages")


def check() -> int:
    template = template_catalog()
    missing: dict[str, list[str]] = {}
    for lang in LANGS:
        if lang == DEFAULT_LANG:
            continue
        with open(po_path(lang), "rb") as f:
            catalog = read_po(f)
        for m in template:
            if not m.id:
                continue
            entry = catalog.get(m.id)
            if entry is None or not entry.string or entry.fuzzy:
                missing.setdefault(lang, []).append(m.id)
    stale = [
        lang
        for lang in LANGS
        if lang != DEFAULT_LANG
        and (not mo_path(lang).is_file() or mo_path(lang).read_bytes() != client_mo(lang))
    ]
    for lang, ids in missing.items():
        print(f"{lang}: {len(ids)} msgids without a translation")
        for msgid in ids:
            print(f"  {msgid!r}")
    for lang in stale:
        print(f"{mo_path(lang)} is not what `python -m grader.locale update` compiles now")
    return 1 if missing or stale else 0


if __name__ == "__main__":
    command = sys.argv[1] if len(sys.argv) > 1 else "check"
    if command == "update":
        update()
    elif command == "check":
        sys.exit(check())
    else:
        sys.exit(__doc__)
