"""`bertlab serve` in a real browser: headless Chromium opens the page served from tiny
fine-tuned models, types a sentence into each view and checks what a person would see against
the JSON API; it writes a screenshot of each view (to `BERTLAB_SCREENSHOTS`, when set, as the
figures of docs/serve.md).

Marked `browser` (not in the default run; `make test-browser` and CI run it). It needs
Debian's `chromium` and `chromium-driver` and skips, saying so, where they are missing.
"""

# ruff: noqa: E402
from __future__ import annotations

import json
import os
import shutil
import urllib.request
from pathlib import Path

import pytest
import torch

# The web app's packages are optional (bertlab.core.optional): without them this file is skipped,
# before the imports below (hence E402) that need them.
pytest.importorskip("fastapi", reason="`bertlab serve` needs fastapi, which is not installed")

from bertlab.apps.serve.api import create_app
from bertlab.apps.serve.server import allowed_hosts, load_models
from bertlab.core.finetune_config import FinetuneConfig, TaskDataConfig
from bertlab.data.tasks.classification import ColumnSpec
from bertlab.task_families import make_task
from bertlab.training.finetuning.finetune import ModelSource, finetune_task, read_task_data

pytestmark = pytest.mark.browser

TASK_DATA = Path(__file__).resolve().parents[1] / "data" / "tasks"
# Chromium's background connections are refused on a closed network, and a sandbox needs
# privileges a CI container may not have.
CHROMIUM_FLAGS = (
    "--headless=new",
    "--no-sandbox",
    "--disable-gpu",
    "--disable-background-networking",
    "--disable-component-update",
    "--disable-sync",
    "--no-first-run",
    "--window-size=1100,900",
)
WAIT_SECONDS = 30
SCREENSHOT_WIDTH = 1100
MAX_SCREENSHOT_HEIGHT = 1600
FINETUNE = FinetuneConfig(
    num_train_epochs=30, batch_size=4, learning_rate=3e-3, warmup_proportion=0.0, seed=1
)
# Sentences from the fine-tuning files, which the tiny models have learned by heart.
REVIEW = "Great phone, long battery life."
NER_TEXT = "In Germany Bonn and New York ."
QUESTION = "Who won?"
CONTEXT = "Denver beat Carolina 24-10 in Santa Clara. Denver won its third title."


def browser_paths() -> tuple[str, str]:
    """(Chromium, chromedriver), or a skip that says what to install."""
    pytest.importorskip("selenium", reason="selenium is not installed (pip install -e .[dev])")
    browser = next(filter(None, map(shutil.which, ("chromium", "chromium-browser"))), None)
    driver = shutil.which("chromedriver")
    if browser is None or driver is None:
        pytest.skip(
            "no Chromium and chromedriver on PATH (Debian: apt-get install chromium "
            "chromium-driver)"
        )
    return browser, driver


@pytest.fixture(scope="module")
def browser(tmp_path_factory):
    from selenium import webdriver
    from selenium.webdriver.chrome.service import Service

    browser_binary, driver_binary = browser_paths()
    options = webdriver.ChromeOptions()
    options.binary_location = browser_binary
    for flag in CHROMIUM_FLAGS:
        options.add_argument(flag)
    options.add_argument(f"--user-data-dir={tmp_path_factory.mktemp('chromium-profile')}")
    # An explicit driver path: selenium never tries to download one.
    driver = webdriver.Chrome(service=Service(driver_binary), options=options)
    yield driver
    driver.quit()


