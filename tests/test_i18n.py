"""Every learner-facing string exists in English and Traditional Chinese (zh-TW).

The msgids are found by extraction (grader.locale.extract: msg()/N_()/t() calls, check titles,
the report templates' _() calls), the same extraction `pybabel extract -F babel.cfg` runs; the
zh-TW catalog (grader/locale/zh_TW/LC_MESSAGES/grader.po) must translate each of them, with the
same placeholders. Grades made at runtime are checked too: every message id a real grade carries
has a translation.
"""
import pickle
import re
import string

import pytest
from babel.messages.pofile import read_po

from grader.answers import check_answer, question_from_dict
from grader.locale import (Message, catalog, gettext, has_translation, lang_from_env, localize_text,
                           msg, normalize_lang, po_path, recognize, render, translations)
from grader.locale.extract import collect, dynamic_calls, python_files
from test_reports_grades import (invalid_grade, only_bug_d_grade, quiz_wrong_grade, solution_grade,
                                 starter_grade)

CJK = re.compile(r"[\u4e00-\u9fff]")


@pytest.fixture(scope="module")
def extracted():
    return collect()


@pytest.fixture(scope="module")
def zh():
    with open(po_path("zh-TW"), "rb") as f:
        return read_po(f)


def fields(template: str) -> set[str]:
    return {name for _, name, _, _ in string.Formatter().parse(template) if name is not None}


def test_extraction_finds_the_learner_facing_text(extracted):
    assert len(extracted) > 400
    for msgid in ("(A) scores are scaled by 1/sqrt(d_k)",                    # a check title
                  "(B) triu(diagonal=0): NaN on the first forward pass at query row {row}",
                  "not implemented yet: your code raised NotImplementedError",  # runner
                  "{shown} is not correct.",                                  # answers
                  "answers.toml has no [answers] table",                      # quiz warnings
                  "causal mask", "NaN on the first forward pass",             # labels
                  "Diagnosis", "Grade report"):                               # report chrome
        assert msgid in extracted, msgid


def test_every_msgid_has_a_zh_tw_translation(extracted, zh):
    missing = [m for m in extracted if not (zh.get(m) and zh.get(m).string and not zh.get(m).fuzzy)]
    assert missing == [], f"{len(missing)} msgids without a zh-TW translation " \
                          f"(run `python -m grader.locale update` and translate them): {missing[:10]}"


def test_translations_keep_the_placeholders_and_format(extracted, zh):
    for msgid in extracted:
        text = zh.get(msgid).string
        assert fields(text) == fields(msgid), (msgid, text)
        params = {}
        for _, name, spec, _ in string.Formatter().parse(msgid):
            if name is not None:
                params[name] = 1234.5 if spec and spec[-1] in "gfe%" else (1234 if spec else "x")
        assert not re.search(r"\{\w*[:}]", text.format(**params)), (msgid, text)


# the only translations that may equal their msgid: formulas and symbols, no English words
SAME_IN_BOTH = {"ln(V) = {value}", "NaN / inf", "ln(V)", "{message} {hint}"}


def test_translations_are_traditional_chinese(extracted, zh):
    simplified = set("们这为时说对会过还问题么学习关于发现设计数据类长没样线头网")
    assert [(m, zh.get(m).string) for m in extracted if set(zh.get(m).string) & simplified] == []
    assert {m for m in extracted if zh.get(m).string == m} <= SAME_IN_BOTH


def test_no_message_hides_from_extraction():
    assert [b for p in python_files() for b in dynamic_calls(p)] == []


def test_the_catalog_loads_as_gettext_translations():
    t = translations("zh-TW")
    assert t.gettext("PASSED") == "通過"
    assert t.gettext("a msgid nobody wrote") == "a msgid nobody wrote"      # falls back to English
    assert gettext("causal mask", "en") == "causal mask"
    assert catalog("en") is None and len(catalog("zh-TW")) > 400


def test_language_from_the_locale():
    assert normalize_lang("zh_TW.UTF-8") == normalize_lang("zh-Hant") == "zh-TW"
    assert normalize_lang("fr_FR") == normalize_lang(None) == "en"
    assert lang_from_env({"LANG": "zh_TW.UTF-8"}) == "zh-TW"
    assert lang_from_env({"LC_ALL": "en_US.UTF-8", "LANG": "zh_TW.UTF-8"}) == "en"
    assert lang_from_env({"LC_ALL": "C", "LANGUAGE": "zh_TW"}) == "en"
    assert lang_from_env({"LANG": "en_US.UTF-8", "LANGUAGE": "zh_TW:en"}) == "zh-TW"
    assert lang_from_env({}) == "en"


