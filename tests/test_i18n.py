"""Every learner-facing string exists in English and Traditional Chinese (zh-TW).

The msgids are found by extraction (grader.locale.extract: msg()/N_()/t() calls, check titles,
the report templates' _() calls), the same extraction `pybabel extract -F babel.cfg` runs; the
zh-TW catalog (grader/locale/zh_TW/LC_MESSAGES/grader.po) must translate each of them, with the
same placeholders. Grades made at runtime are checked too: every message id a real grade carries
has a translation.
"""
import ast
import html
import json
import pickle
import re
import string
from pathlib import Path

import pytest
from babel.messages.pofile import read_po

from grader.catalog.answers import check_answer, question_from_dict
from grader.course.batch import run_batch
from grader.catalog.exercises import load_exercise
from grader.grading.grade import grade
from grader.locale import (Message, catalog, gettext, has_translation, lang_from_env, msg, normalize_lang,
                           po_path, render, translations)
from grader.locale.extract import collect, dynamic_calls, python_files
from grader.models import Grade, Limits
from grader.store import Gradebook
from reports.render import render as report
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
                  "(D) y = chunk[2:]: targets shifted twice",                 # a hidden diagnosis
                  "not implemented yet: your code raised NotImplementedError",  # runner
                  "{shown} is not correct.",                                  # answers
                  "unknown question id {id} ignored",                         # quiz warnings
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


def test_the_client_catalog_is_grader_po_for_the_client_msgids_compiled(zh):
    """The student wheel's zh-TW (client.mo, read without Babel): what `update` compiles now from
    grader.po, for every msgid the client's modules use, each translated, and no other msgid."""
    import gettext as stdlib_gettext

    from grader.locale import mo_path
    from grader.locale.__main__ import client_mo
    from grader.locale.extract import client_files, client_msgids

    assert mo_path("zh-TW").read_bytes() == client_mo("zh-TW"), "run `python -m grader.locale update`"
    with open(mo_path("zh-TW"), "rb") as f:
        compiled = stdlib_gettext.GNUTranslations(f)._catalog  # type: ignore[attr-defined]
    ids = client_msgids()
    assert {k for k in compiled if k} == set(ids) and len(ids) > 150
    assert all(compiled[m] == zh.get(m).string for m in ids)
    names = {p.relative_to(ROOT).as_posix() for p in client_files()}
    assert "grader/cli/client.py" in names and not [n for n in names if n.startswith("exercises/")]
    for msgid in ("late days left: {left} of {total} (spent only by grader submit --use-late-day)",
                  "submission {id}: waiting for the grade", "logged in to {server} as {learner} ({role}); "
                  "token kept in {path}", "the next submission is possible at {when} (in {wait})"):
        assert msgid in compiled, msgid


def test_without_babel_or_grader_po_the_client_catalog_speaks(monkeypatch, tmp_path):
    import grader.locale as locale

    monkeypatch.setattr(locale, "po_path", lambda lang: tmp_path / "no.po")
    locale.translations.cache_clear()
    try:
        text = msg("submission {id}: waiting for the grade", id=3).render("zh-TW")
        assert text == "繳交 3：等待評分結果"
        assert msg("(A) scores are scaled by 1/sqrt(d_k)").render("zh-TW") == "(A) scores are scaled by 1/sqrt(d_k)"
    finally:
        monkeypatch.undo()
        locale.translations.cache_clear()


def test_one_term_for_a_submission():
    """繳交, the catalog's word for handing work in (as Taiwan's schools say it), never 提交 beside it."""
    with open(po_path("zh-TW"), "rb") as f:
        strings = [m.string for m in read_po(f) if m.id and m.string]
    assert [t for t in strings if "提交" in t] == [] and len([t for t in strings if "繳交" in t]) > 60


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
    assert check_answer(choice, "(E)").message.render("zh-TW") == \
        "'(E)' 不是選項之一：請用一個字母作答，A 或 B。"


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
            if getattr(item, "message_i18n", {}).get("zh-TW"):  # a mutant's message: data, translated
                continue
            if item.message and not getattr(item, "passed", False):
                # a mutant named by the replay carries its TOML's own translation
                zh = getattr(item, "message_i18n", {}).get("zh-TW") or render(
                    item.message, "zh-TW", item.message_id, item.message_params)
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