@pytest.fixture(scope="module")
def base_url(tmp_path_factory, task_vocab, serve_models, start_server) -> str:
    """The page served from tiny models fine-tuned for a few seconds on the task fixtures."""
    browser_paths()  # skip before training when there is no browser
    out = tmp_path_factory.mktemp("finetuned")
    source = ModelSource(model_size="tiny", tokenizer=task_vocab)
    reviews = ColumnSpec("review", label="sentiment")
    squad_data = TaskDataConfig(squad_max_seq_length=64)
    tasks = {
        "sentiment": (make_task("classification", reviews), "reviews.csv"),
        "ner": (make_task("conll2003"), "conll_iob1.txt"),
        "qa": (make_task("squad", data=squad_data), "squad_style.json"),
    }
    threads = torch.get_num_threads()
    torch.set_num_threads(1)  # tiny models: thread hand-offs cost more than they give
    try:
        directories = [("mlm", serve_models["mlm"]), ("clm", serve_models["clm"])]
        for name, (task, file_name) in tasks.items():
            data = read_task_data(task, TASK_DATA / file_name, None)
            result = finetune_task(task, data, source, FINETUNE, out / name, show_progress=False)
            directories.append((name, result.best_dir))
    finally:
        torch.set_num_threads(threads)
    app = create_app(load_models(directories), allowed_hosts=allowed_hosts("127.0.0.1"))
    return start_server(app)


def api(base_url: str, model: str, task: str, body: dict) -> dict:
    request = urllib.request.Request(
        f"{base_url}/api/models/{model}/{task}",
        data=json.dumps(body).encode(),
        headers={"Content-Type": "application/json"},
    )
    with urllib.request.urlopen(request, timeout=60) as response:
        return json.loads(response.read())


def open_view(browser, base_url: str, view: str) -> None:
    """Open the page (once) and click the view's tab, as a person would."""
    from selenium.webdriver.common.by import By
    from selenium.webdriver.support.ui import WebDriverWait

    if not browser.current_url.startswith(base_url):
        browser.get(base_url + "/")
        WebDriverWait(browser, WAIT_SECONDS).until(
            lambda driver: driver.find_element(By.TAG_NAME, "body").get_attribute("data-ready")
        )
    browser.find_element(By.CSS_SELECTOR, f"#tabs button[data-view='{view}']").click()
    assert browser.find_element(By.ID, f"view-{view}").is_displayed()


def type_into(browser, element_id: str, text: str) -> None:
    from selenium.webdriver.common.by import By

    field = browser.find_element(By.ID, element_id)
    field.clear()
    field.send_keys(text)


def run_view(browser, view: str):
    """Click the view's button and wait for its result (or its error); the result element."""
    from selenium.webdriver.common.by import By
    from selenium.webdriver.support.ui import WebDriverWait

    result = browser.find_element(By.ID, f"{view}-result")
    before = result.get_attribute("data-done") or "0"
    error = browser.find_element(By.ID, f"{view}-error")
    browser.find_element(By.ID, f"{view}-run").click()
    WebDriverWait(browser, WAIT_SECONDS).until(
        lambda _: (result.get_attribute("data-done") or "0") != before or error.text
    )
    return result


def screenshot(browser, view: str, tmp_path: Path) -> None:
    """The page at its full height (up to a limit), to tmp_path and BERTLAB_SCREENSHOTS."""
    page, chrome = browser.execute_script(
        "return [document.documentElement.scrollHeight, window.outerHeight - window.innerHeight]"
    )
    browser.set_window_size(SCREENSHOT_WIDTH, min(page + chrome, MAX_SCREENSHOT_HEIGHT))
    name = f"serve_{view.replace('-', '_')}.png"
    browser.save_screenshot(str(tmp_path / name))
    assert (tmp_path / name).read_bytes()[:4] == b"\x89PNG"
    if os.environ.get("BERTLAB_SCREENSHOTS"):
        target = Path(os.environ["BERTLAB_SCREENSHOTS"])
        target.mkdir(parents=True, exist_ok=True)
        shutil.copyfile(tmp_path / name, target / name)
    browser.set_window_size(SCREENSHOT_WIDTH, 900)


def texts(browser, selector: str) -> list[str]:
    from selenium.webdriver.common.by import By

    return [element.text for element in browser.find_elements(By.CSS_SELECTOR, selector)]


