"""Quiz exercises graded through the command line: every right form accepted, wrong ones taught."""
import re

import pytest
import torch

import reference_model as ref
from conftest import EXERCISES, grade_json, run_grader
from grader.grading.grade import grade
from grader.catalog.quiz import load_key, pose


def grade_in_process(quiz, folder, student=None):
    """Quizzes run no learner code, so most tests grade in this process (the CLI is tested too)."""
    result = grade(quiz, folder, student=student).model_dump(mode="json")
    return (0 if result["passed"] else 1), result

QUIZZES = ["day45-quiz", "day48-quiz", "day49-quiz"]


def write_answers(tmp_path, answers: dict, name="answers.toml"):
    lines = ["[answers]"] + [f"{k} = {v}" for k, v in answers.items()]
    folder = tmp_path / "sub"
    folder.mkdir(exist_ok=True)
    (folder / name).write_text("\n".join(lines) + "\n", encoding="utf-8")
    return folder


@pytest.mark.parametrize("quiz", QUIZZES)
def test_solution_scores_full_marks(quiz):
    code, grade = grade_json(quiz, EXERCISES / quiz / "solution")
    assert code == 0 and grade["passed"] and grade["score"] == grade["max_score"] > 0


@pytest.mark.parametrize("quiz", QUIZZES)
def test_starter_lists_every_question_and_scores_zero(quiz, tmp_path):
    assert run_grader("starter", quiz, tmp_path / "s").returncode == 0
    text = (tmp_path / "s" / "answers.toml").read_text(encoding="utf-8")
    for item in load_key(quiz):
        assert re.search(rf"^{item.id} = \"\"$", text, re.M), item.id
    code, grade = grade_json(quiz, tmp_path / "s")
    assert code == 1 and grade["score"] == 0
    assert any("no answer given" in w["message"] for w in grade["warnings"])


ALTERNATIVE_FORMS = {   # SPEC answers written the ways learners write them
    "medium_attn_no_bias": ['"4,194,304"', "4_194_304", '"4 194 304"', '"４，１９４，３０４"', '"2**22"'],
    "gpt2_small_attn_total": ['"2,362,368"', '"2359296 + 3072"'],
    "gpt2_small_d_k": ["64.0", "6.4e1", '"768/12"'],
    "softmax_500_502": ['["0.1192", "0.8808"]', '"[0.11920, 0.88080]"', '["1/(1+exp(2))", "1/(1+exp(-2))"]'],
    "fp16_exp_15": ['"inf"', '"+inf"', '"Infinity"', '"∞"'],
    "mc_d_k": ['"b"', '" B "'],
    "fp32_exp_overflow_z": ['"ln(3.4028e38)"', "88.72"],
}


@pytest.mark.parametrize("qid,forms", ALTERNATIVE_FORMS.items())
def test_alternative_forms_are_accepted(qid, forms, tmp_path):
    for i, form in enumerate(forms):
        sub = tmp_path / f"f{i}"
        sub.mkdir()
        folder = write_answers(sub, {qid: form})
        _, grade = grade_in_process("day45-quiz", folder)
        check = next(c for c in grade["checks"] if c["id"] == qid)
        assert check["passed"], (form, check["message"])


WRONG = {  # (answer, a phrase the feedback must contain)
    "medium_attn_no_bias": ("4194305", ""),
    "gpt2_small_attn_weights": ('"2.36e6"', "exact"),
    "softmax_500_502": ("[0.8808, 0.1192]", "swap"),
    "trace_head0_weights": ("[[1, 0], [0.0558, 0.9452]]", "row 2"),
    "fp16_exp_overflow_z": ("11.2", "within ±0.05"),
    "mc_max_shift": ('"A"', ""),
    "fp16_exp_15": ("65504", "overflow"),
}


@pytest.mark.parametrize("qid,case", WRONG.items())
def test_wrong_answers_fail_with_teaching_feedback(qid, case, tmp_path):
    answer, phrase = case
    _, grade = grade_in_process("day45-quiz", write_answers(tmp_path, {qid: answer}))
    check = next(c for c in grade["checks"] if c["id"] == qid)
    assert not check["passed"] and check["message"]
    assert phrase.lower() in check["message"].lower(), check["message"]


def test_feedback_never_reveals_the_key(tmp_path):
    _, grade = grade_in_process("day45-quiz", write_answers(tmp_path, {"medium_attn_no_bias": "4194305",
                                                                 "gpt2_small_attn_weights": "2359295"}))
    text = " ".join(c["message"] for c in grade["checks"])
    assert "4194304" not in text and "4,194,304" not in text and "2359296" not in text