# -- errors from outside the checks: made as Messages where they are decided -------------------

ROOT = Path(__file__).resolve().parents[1]
SOLUTION = ROOT / "exercises" / "day45-attention" / "solution" / "attention.py"


def learner_folder(tmp_path, name: str, appended: str | None) -> Path:
    folder = tmp_path / name
    folder.mkdir()
    if appended is not None:
        (folder / "attention.py").write_text(SOLUTION.read_text() + appended, encoding="utf-8")
    return folder


def reports_in_zh(grade: Grade) -> str:
    """The zh-TW text report and HTML report of a grade, read back from its stored JSON."""
    stored = Grade.model_validate_json(grade.model_dump_json())
    return report(stored, "text", "zh-TW") + "\n" + html.unescape(report(stored, "html", "zh-TW"))


def fast_day45(wall: float = 8, call: float = 2):
    return load_exercise("day45-attention").model_copy(
        update={"limits": Limits(wall_seconds=wall, call_seconds=call, memory_mb=1024)})


def test_a_syntax_error_reaches_a_zh_tw_report_translated(tmp_path):
    g = grade(fast_day45(), learner_folder(tmp_path, "s", "\ndef broken(:\n    pass\n"))
    assert g.error.kind == "invalid-submission"
    assert g.error.message_id == "{name} line {line}, column {column}: syntax error: {error}"
    assert g.error.message_params["name"] == "attention.py"
    line = g.error.message_params["line"]
    assert f"attention.py 第 {line} 行第" in reports_in_zh(g) and "語法錯誤" in reports_in_zh(g)
    assert "syntax error" not in reports_in_zh(g)


def test_a_missing_file_reaches_a_zh_tw_report_translated(tmp_path):
    g = grade(fast_day45(), learner_folder(tmp_path, "s", None))
    assert g.error.message_id == "missing file: {missing} (this exercise needs {files})"
    assert "缺少檔案：attention.py（這個練習需要 attention.py）" in reports_in_zh(g)


def test_a_process_that_exits_at_import_reaches_a_zh_tw_report_translated(tmp_path):
    g = grade(fast_day45(), learner_folder(tmp_path, "s", "\nimport os\nos._exit(3)\n"))
    assert g.error.kind == "crash" and g.error.message_id == "the submission could not be loaded: {detail}"
    assert g.error.message_params["detail"]["params"] == {"code": "3"}     # the jail's Message, nested
    zh = reports_in_zh(g)
    assert "無法載入繳交的程式：評分程式等待回應時，行程結束了（結束碼 3）" in zh
    assert "while the grader was waiting" not in zh


def test_an_endless_loop_in_a_check_reaches_a_zh_tw_report_translated(tmp_path):
    loop = ("\nimport time as _t\n_sdpa = scaled_dot_product_attention\n"
            "def scaled_dot_product_attention(*a, **k):\n"
            "    _end = _t.monotonic() + 30\n    while _t.monotonic() < _end:\n        pass\n"
            "    return _sdpa(*a, **k)\n")
    g = grade(fast_day45(wall=6, call=2), learner_folder(tmp_path, "s", loop))
    timed_out = [c for c in g.checks if c.message_id == "timeout: {detail}"]
    assert timed_out and "timeout" in timed_out[0].symptoms
    detail = timed_out[0].message_params["detail"]
    if detail["id"].startswith("{what}; your code was in"):  # where the stack sample found it
        assert detail["params"]["function"] == "scaled_dot_product_attention", detail
        detail = detail["params"]["what"]
    assert detail["id"] in ("{call} ran over its {seconds:g} s budget",
                            "the submission used up its {seconds:.0f} s")
    zh = reports_in_zh(g)
    assert "超過了它的 2 秒時間預算" in zh or "逾時：繳交的程式用完了 6 秒" in zh
    assert "ran over" not in zh and "your code was in" not in zh