# Whether an element's text is drawn in its font stack with glyphs, not the missing-glyph box
# (the pixels of a character no font has, U+10FFFD), as the page's own check does.
DRAWS_GLYPHS = r"""
const [node] = arguments;
const style = getComputedStyle(node);
const canvas = document.createElement("canvas");
canvas.width = 400;
canvas.height = 40;
const context = canvas.getContext("2d");
context.font = "24px " + style.fontFamily;
context.textBaseline = "top";
const pixels = (text) => {
  context.clearRect(0, 0, canvas.width, canvas.height);
  context.fillText(text, 2, 2);
  return context.getImageData(0, 0, canvas.width, canvas.height).data.join();
};
return pixels(node.textContent) !== pixels("\u{10FFFD}".repeat(node.textContent.length));
"""


def cjk_state(browser) -> str:
    """The page's word on Chinese characters: drawn by a font of the "system", by the
    server's font ("served"), or "boxes"."""
    from selenium.webdriver.support.ui import WebDriverWait

    script = "return document.documentElement.dataset.cjk"
    return WebDriverWait(browser, WAIT_SECONDS).until(lambda driver: driver.execute_script(script))


def test_chinese_is_drawn_with_the_servers_font(browser, base_url, tmp_path):
    """Without a CJK font of its own (Debian's chromium alone has none), the page draws Chinese
    with the Noto Sans CJK SC that the server serves, and shows no warning."""
    from selenium.webdriver.common.by import By
    from selenium.webdriver.support.ui import Select

    sentence = "我们的手机电池很好。"
    open_view(browser, base_url, "score")
    state = cjk_state(browser)
    if state == "system":
        pytest.skip("this machine's Chromium has a CJK font of its own; the server's is not used")
    assert state == "served"
    assert browser.execute_script("""return document.fonts.check('12px "bertlab CJK"', '中')""")
    assert not browser.find_element(By.ID, "cjk-warning").is_displayed()
    Select(browser.find_element(By.ID, "score-model")).select_by_value("mlm")
    type_into(browser, "score-text", sentence)
    run_view(browser, "score")
    (cell,) = [
        cell
        for cell in browser.find_elements(By.CSS_SELECTOR, "#score-result table.scores td")
        if cell.text == sentence
    ]
    assert browser.execute_script(DRAWS_GLYPHS, cell)


def test_without_the_font_the_page_says_chinese_shows_as_boxes(
    browser, serve_models, start_server, monkeypatch
):
    from selenium.webdriver.common.by import By

    from bertlab.apps.serve import fonts

    browser_paths()
    monkeypatch.setattr(fonts, "packaged_cjk_font_file", lambda: None)
    url = start_server(create_app(load_models([("mlm", serve_models["mlm"])])))
    browser.get(url + "/")
    state = cjk_state(browser)
    if state == "system":
        pytest.skip("this machine's Chromium has a CJK font of its own: no warning to show")
    assert state == "boxes"
    warning = browser.find_element(By.ID, "cjk-warning")
    assert warning.is_displayed()
    assert warning.text.startswith("This browser cannot draw Chinese characters")


def test_fill_mask_shows_the_candidates_of_each_mask(browser, base_url, tmp_path):
    text = "great [MASK] , long battery life ."
    open_view(browser, base_url, "fill-mask")
    type_into(browser, "fill-mask-text", text)
    run_view(browser, "fill-mask")
    expected = api(base_url, "mlm", "fill-mask", {"texts": [text], "top_k": 8})
    (mask,) = expected["results"][0]["masks"]
    assert texts(browser, "#fill-mask-result .candidates .bar-name") == mask["tokens"]
    shown = texts(browser, "#fill-mask-result .candidates .bar-value")
    assert shown == [f"{100 * p:.1f}%" for p in mask["probabilities"]]
    assert texts(browser, "#fill-mask-result .filled") == [mask["tokens"][0]]
    screenshot(browser, "fill-mask", tmp_path)