def test_a_message_is_its_english_text_and_remembers_how_to_translate_it():
    hint = msg("In half precision every masking constant must fit the dtype.")
    m = msg("{what} differs from the expected result by up to {err:.3g} (allowed {tol:.1g} for "
            "{dtype}). {hint}", what=msg("causal attention"), err=0.123456, tol=1e-3, dtype="float16",
            hint=hint)
    assert isinstance(m, str) and m == ("causal attention differs from the expected result by up to "
                                        "0.123 (allowed 0.001 for float16). In half precision every "
                                        "masking constant must fit the dtype.")
    zh = m.render("zh-TW")
    assert zh.startswith("因果注意力 與預期結果最多相差 0.123") and "半精度" in zh
    data = m.to_data()
    assert Message.from_data(data).render("zh-TW") == zh
    assert pickle.loads(pickle.dumps(m)).render("zh-TW") == zh
    assert render(None, "zh-TW", msgid=data["id"], params=data["params"]) == zh
    # an empty optional part leaves no dangling space; a NaN stored as null still renders
    assert msg("{what} raised {type}; expected {expected}. {hint}", what="f()", type="KeyError",
               expected="ValueError", hint="") == "f() raised KeyError; expected ValueError."
    assert "None" in render(None, "zh-TW", msgid=m.msgid, params={**data["params"], "err": None})


def test_learner_text_in_a_param_is_never_a_template():
    m = msg("your code raised {type}: {message}", type="ValueError", message="{type} {0} {x.__class__}")
    assert m.render("zh-TW") == "你的程式碼拋出了 ValueError：{type} {0} {x.__class__}"


def test_quiz_feedback_is_translated():
    q = question_from_dict({"id": "w", "kind": "real", "answer": [[1, 0], [0.0558, 0.9442]], "tol": 5e-4})
    result = check_answer(q, [[0, 1], [0.9442, 0.0558]])
    zh = result.message.render("zh-TW")
    assert "矩陣" in zh and "對調" in zh and "Row" not in zh and "swapped" not in zh
    assert check_answer(q, "sixty").message.render("zh-TW").startswith("不認得的名稱 'sixty'")
    choice = question_from_dict({"id": "c", "kind": "choice", "options": {"A": "x", "B": "y"}, "answer": "B"})
    assert check_answer(choice, "(B)").message.render("zh-TW") == \
        "'(B)' 不是選項之一：請用一個字母作答，A 或 B。"


def test_text_from_outside_the_checks_is_recognised():
    """Jail and submission errors are plain English strings; their templates are in the catalog."""
    for english, chinese in [
        ("attention.py is a symbolic link; symbolic links are refused", "符號連結"),
        ("the submission used up its 60 s of CPU time", "CPU 時間"),
        ("the process died with a segmentation fault (SIGSEGV)", "區段錯誤"),
        ("importing gpt.py raised NameError at gpt.py:3: name 'x' is not defined", "匯入 gpt.py"),
    ]:
        assert chinese in localize_text(english, "zh-TW"), english
        assert isinstance(recognize(english), Message) and recognize(english) == english
    assert localize_text("something nobody templated", "zh-TW") == "something nobody templated"
    assert recognize("x y") == "x y" and not isinstance(recognize("x y"), Message)


def test_every_message_of_real_grades_has_a_translation():
    def ids(value):
        if isinstance(value, dict):
            if "id" in value and isinstance(value.get("params"), dict):
                yield value["id"]
            for v in value.values():
                yield from ids(v)
        elif isinstance(value, list):
            for v in value:
                yield from ids(v)

    seen = set()
    for g in (starter_grade(), only_bug_d_grade(), solution_grade(), quiz_wrong_grade(), invalid_grade()):
        for item in [*g.checks, *g.diagnosis]:
            if item.message_id:
                seen.add(item.message_id)
                seen.update(ids(item.message_params))
            if item.message and not getattr(item, "passed", False):
                zh = render(item.message, "zh-TW", item.message_id, item.message_params)
                assert CJK.search(zh), item.message
        for c in g.checks:
            assert has_translation(c.title, "zh-TW") or "zh-TW" in c.title_i18n, c.title
    seen.discard("{text}")           # the sentence-case wrapper: nothing to translate
    assert seen and [m for m in seen if not has_translation(m, "zh-TW")] == []


def test_babel_cfg_extracts_the_same_msgids(extracted):
    """`pybabel extract -F babel.cfg` (Babel's own walk over the tree) finds what the test checks."""
    from babel.messages.extract import extract_from_dir
    from babel.messages.frontend import parse_mapping_cfg
    from jinja2.ext import babel_extract

    from grader.locale.extract import ROOT, extract_messages
    with open(ROOT / "babel.cfg", encoding="utf-8") as f:
        method_map, options_map = parse_mapping_cfg(f)
    methods = {"grader": extract_messages, "jinja2": babel_extract}
    method_map = [(pattern, methods[method]) for pattern, method in method_map]
    found = {message if isinstance(message, str) else message[0]
             for _, _, message, _, _ in extract_from_dir(str(ROOT), method_map, options_map,
                                                         keywords={"_": None})}
    assert found == set(extracted)