def test_a_batch_of_quiz_sheets_stores_and_translates_each_learners_problem(tmp_path):
    source = tmp_path / "class"
    (source / "alice").mkdir(parents=True)
    (source / "alice" / "answers.toml").write_text("[answers]\nq1 = = 3\n", encoding="utf-8")
    (source / "bob").mkdir()
    (tmp_path / "elsewhere.toml").write_text("[answers]\n", encoding="utf-8")
    (source / "bob" / "answers.toml").symlink_to(tmp_path / "elsewhere.toml")
    out = tmp_path / "out"
    run_batch("day49-quiz", source, str(tmp_path / "class.db"), workers=1, out=out, lang="zh-TW",
              progress=False, echo=lambda line: None)
    stored = {p.stem: json.loads(p.read_text(encoding="utf-8")) for p in (out / "grades").glob("*.json")}
    assert stored["alice"]["error"]["message_id"] == "{name}: malformed TOML: {error}"
    assert stored["bob"]["error"]["message_id"] == "{name} is a symbolic link; symbolic links are refused"
    alice, bob = (reports_in_zh(Grade.model_validate(stored[k])) for k in ("alice", "bob"))
    assert "answers.toml：TOML 格式錯誤：" in alice and "malformed TOML" not in alice
    assert "answers.toml 是符號連結；不接受符號連結" in bob and "symbolic link" not in bob
    with Gradebook(str(tmp_path / "class.db")) as gb:      # the instructor's column stays English
        assert [s.problem for s in gb.submissions("day49-quiz") if s.learner == "bob"] == [
            "answers.toml is a symbolic link; symbolic links are refused"]


def test_reports_show_the_isolation_in_the_readers_language():
    g = Grade(exercise="day45-quiz", passed=True, score=1, max_score=1, isolation="none (answers are data)")
    assert "隔離方式：無（答案是資料，不執行程式碼）" in report(g, "text", "zh-TW")
    assert "isolation: none (answers are data)" in report(g, "text", "en")
    assert json.loads(report(g, "json"))["isolation"] == "none (answers are data)"   # stored as data
    assert "隔離方式：bubblewrap 沙箱" in report(g.model_copy(update={"isolation": "bubblewrap"}), "text", "zh-TW")


def test_no_regular_expression_translates_text_back():
    locale_dir = ROOT / "grader" / "locale"
    assert not (locale_dir / "external.py").exists()
    for path in locale_dir.glob("*.py"):
        tree = ast.parse(path.read_text(encoding="utf-8"))
        imported = {alias.name for node in ast.walk(tree) if isinstance(node, ast.Import) for alias in node.names}
        imported |= {node.module for node in ast.walk(tree) if isinstance(node, ast.ImportFrom)}
        assert not imported & {"re", "regex"}, path
    assert render("the process died with a segmentation fault (SIGSEGV)", "zh-TW") == \
        "the process died with a segmentation fault (SIGSEGV)"          # plain text stays as it is


# -- the course's voice: Taiwanese typography and no reference learners do not have ----------------

HAN = "[\u3400-\u4dbf\u4e00-\u9fff\uf900-\ufaff]"
TYPOGRAPHY = {
    # an ASCII , : ; between two Chinese characters is the full-width ，：； in a Chinese sentence
    "ASCII punctuation inside a Chinese sentence": re.compile(f"{HAN}[,:;] ?(?={HAN})"),
    # (中文) takes full-width parentheses: （中文）
    "ASCII parentheses around Chinese text": re.compile(rf"\((?=[^()]*{HAN})[^()]*\)"),
    # 使用 float16 時, 第 0 列: a space between Chinese and Latin letters or digits
    "no space between Chinese and Latin": re.compile(f"{HAN}[A-Za-z0-9]|[A-Za-z0-9]{HAN}"),
    # a placeholder formatted as a number ({n:,}, {x:.3g}) renders digits: it is spaced the same way
    "no space around a number": re.compile(rf"{HAN}\{{\w+:[^{{}}]*\}}|\{{\w+:[^{{}}]*\}}{HAN}"),
    "a space before full-width punctuation": re.compile(" [，。；：、）]"),
    # full-width punctuation holds its own space: 檢查項目：每個, never 檢查項目： 每個 (nor before Latin)
    "a space after full-width punctuation": re.compile("[，。；：、（）！？「」] "),
}