def test_a_mistake_is_shown_as_the_servers_message(browser, base_url):
    open_view(browser, base_url, "fill-mask")
    type_into(browser, "fill-mask-text", "no mask in this sentence")
    run_view(browser, "fill-mask")
    assert texts(browser, "#fill-mask-error") == ["422: texts[0] has no [MASK] to fill"]
    assert texts(browser, "#fill-mask-result .bar-name") == []


def test_a_causal_model_is_listed_for_generate_and_score_not_fill_mask(browser, base_url):
    from selenium.webdriver.common.by import By
    from selenium.webdriver.support.ui import Select

    def listed(view: str) -> list[str]:
        select = Select(browser.find_element(By.ID, f"{view}-model"))
        return [option.get_attribute("value") for option in select.options]

    open_view(browser, base_url, "generate")
    assert listed("fill-mask") == ["mlm"]
    assert listed("generate") == ["clm"]
    assert listed("score") == ["mlm", "clm"]
    summary = browser.find_element(By.ID, "models-summary").text
    assert "clm (left-to-right BertForPreTraining" in summary
    assert "generate, score, attention, embed" in summary


def test_generate_shows_the_continuation_of_the_prompt(browser, base_url, tmp_path):
    prompt = "great phone"
    open_view(browser, base_url, "generate")
    type_into(browser, "generate-text", prompt)
    type_into(browser, "generate-seed", "3")
    run_view(browser, "generate")
    body = {"texts": [prompt], "seed": 3, "temperature": 1.0}
    (expected,) = api(base_url, "clm", "generate", body)["results"]
    assert texts(browser, "#generate-result .headline") == [expected["text"]]
    assert texts(browser, "#generate-result .continuation") == [expected["continuation"]]
    screenshot(browser, "generate", tmp_path)


def test_score_ranks_the_sentences(browser, base_url, tmp_path):
    from selenium.webdriver.common.by import By
    from selenium.webdriver.support.ui import Select

    sentences = ["great phone , long battery life .", "life battery long , phone great .", "☃ ☃"]
    open_view(browser, base_url, "score")
    Select(browser.find_element(By.ID, "score-model")).select_by_value("clm")
    type_into(browser, "score-text", "\n".join(sentences))
    run_view(browser, "score")
    results = api(base_url, "clm", "score", {"texts": sentences})["results"]
    ranked = sorted(results[:2], key=lambda result: result["rank"]) + results[2:]
    rows = browser.find_elements(By.CSS_SELECTOR, "#score-result table.scores tr")[1:]
    shown = [[cell.text for cell in row.find_elements(By.TAG_NAME, "td")] for row in rows]
    assert shown == [
        [
            "–" if result["rank"] is None else str(result["rank"]),
            f"{result['total']:.2f}",
            f"{result['perplexity']:.1f}",
            str(len(result["pieces"])),
            sentences[results.index(result)],
        ]
        for result in ranked
    ]
    screenshot(browser, "score", tmp_path)


def test_classify_shows_the_label_and_every_labels_probability(browser, base_url, tmp_path):
    from selenium.webdriver.common.by import By

    open_view(browser, base_url, "classify")
    assert not browser.find_element(By.ID, "classify-pair").is_displayed()  # single texts
    type_into(browser, "classify-text", REVIEW)
    run_view(browser, "classify")
    (expected,) = api(base_url, "sentiment", "classify", {"texts": [REVIEW]})["results"]
    assert expected["label"] == "positive"  # learned from reviews.csv
    assert texts(browser, "#classify-result .prediction") == ["positive"]
    names = [item["label"] for item in expected["probabilities"]]
    assert texts(browser, "#classify-result .bar-name") == names
    screenshot(browser, "classify", tmp_path)


