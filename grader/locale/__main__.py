"""Keep the message catalogs in step with the sources.

python -m grader.locale update   extract every msgid, write grader.pot, merge it into each .po
                                 (new msgids get an empty translation, to be filled in)
python -m grader.locale check    exit 1 listing the msgids that have no zh-TW translation
"""

from __future__ import annotations

import sys

from babel.messages.pofile import read_po, write_po

from grader.locale import DEFAULT_LANG, LANGS, LOCALE_DIR, po_path
from grader.locale.extract import template_catalog


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
    for lang, ids in missing.items():
        print(f"{lang}: {len(ids)} msgids without a translation")
        for msgid in ids:
            print(f"  {msgid!r}")
    return 1 if missing else 0


if __name__ == "__main__":
    command = sys.argv[1] if len(sys.argv) > 1 else "check"
    if command == "update":
        update()
    elif command == "check":
        sys.exit(check())
    else:
        sys.exit(__doc__)