def typography_problems(text: str) -> list[str]:
    # a placeholder's name is not text ({n_head}); a numeric one is kept for its own rule
    bare = re.sub(r"\{\w*\}", lambda m: "\x00" * len(m.group()), text)
    return [name for name, rule in TYPOGRAPHY.items() if rule.search(bare)]


def test_the_typography_rules_can_fail_and_leave_legitimate_text_alone():
    for bad in ("使用float16時", "第0列", "輸入, 輸出", "答案:錯誤", "（見說明)".replace("（", "("),
                "共{n:,}個", "錯誤 ：{x}", "檢查項目： 每個", "（見說明） grader"):
        assert typography_problems(bad), bad
    for good in ("使用 float16 時", "第 0 列", "輸入，輸出", "{what}：{detail}", "MLP：fc、精確 GELU、proj",
                 "f(x, y) 的結果", "第{step}步", "（{name}）", "共 {n:,} 個", "x0, x1 = x[..., 0::2]"):
        assert not typography_problems(good), good


def test_zh_tw_translations_follow_taiwanese_typography_and_usage(zh):
    bad = [(m.id, m.string, typography_problems(m.string)) for m in zh if m.id and m.string
           and typography_problems(m.string)]
    assert bad == []
    mainland = ("代碼", "默認", "數據", "文件", "函數", "運行", "讀成數：", "信息", "調用", "內存", "線程",
                "進程", "字符串", "數組", "對象", "變量", "模塊", "用戶", "設置")
    assert [(m.id, w) for m in zh if m.id and m.string for w in mainland if w in m.string] == []


def _spec(text: str) -> bool:
    return re.search(r"\bSPEC\b", text) is not None


def test_no_learner_facing_text_cites_spec_md(extracted, zh):
    """Learners do not have SPEC.md: a message says what is asked, or points at the starter."""
    assert [m for m in extracted if _spec(m)] == []
    assert [m.string for m in zh if m.id and _spec(m.string)] == []
    literals = []
    for path in sorted((ROOT / "exercises").glob("*/hidden/*.py")):
        tree = ast.parse(path.read_text(encoding="utf-8"))
        docstrings = {id(node.body[0].value) for node in ast.walk(tree)
                      if isinstance(node, (ast.Module, ast.FunctionDef, ast.ClassDef)) and node.body
                      and isinstance(node.body[0], ast.Expr) and isinstance(node.body[0].value, ast.Constant)}
        literals += [(path.name, node.value) for node in ast.walk(tree)
                     if isinstance(node, ast.Constant) and isinstance(node.value, str)
                     and id(node) not in docstrings and _spec(node.value)]
    assert literals == []
    for path in sorted((ROOT / "mutants").glob("*.toml")):
        assert not _spec(path.read_text(encoding="utf-8")), path


# -- the glossary: one zh-TW term per concept (grader/locale/glossary.toml) -------------------------

GLOSSARY = ROOT / "grader" / "locale" / "glossary.toml"
CODE = re.compile(r"`[^`]*`|\{\w*(?::[^{}]*)?\}")


def glossary() -> dict:
    import tomllib

    with open(GLOSSARY, "rb") as f:
        return tomllib.load(f)