def test_tag_marks_the_entity_spans_in_the_text(browser, base_url, tmp_path):
    from selenium.webdriver.common.by import By

    open_view(browser, base_url, "tag")
    type_into(browser, "tag-text", NER_TEXT)
    run_view(browser, "tag")
    (expected,) = api(base_url, "ner", "tag", {"texts": [NER_TEXT]})["results"]
    assert [(e["type"], e["text"]) for e in expected["entities"]] == [
        ("LOC", "Germany"),
        ("LOC", "Bonn"),
        ("LOC", "New York"),
    ]  # learned from conll_iob1.txt
    marks = browser.find_elements(By.CSS_SELECTOR, "#tag-result mark.entity")
    shown = [
        (mark.get_attribute("data-type"), mark.find_element(By.CLASS_NAME, "entity-text").text)
        for mark in marks
    ]
    assert shown == [(e["type"], e["text"]) for e in expected["entities"]]
    screenshot(browser, "tag", tmp_path)


def test_answer_is_marked_in_its_context(browser, base_url, tmp_path):
    open_view(browser, base_url, "answer")
    type_into(browser, "answer-question", QUESTION)
    type_into(browser, "answer-context", CONTEXT)
    run_view(browser, "answer")
    body = {"inputs": [{"question": QUESTION, "context": CONTEXT}]}
    (expected,) = api(base_url, "qa", "answer", body)["results"]
    # The span the model picks is its own business (a model of 5 questions answers "Denver" on
    # one CPU and "Carolina" on another); the page must mark exactly that span of the context.
    assert expected["answer"] and expected["answer"] in CONTEXT
    assert texts(browser, "#answer-result mark.answer") == [expected["answer"]]
    assert texts(browser, "#answer-result .marked-text") == [CONTEXT]
    screenshot(browser, "answer", tmp_path)


def test_attention_draws_a_heatmap_with_the_tokens(browser, base_url, tmp_path):
    from selenium.webdriver.common.by import By
    from selenium.webdriver.support.ui import Select

    open_view(browser, base_url, "attention")
    Select(browser.find_element(By.ID, "attention-model")).select_by_value("ner")
    type_into(browser, "attention-text", NER_TEXT)
    run_view(browser, "attention")
    expected = api(base_url, "ner", "attention", {"text": NER_TEXT, "layer": 2})
    tokens = expected["tokens"]
    assert tokens[0] == "[CLS]" and tokens[-1] == "[SEP]"
    assert texts(browser, "#attention-result .col-label") == tokens
    assert texts(browser, "#attention-result .row-label") == tokens
    # Column labels read upwards at 45 degrees (not turned a quarter, head to the side).
    label = browser.find_element(By.CSS_SELECTOR, "#attention-result .col-label span")
    transform = browser.execute_script("return getComputedStyle(arguments[0]).transform", label)
    a, b = map(float, transform.removeprefix("matrix(").split(",")[:2])
    assert (a, b) == pytest.approx((0.7071, -0.7071), abs=1e-3)
    cells = browser.find_elements(By.CSS_SELECTOR, "#attention-result .attention-map .cell")
    assert len(cells) == len(tokens) ** 2
    weight = expected["attentions"][0][0][1][2]  # head 1, query token 1, key token 2
    Select(browser.find_element(By.ID, "attention-head")).select_by_value("1")
    cells = browser.find_elements(By.CSS_SELECTOR, "#attention-result .attention-map .cell")
    title = cells[1 * len(tokens) + 2].get_attribute("title")
    assert title == f"{tokens[1]} → {tokens[2]}: {weight:.3f}"
    screenshot(browser, "attention", tmp_path)


