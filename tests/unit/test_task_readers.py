"""Task readers: counts on the shared data, formats on small fixtures, clear errors, scoring."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from bertlab.data.tasks import (
    TASKS,
    ColumnSpec,
    label_set,
    read_classification,
    read_conll,
    read_glue,
    read_multiple_choice,
    read_squad,
    read_swag,
    read_tagging,
    score,
    to_iob2,
)
from bertlab.data.tasks.classification import suffix_for
from bertlab.data.tasks.ner import entity_types, tag_scheme

TASK_DATA = Path(__file__).resolve().parent.parent / "data" / "tasks"

GLUE_TRAIN_COUNTS = {
    ("sst2", "SST-2"): 67349,
    ("cola", "CoLA"): 8551,
    ("mrpc", "MRPC"): 3668,
    ("stsb", "STS-B"): 5749,
    ("rte", "RTE"): 2490,
    ("wnli", "WNLI"): 635,
}


# --- Real files in ../shared/data ---------------------------------------------------------------


@pytest.mark.parametrize(("task", "folder"), list(GLUE_TRAIN_COUNTS), ids=lambda value: value)
def test_glue_train_sets_have_the_official_counts(shared_data, task, folder):
    examples = TASKS[task].read(shared_data / "glue" / folder / "train.tsv")
    assert len(examples) == GLUE_TRAIN_COUNTS[task, folder]
    assert all(example.text_a for example in examples)
    assert all((example.text_b is not None) == TASKS[task].is_pair for example in examples)
    if not TASKS[task].is_regression:
        assert label_set(examples) == TASKS[task].labels


def test_chnsenticorp_has_9600_examples(shared_data):
    examples = TASKS["chnsenticorp"].read(shared_data / "chnsenticorp" / "train.tsv")
    assert len(examples) == 9600
    assert label_set(examples) == ("0", "1")


def test_conll2003_train_counts(shared_data):
    sentences = read_conll(shared_data / "conll2003" / "train.txt")
    assert len(sentences) == 14041
    assert sum(len(sentence.tokens) for sentence in sentences) == 203621
    assert entity_types(sentences) == {"LOC": 7140, "MISC": 3438, "ORG": 6321, "PER": 6600}


def test_conll2003_valid_counts(shared_data):
    sentences = read_conll(shared_data / "conll2003" / "valid.txt")
    assert len(sentences) == 3250
    assert entity_types(sentences) == {"LOC": 1837, "MISC": 922, "ORG": 1341, "PER": 1842}


def test_resume_ner_is_read_as_bmes(shared_data):
    sentences = read_tagging(shared_data / "resume_ner" / "train.char.bmes")
    assert len(sentences) == 3821
    assert sum(len(sentence.tokens) for sentence in sentences) == 124099
    assert tag_scheme(tag for sentence in sentences for tag in sentence.tags) == "BMES"
    assert set(entity_types(sentences)) == {
        "NAME", "CONT", "RACE", "TITLE", "EDU", "ORG", "PRO", "LOC"
    }  # fmt: skip


def test_squad_part_counts(shared_data):
    examples = read_squad(shared_data / "squad_v1.1" / "train-part.json")
    assert len(examples) == 5397
    assert len({example.title for example in examples}) == 24
    assert all(example.answers and not example.is_impossible for example in examples)


def write_label_predictions(path: Path, labels: list) -> Path:
    lines = [
        json.dumps({"index": index, "prediction": label}) for index, label in enumerate(labels)
    ]
    path.write_text("\n".join(lines) + "\n")
    return path


@pytest.mark.parametrize(
    ("task", "relative_path"),
    [
        ("cola", "glue/CoLA/train.tsv"),
        ("mrpc", "glue/MRPC/train.tsv"),
        ("stsb", "glue/STS-B/train.tsv"),
        ("rte", "glue/RTE/train.tsv"),
        ("chnsenticorp", "chnsenticorp/train.tsv"),
    ],
)
def test_scoring_gold_as_predictions_is_perfect_on_real_files(
    shared_data, tmp_path, task, relative_path
):
    gold_path = shared_data / relative_path
    labels = [example.label for example in TASKS[task].read(gold_path)]
    predictions = write_label_predictions(tmp_path / "predictions.jsonl", labels)
    result = score(task, gold_path, predictions)
    assert result and all(value == pytest.approx(1.0) for value in result.values())


def write_tagged_predictions(gold_path: Path, path: Path) -> Path:
    """The conlleval layout: each gold line with its gold tag repeated as the prediction."""
    lines = []
    for line in gold_path.read_text(encoding="utf-8").splitlines():
        columns = line.split()
        lines.append(" ".join([*columns, columns[-1]]) if columns else "")
    path.write_text("\n".join(lines) + "\n", encoding="utf-8")
    return path


@pytest.mark.parametrize(
    ("task", "relative_path"),
    [("conll2003", "conll2003/valid.txt"), ("tagging", "resume_ner/train.char.bmes")],
)
def test_scoring_gold_tags_as_predictions_is_perfect(shared_data, tmp_path, task, relative_path):
    gold_path = shared_data / relative_path
    predictions = write_tagged_predictions(gold_path, tmp_path / "predictions.txt")
    assert score(task, gold_path, predictions) == {"precision": 1.0, "recall": 1.0, "f1": 1.0}


def test_scoring_squad_gold_answers_as_predictions_is_perfect(shared_data, tmp_path):
    gold_path = shared_data / "squad_v1.1" / "train-part.json"
    answers = {example.id: example.answers[0].text for example in read_squad(gold_path)}
    predictions = tmp_path / "predictions.json"
    predictions.write_text(json.dumps(answers))
    assert score("squad", gold_path, predictions) == {"exact_match": 100.0, "f1": 100.0}


# --- Formats, on committed fixtures -------------------------------------------------------------


def test_glue_tsv_keeps_quote_marks_as_text():
    examples = read_glue("rte", TASK_DATA / "rte_style.tsv")
    assert len(examples) == 4
    assert examples[1].text_a == '"Quoted start, no end.'
    assert examples[2].text_b == 'Another " one'
    assert [example.label for example in examples][:2] == ["entailment", "not_entailment"]


def test_cola_has_no_header_and_mrpc_header_has_a_byte_order_mark():
    cola = read_glue("cola", TASK_DATA / "cola_style.tsv")
    assert [(example.text_a, example.label) for example in cola][1:] == [
        ("Cat the sat.", "0"),
        ('She said "yes.', "1"),
    ]
    mrpc = read_glue("mrpc", TASK_DATA / "mrpc_style.tsv")
    assert mrpc[0].text_a == 'The bank said " no " .'
    assert [example.label for example in mrpc] == ["1", "0"]


def test_stsb_scores_are_floats():
    examples = read_glue("stsb", TASK_DATA / "stsb_style.tsv")
    assert [example.label for example in examples] == [5.0, 1.6, 0.75]
    assert TASKS["stsb"].is_regression


def test_glue_test_files_are_read_without_labels(tmp_path):
    test_file = tmp_path / "test.tsv"
    test_file.write_text("index\tsentence\n0\tA test sentence.\n")
    assert [(e.text_a, e.label) for e in read_glue("cola", test_file, with_labels=False)] == [
        ("A test sentence.", None)
    ]


def test_mnli_evaluates_matched_and_mismatched():
    assert TASKS["mnli"].dev_files == ("dev_matched.tsv", "dev_mismatched.tsv")


def test_csv_with_quoted_commas_and_newlines():
    columns = ColumnSpec(text_a="review", text_b="topic", label="sentiment", example_id="id")
    examples = read_classification(TASK_DATA / "reviews.csv", columns)
    assert len(examples) == 4
    assert examples[1].text_a == 'Screen cracked, "fragile" build.'
    assert examples[3].text_a == "Two\nlines of text"
    assert examples[3].example_id == "r4"
    assert label_set(examples) == ("negative", "neutral", "positive")


def test_jsonl_labels_become_strings_and_sort_numerically():
    examples = read_classification(TASK_DATA / "reviews.jsonl", ColumnSpec("text", label="label"))
    assert [example.label for example in examples] == ["1", "0", "10"]
    assert label_set(examples) == ("0", "1", "10")
    regression = ColumnSpec("text", label="score", is_regression=True)
    assert [e.label for e in read_classification(TASK_DATA / "reviews.jsonl", regression)] == [
        4.5,
        1.0,
        3.0,
    ]


def test_conll_skips_docstart_and_converts_iob1_to_iob2():
    sentences = read_conll(TASK_DATA / "conll_iob1.txt")
    assert len(sentences) == 2
    assert sentences[0].tokens[0] == "U.N." and sentences[0].line == 3
    assert sentences[0].tags == ("B-ORG", "O", "B-PER", "O", "O", "B-LOC", "O")
    assert sentences[1].tags == ("O", "B-LOC", "B-LOC", "O", "B-LOC", "I-LOC", "O")


def test_to_iob2_maps_bmes_and_leaves_iob2_alone():
    assert to_iob2(["B-A", "M-A", "E-A", "S-B", "O"]) == ["B-A", "I-A", "I-A", "B-B", "O"]
    assert to_iob2(["B-A", "I-A", "B-A", "O"]) == ["B-A", "I-A", "B-A", "O"]


def test_bmes_file_keeps_its_tags():
    sentences = read_tagging(TASK_DATA / "resume_style.bmes")
    assert [len(sentence.tokens) for sentence in sentences] == [4, 5]
    assert sentences[1].tags == ("B-CONT", "M-CONT", "E-CONT", "O", "S-NAME")


def test_squad_reader_fixes_offsets_and_reads_unanswerable_questions():
    examples = {example.id: example for example in read_squad(TASK_DATA / "squad_style.json")}
    assert len(examples) == 5
    santa_clara = examples["q2"].answers[0]
    assert santa_clara.start == 30  # the file says 28; the text starts at 30
    assert examples["q2"].context[30 : 30 + len(santa_clara.text)] == "Santa Clara"
    assert examples["q5"].is_impossible and examples["q5"].answers == ()
    assert examples["q1"].title == "Tiny"


def test_swag_and_generic_multiple_choice():
    swag = read_swag(TASK_DATA / "swag_style.csv")
    assert [example.label for example in swag] == [0, 1]
    assert swag[0].context == "Students lower their eyes nervously."
    assert swag[0].start == "She"
    assert swag[0].endings[0] == "pats her shoulder, then speaks."
    assert swag[1].example_id == "lsmdc_y2-17"
    choices = read_multiple_choice(TASK_DATA / "choices.jsonl")
    assert len(choices) == 2 and len(choices[0].endings) == 3


def test_score_multiple_choice_by_id(tmp_path):
    predictions = tmp_path / "predictions.jsonl"
    predictions.write_text('{"id": "q2", "prediction": 1}\n{"id": "q1", "prediction": 0}\n')
    assert score("multiple-choice", TASK_DATA / "choices.jsonl", predictions) == {"accuracy": 0.5}


def test_score_generic_classification(tmp_path):
    columns = ColumnSpec(text_a="review", label="sentiment")
    predictions = write_label_predictions(
        tmp_path / "p.jsonl", ["positive", "negative", "positive", "positive"]
    )
    assert score("classification", TASK_DATA / "reviews.csv", predictions, columns) == {
        "accuracy": 0.75
    }


# --- Bad input: a clear message naming file and line --------------------------------------------


def test_missing_file_names_the_path(tmp_path):
    with pytest.raises(FileNotFoundError, match="nothing.tsv"):
        read_glue("sst2", tmp_path / "nothing.tsv")


@pytest.mark.parametrize(
    ("name", "text"),
    [("empty.tsv", ""), ("header_only.tsv", "sentence\tlabel\n"), ("blank.txt", "\n\n")],
)
def test_empty_files_are_rejected(tmp_path, name, text):
    path = tmp_path / name
    path.write_text(text)
    with pytest.raises(ValueError, match=f"{name}: the file holds no examples"):
        read_glue("sst2", path) if name.endswith(".tsv") else read_tagging(path)


def test_missing_column_names_file_line_and_columns(tmp_path):
    path = tmp_path / "train.tsv"
    path.write_text("text\tlabel\nfine\t1\n")
    with pytest.raises(ValueError, match=r"train.tsv:1: no column 'sentence'.*\['text', 'label'\]"):
        read_glue("sst2", path)


def test_short_row_names_its_line(tmp_path):
    path = tmp_path / "train.tsv"
    path.write_text("index\tsentence1\tsentence2\tlabel\n0\ta\tb\tentailment\n1\tonly a\n")
    with pytest.raises(ValueError, match=r"train.tsv:3: 2 fields where the header has 4"):
        read_glue("rte", path)


def test_a_row_with_more_fields_than_the_header_names_its_line(tmp_path):
    """A stray tab in a TSV text shifts the label: refused, not read as the header says."""
    path = tmp_path / "train.tsv"
    path.write_text("sentence\tlabel\nfine\t1\na tab\there\t0\n")
    with pytest.raises(ValueError, match=r"train.tsv:3: 3 fields where the header has 2"):
        read_glue("sst2", path)
    no_header = tmp_path / "cola.tsv"
    no_header.write_text("src\t1\t\tgood\nsrc\t0\t*\tbad\textra\n")
    with pytest.raises(ValueError, match=r"cola.tsv:2: 5 fields where line 1 has 4"):
        read_glue("cola", no_header)


def test_a_column_file_line_missing_a_column_names_its_line(tmp_path):
    """CoNLL's `token POS chunk NER`: a line without its NER column would make the chunk tag
    (B-NP) an entity of type NP."""
    path = tmp_path / "train.txt"
    path.write_text("EU NNP B-NP B-ORG\nrejects VBZ B-VP O\nGerman JJ B-NP\n\n")
    with pytest.raises(ValueError, match=r"train.txt:3: 3 columns where the file's lines have 4"):
        read_conll(path)


def test_csv_errors_become_value_errors_with_the_line(tmp_path):
    path = tmp_path / "train.csv"
    path.write_text("text,label\nfine,1\n" + "x" * 200_000 + ",0\n")
    with pytest.raises(ValueError, match=r"train.csv:3: field larger than field limit"):
        read_classification(path, ColumnSpec("text", label="label"))
    with pytest.raises(ValueError, match="needs column positions"):
        read_classification(path, ColumnSpec("text", label="label", has_header=False))


def test_label_unseen_in_training_names_file_and_line(tmp_path):
    path = tmp_path / "dev.csv"
    path.write_text("text,label\ngood,pos\nmeh,neutral\n")
    with pytest.raises(ValueError, match=r"dev.csv:3: label 'neutral' is not one of"):
        read_classification(path, ColumnSpec("text", label="label"), labels=("neg", "pos"))


def test_non_numeric_regression_target(tmp_path):
    path = tmp_path / "train.jsonl"
    path.write_text('{"text": "a", "y": 1.5}\n{"text": "b", "y": "high"}\n')
    with pytest.raises(ValueError, match=r"train.jsonl:2: regression target 'high'"):
        read_classification(path, ColumnSpec("text", label="y", is_regression=True))


def test_malformed_json_lines_and_documents(tmp_path):
    lines = tmp_path / "train.jsonl"
    lines.write_text('{"text": "a", "label": 1}\n{"text": "b", "label": \n')
    with pytest.raises(ValueError, match=r"train.jsonl:2: malformed JSON"):
        read_classification(lines, ColumnSpec("text", label="label"))
    document = tmp_path / "squad.json"
    document.write_text('{"version": "1.1",\n "data": [\n  {"title": "x",}\n]}\n')
    with pytest.raises(ValueError, match=r"squad.json:3: malformed JSON"):
        read_squad(document)


def squad_document(answer_text: str, answer_start: int) -> dict:
    qa = {"id": "q1", "question": "Who?", "answers": [{"text": answer_text, "answer_start": 0}]}
    qa["answers"][0]["answer_start"] = answer_start
    return {"data": [{"title": "t", "paragraphs": [{"context": "Alice met Bob.", "qas": [qa]}]}]}


def test_answer_absent_from_context_is_an_error(tmp_path):
    path = tmp_path / "train.json"
    path.write_text(json.dumps(squad_document("Carol", 0)))
    with pytest.raises(ValueError, match=r"train.json: question 'q1'.*'Carol' does not occur"):
        read_squad(path)


def test_squad_question_without_answers_is_an_error_unless_allowed(tmp_path):
    document = squad_document("Alice", 0)
    document["data"][0]["paragraphs"][0]["qas"][0]["answers"] = []
    path = tmp_path / "train.json"
    path.write_text(json.dumps(document))
    with pytest.raises(ValueError, match="no answers and is not marked is_impossible"):
        read_squad(path)
    assert read_squad(path, require_answers=False)[0].answers == ()


def test_missing_squad_key_names_its_place(tmp_path):
    path = tmp_path / "train.json"
    path.write_text(json.dumps({"data": [{"title": "t", "paragraphs": [{"qas": []}]}]}))
    with pytest.raises(ValueError, match=r"data\[0\].paragraphs\[0\] has no 'context'"):
        read_squad(path)


def test_bad_tag_and_missing_tag_name_their_lines(tmp_path):
    path = tmp_path / "train.txt"
    path.write_text("EU B-ORG\nrejects O\n\nPeter\n")
    with pytest.raises(ValueError, match=r"train.txt:4: expected a token and a tag"):
        read_tagging(path)
    path.write_text("EU B-ORG\nrejects X-VERB\n")
    with pytest.raises(ValueError, match=r"train.txt:2: tag 'X-VERB'"):
        read_tagging(path)


def test_swag_label_outside_choices(tmp_path):
    path = tmp_path / "train.csv"
    lines = (TASK_DATA / "swag_style.csv").read_text().splitlines()
    path.write_text("\n".join([lines[0], lines[1][:-1] + "4"]) + "\n")
    with pytest.raises(ValueError, match=r"train.csv:2: label '4' is not a choice index 0..3"):
        read_swag(path)


def test_multiple_choice_counts_must_agree(tmp_path):
    path = tmp_path / "train.jsonl"
    path.write_text('{"choices": ["a", "b"], "label": 0}\n{"choices": ["a", "b", "c"]}\n')
    with pytest.raises(
        ValueError, match=r"train.jsonl:2: 3 choices, the file's first example has 2"
    ):
        read_multiple_choice(path)


def test_predictions_that_do_not_match_the_gold_data(tmp_path):
    gold = TASK_DATA / "rte_style.tsv"
    predictions = tmp_path / "predictions.jsonl"
    predictions.write_text('{"index": 0, "prediction": "maybe"}\n')
    with pytest.raises(ValueError, match=r"predictions.jsonl:1: prediction 'maybe' is not one of"):
        score("rte", gold, predictions)
    predictions.write_text('{"index": 0, "prediction": "entailment"}\n')
    with pytest.raises(ValueError, match=r"no prediction for 3 of 4 examples"):
        score("rte", gold, predictions)
    predictions.write_text('{"index": 0, "prediction": "entailment"}\n' * 2)
    with pytest.raises(ValueError, match=r"predictions.jsonl:2: a second prediction"):
        score("rte", gold, predictions)
    with pytest.raises(ValueError, match="unknown task 'glue'"):
        score("glue", gold, predictions)


def test_tagging_predictions_must_follow_the_gold_tokens(tmp_path):
    gold = TASK_DATA / "resume_style.bmes"
    predictions = tmp_path / "predictions.txt"
    predictions.write_text("高 B-NAME B-NAME\n勇 E-NAME E-NAME\n\n中 B-CONT B-CONT\n")
    with pytest.raises(ValueError, match=r"predictions.txt:1: the sentence's tokens differ"):
        score("tagging", gold, predictions)
    predictions.write_text("高 B-NAME B-NAME\n勇 E-NAME E-NAME\n： O O\n男 O O\n")
    with pytest.raises(ValueError, match=r"predictions.txt: 1 sentences, the gold file .* has 2"):
        score("tagging", gold, predictions)


@pytest.mark.parametrize(
    ("name", "read"),
    [
        ("dev.tsv", lambda path: read_glue("sst2", path)),
        ("dev.txt", read_conll),
        ("dev.jsonl", lambda path: read_classification(path, ColumnSpec("text", label="label"))),
        ("dev.json", read_squad),
    ],
)
def test_a_file_that_is_not_utf8_names_file_and_line(tmp_path, name, read):
    """Not the codec's message (which names neither): the file, the line and what to do."""
    good = {
        "dev.tsv": "sentence\tlabel\nfine\t1\n",
        "dev.txt": "EU B-ORG\nrejects O\n",
        "dev.jsonl": '{"text": "fine", "label": "1"}\n',
        "dev.json": '{"data": []\n',
    }[name]
    path = tmp_path / name
    path.write_bytes(good.encode() + "caf\xe9\n".encode("latin-1"))
    line = good.count("\n") + 1
    with pytest.raises(ValueError, match=rf"{name}:{line}: not UTF-8 \(byte 0xe9\)"):
        read(path)


@pytest.mark.parametrize(
    ("head", "suffix"),
    [
        ('{"text": "fine", "label": "1"}\n', ".jsonl"),
        ('text,label\n"a, b",1\n', ".csv"),
        ("\ufefftext,label\n", ".csv"),
        ("text\tlabel\na, b\t1\n", ".tsv"),
        ("just a sentence\n", ".tsv"),
    ],
)
def test_standard_input_is_read_in_the_format_its_first_line_shows(head, suffix):
    """`--data -` has no file name, so no suffix to choose the format by."""
    assert suffix_for(head) == suffix