def glossary_problems(msgid: str, text: str, terms: dict | None = None) -> list[tuple[str, str]]:
    """(concept, variant) of each forbidden variant `text` (the translation of `msgid`) uses."""
    terms = terms or glossary()
    context = {name: re.compile(rule) for name, rule in terms["context"].items()}
    prose = CODE.sub(" ", text)
    out = []
    for concept in terms["concept"]:
        if "context" in concept and not context[concept["context"]].search(msgid):
            continue
        if "not_context" in concept and context[concept["not_context"]].search(msgid):
            continue
        for variant in concept["forbidden"]:
            word = re.escape(variant)
            if variant.isascii():
                word = rf"(?<![A-Za-z0-9_]){word}(?![A-Za-z0-9_])"
            if re.search(word, prose):
                out.append((concept["name"], variant))
    return out


def test_the_glossary_check_fails_on_a_variant_and_tells_the_two_tokens_apart():
    assert glossary_problems("possible copy", "可能抄襲") == [(
        "possible copies: similar code, a hint for a human, never a verdict", "抄襲")]
    assert glossary_problems("possible copy", "可能雷同") == []
    assert glossary_problems("ask your instructor", "請問講師") and glossary_problems("learner", "學習者")
    # an access token is 權杖, a token of text 詞元: the msgid's context tells them apart
    assert glossary_problems("paste your token again", "請再貼上一次你的詞元")
    assert glossary_problems("paste your token again", "請再貼上一次你的 token")
    assert glossary_problems("paste your token again", "請再貼上一次你的權杖") == []
    assert glossary_problems("future tokens leak", "未來的權杖外洩")
    assert glossary_problems("future tokens leak", "未來的 token 外洩")
    assert glossary_problems("future tokens leak", "未來的詞元外洩") == []
    # one language per message: 鍵/查詢, never key/query beside them; code is not a word
    assert glossary_problems("query i sees key j", "query i 看得到鍵 j")
    assert glossary_problems("{key} must be a list", "`key_padding_mask` 與 {key} 必須是串列") == []
    assert glossary_problems("a valid token (Bearer TOKEN)", "有效的權杖（Bearer TOKEN）") == []


def test_the_catalog_uses_one_term_per_concept(zh):
    terms = glossary()
    entries = [(m.id, m.string) for m in zh if m.id and m.string]
    problems = [(i, s, glossary_problems(i, s, terms)) for i, s in entries]
    assert [p for p in problems if p[2]] == []
    for concept in terms["concept"]:              # and each concept's term is the one in use
        assert any(concept["term"] in s for _, s in entries), concept["name"]


def test_the_mutants_messages_use_the_glossarys_terms_too():
    """A named bug's message is translated in its TOML (mutants/*.toml), not in the catalog."""
    from grader.catalog.mutants import load_mutants

    messages = [(m.id, m.message.en, m.message.zh_TW) for m in load_mutants() if m.message.zh_TW]
    assert len(messages) > 40
    assert [(i, glossary_problems(en, zh)) for i, en, zh in messages if glossary_problems(en, zh)] == []


def test_a_planted_variant_in_the_catalog_fails_the_glossary(zh):
    planted = [(m.id, "可能抄襲" if m.id == "possible copy" else m.string) for m in zh if m.id and m.string]
    assert [i for i, s in planted if glossary_problems(i, s)] == ["possible copy"]


def test_every_evidence_key_a_check_attaches_has_a_translated_label():
    """A report shows evidence as label: value; a bare `max_deviation` beside a translated 上界
    is English in a Chinese report (issue 31)."""
    from reports.labels import EVIDENCE

    keys = set()
    for path in [*ROOT.glob("exercises/*/hidden/*.py"), *(ROOT / "grader").rglob("*.py")]:
        for node in ast.walk(ast.parse(path.read_bytes())):
            called = getattr(node, "func", None)
            if isinstance(node, ast.Call) and getattr(called, "id", getattr(called, "attr", None)) == "fail":
                keys |= {k.arg for k in node.keywords if k.arg not in (None, "symptoms", "diagnosis")}
    assert "max_deviation" in keys and keys - set(EVIDENCE) == set()
    assert all(has_translation(label, "zh-TW") for label in EVIDENCE.values())