def test_attention_of_a_pair_as_lines_and_in_every_layer(browser, base_url, tmp_path):
    from selenium.webdriver.common.by import By
    from selenium.webdriver.support.ui import Select, WebDriverWait

    pair = "Bonn ."
    open_view(browser, base_url, "attention")
    Select(browser.find_element(By.ID, "attention-model")).select_by_value("ner")
    type_into(browser, "attention-text", NER_TEXT)
    type_into(browser, "attention-pair", pair)
    Select(browser.find_element(By.ID, "attention-head")).select_by_value("1")
    Select(browser.find_element(By.ID, "attention-show")).select_by_value("lines")
    run_view(browser, "attention")
    expected = api(base_url, "ner", "attention", {"text": NER_TEXT, "pair": pair, "layer": 2})
    tokens, matrix = expected["tokens"], expected["attentions"][0][0]  # layer 2, head 1
    assert tokens.count("[SEP]") == 2 and tokens[-3:] == ["bonn", ".", "[SEP]"]
    assert texts(browser, "#attention-result svg text.query") == tokens
    assert texts(browser, "#attention-result svg text.key") == tokens
    segment_b = texts(browser, "#attention-result svg text.query.segment-b")
    assert segment_b == tokens[-3:]
    lines = browser.find_elements(By.CSS_SELECTOR, "#attention-result svg line")
    assert len(lines) == len(tokens) ** 2
    top = max(max(row) for row in matrix)
    opacity = float(lines[1 * len(tokens) + 2].get_attribute("stroke-opacity"))
    assert opacity == pytest.approx(matrix[1][2] / top, abs=1e-4)
    browser.find_elements(By.CSS_SELECTOR, "#attention-result svg text.query")[1].click()
    picked = browser.find_elements(By.CSS_SELECTOR, "#attention-result svg line.picked")
    assert [line.get_attribute("data-query") for line in picked] == ["1"] * len(tokens)
    assert all(line.is_displayed() for line in picked)
    screenshot(browser, "attention-lines", tmp_path)

    result = browser.find_element(By.ID, "attention-result")
    before = result.get_attribute("data-done")
    Select(browser.find_element(By.ID, "attention-layer")).select_by_value("all")  # fetches
    WebDriverWait(browser, WAIT_SECONDS).until(
        lambda _: result.get_attribute("data-done") != before
    )
    panels = browser.find_elements(By.CSS_SELECTOR, "#attention-result .layer-panel")
    assert [panel.find_element(By.TAG_NAME, "h3").text for panel in panels] == [
        "layer 1",
        "layer 2",
    ]
    cells = browser.find_elements(By.CSS_SELECTOR, "#attention-result .layer-panel .cell")
    assert len(cells) == 2 * len(tokens) ** 2
    every = api(base_url, "ner", "attention", {"text": NER_TEXT, "pair": pair, "layer": None})
    weight = every["attentions"][0][0][1][2]  # layer 1, head 1, query 1, key 2
    title = cells[1 * len(tokens) + 2].get_attribute("title")
    assert title == f"{tokens[1]} → {tokens[2]}: {weight:.3f}"
    screenshot(browser, "attention-layers", tmp_path)
    Select(browser.find_element(By.ID, "attention-show")).select_by_value("heatmap")
    type_into(browser, "attention-pair", "")


def test_embed_shows_the_similarity_of_the_sentences(browser, base_url, tmp_path):
    sentences = [REVIEW, "Screen cracked, fragile build.", "Fine value for money"]
    from selenium.webdriver.common.by import By
    from selenium.webdriver.support.ui import Select

    open_view(browser, base_url, "embed")
    Select(browser.find_element(By.ID, "embed-model")).select_by_value("sentiment")
    type_into(browser, "embed-text", "\n".join(sentences))
    run_view(browser, "embed")
    values = texts(browser, "#embed-result .similarity .cell")
    assert len(values) == 9
    assert [values[0], values[4], values[8]] == ["1.00", "1.00", "1.00"]
    vectors = [
        torch.tensor(result["vector"], dtype=torch.float64)
        for result in api(base_url, "sentiment", "embed", {"texts": sentences})["results"]
    ]
    similarity = torch.nn.functional.cosine_similarity(vectors[0], vectors[1], dim=0)
    assert values[1] == f"{similarity:.2f}"
    screenshot(browser, "embed", tmp_path)