def test_two_learners_get_different_variants_with_keys_from_the_reference(tmp_path):
    texts = {}
    for student in ("alice", "bob"):
        assert run_grader("starter", "day45-quiz", tmp_path / student, "--student", student).returncode == 0
        texts[student] = (tmp_path / student / "answers.toml").read_text(encoding="utf-8")
    assert texts["alice"] != texts["bob"]
    for student in ("alice", "bob"):
        posed = {p.item.id: p for p in pose("day45-quiz", student)}
        d, h = map(int, re.search(r"d_model = (\d+), h = (\d+), with bias", posed["variant_mha_params"].text_en).groups())
        assert posed["variant_mha_params"].question.answer == 4 * d * d + 4 * d
        assert posed["variant_mha_params"].question.answer == ref.count_parameters(ref.MultiHeadAttention(d, h))
        a, b = map(int, re.search(r"softmax\(\[(-?\d+), (-?\d+)\]\)", posed["variant_softmax_pair"].text_en).groups())
        expected = torch.softmax(torch.tensor([a, b], dtype=torch.float64), 0).tolist()
        assert posed["variant_softmax_pair"].question.answer == pytest.approx(expected, abs=1e-6)


def test_a_variant_is_graded_against_its_own_learner(tmp_path):
    alice = {p.item.id: p for p in pose("day45-quiz", "alice")}
    bob = {p.item.id: p for p in pose("day45-quiz", "bob")}
    answer = str(alice["variant_mha_params"].question.answer)
    assert answer != str(bob["variant_mha_params"].question.answer)
    folder = write_answers(tmp_path, {"variant_mha_params": answer})
    for student, passes in (("alice", True), ("bob", False)):
        _, result = grade_in_process("day45-quiz", folder, student)
        check = next(c for c in result["checks"] if c["id"] == "variant_mha_params")
        assert check["passed"] is passes


def test_variant_toy_gpt_key_is_a_real_models_count():
    posed = {p.item.id: p for p in pose("day48-quiz", "carol")}
    m = re.search(r"V = (\d+), block_size 16, d_model = (\d+), n_layer = (\d+)", posed["variant_toy_gpt_params"].text_en)
    V, d, n_layer = map(int, m.groups())
    model = ref.GPT(ref.GPTConfig(V, 16, d, n_layer, 4))
    assert posed["variant_toy_gpt_params"].question.answer == sum(p.numel() for p in model.parameters())


def test_malformed_answers_exit_2_with_file_line_and_column(tmp_path):
    sub = tmp_path / "sub"
    sub.mkdir()
    (sub / "answers.toml").write_text('[answers]\nd4_h2_d_k = 2\nmc_d_k = "B\n')
    proc = run_grader("grade", "day45-quiz", sub)
    assert proc.returncode == 2
    assert "answers.toml" in proc.stderr and "line 3" in proc.stderr and "column" in proc.stderr


def test_unknown_ids_warn_and_missing_answers_are_listed(tmp_path):
    code, grade = grade_in_process("day45-quiz", write_answers(tmp_path, {"d4_h2_d_k": "2", "no_such_question": "1"}))
    assert code == 1
    assert any("no_such_question" in w["message"] for w in grade["warnings"])
    assert any("mc_d_k" in w["message"] for w in grade["warnings"] if w["message"].startswith("no answer"))
    assert next(c for c in grade["checks"] if c["id"] == "d4_h2_d_k")["passed"]


def test_huge_and_deeply_nested_files_are_refused(tmp_path):
    big = tmp_path / "big"
    big.mkdir()
    (big / "answers.toml").write_text("[answers]\n" + "# padding\n" * 1_000_000)
    code, grade = grade_in_process("day45-quiz", big)
    assert grade["error"]["kind"] == "invalid-submission" and "larger than" in grade["error"]["message"]
    deep = tmp_path / "deep"
    deep.mkdir()
    (deep / "answers.toml").write_text("[answers]\nd4_h2_d_k = " + "[" * 5000 + "]" * 5000 + "\n")
    proc = run_grader("grade", "day45-quiz", deep)
    assert proc.returncode in (1, 2) and "Traceback" not in proc.stderr
    assert "answers.toml" in (proc.stderr + proc.stdout)


def test_every_spec_key_is_in_the_quizzes():
    ids = {item.id for quiz in QUIZZES for item in load_key(quiz)}
    assert len([i for i in ids if not i.startswith("variant_")]) == 19 + 5 + 25
