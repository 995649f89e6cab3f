"""levenshtein, rouge-n, bleu, gleu, meteor and word-count score as promptfoo 0.121.20 does.

Every expected number and reason below was produced by promptfoo 0.121.20 itself: its assertion
handlers run on the same (type, value, threshold, output), and tests/parity/similarity/golden.json from
`promptfoo eval` on tests/parity/similarity/promptfooconfig.yaml.

METEOR is the exception that needs a note. promptfoo 0.121.20's own `meteor` never scores: it loads
the `natural` package with an ESM `import()` that yields only a default export, so every meteor row is
an ERROR ("Invariant failed: PorterStemmer should be loaded"). The meteor numbers here come from
promptfoo's meteor module with that import fixed and its WordNet synonym stage switched off, which is
what factcli implements (exact + Porter-stem matching); the one synonym row shows how far apart the
two are when WordNet would have matched.
"""

import asyncio
import json
import re
from pathlib import Path

import pytest
from typer.testing import CliRunner

import factcli.assertions  # noqa: F401  (registers the handlers)
from factcli.scoring.registry import AssertionError_
from factcli.scoring.scorer import run_assertion
from factcli.assertions.js_semantics import js_number, js_to_fixed, js_to_precision
from factcli.stats.porter_stemmer import porter_stem
from factcli.assertions.similarity import treebank_tokenize
from factcli.cli import app
from factcli.types import Assertion, ProviderResponse
from factcli.types import TestCase as Case
from parity_compare import differences, row_key

PARITY = Path(__file__).parent / "parity" / "similarity"


def grade(type_, value, threshold, output, response=None, **extra):
    raw = {"type": type_, **({"value": value} if value is not None else {}),
           **({"threshold": threshold} if threshold is not None else {}), **extra}
    a = Assertion(type=type_, value=value, threshold=threshold, raw=raw)
    response = response or ProviderResponse(output=output)
    return asyncio.run(run_assertion(a, output=output, test=Case(), variables={}, prompt="p",
                                     response=response))


# (type, value, threshold, output) -> (pass, score, reason), all from promptfoo 0.121.20
ROWS = [
    ('levenshtein', 'sitting', None, 'kitten', True, 1.0, 'Assertion passed'),
    ('levenshtein', 'sitting', 2, 'kitten', False, 0.0, 'Levenshtein distance 3 is greater than threshold 2'),
    ('not-levenshtein', 'sitting', None, 'kitten', False, 0.0, 'Levenshtein distance 3 is less than or equal to threshold 5'),
    ('not-levenshtein', 'sitting', 2, 'kitten', True, 1.0, 'Assertion passed'),
    ('levenshtein', 'kitten', 0, 'kitten', True, 1.0, 'Assertion passed'),
    ('levenshtein', 'cat', 2, '😀 cat', False, 0.0, 'Levenshtein distance 3 is greater than threshold 2'),
    ('levenshtein', '', 4, 'abcd', True, 1.0, 'Assertion passed'),
    ('levenshtein', 'Hello', 0.5, 'hello', False, 0.0, 'Levenshtein distance 1 is greater than threshold 0.5'),
    ('rouge-n', 'the cat sat on the mat', None, 'the cat sat on the mat', True, 1.0, 'ROUGE-N score 1.00 is greater than or equal to threshold 0.75'),
    ('rouge-n', 'the cat sat on the mat', None, 'The cat sat on the mat.', True, 0.923076923076923, 'ROUGE-N score 0.92 is greater than or equal to threshold 0.75'),
    ('rouge-n', 'the cat sat on the mat', 0.95, 'The cat sat on the mat.', False, 0.923076923076923, 'ROUGE-N score 0.92 is less than threshold 0.95'),
    ('not-rouge-n', 'the cat sat on the mat', None, 'The cat sat on the mat.', False, 0.07692307692307698, 'ROUGE-N score 0.92 is greater than or equal to threshold 0.75'),
    ('not-rouge-n', 'a dog ran', 0.5, 'The cat sat on the mat.', True, 1.0, 'ROUGE-N score 0.00 is less than threshold 0.5'),
    ('rouge-n', 'I cannot do it', 0.5, "I can't do it", True, 0.6, 'ROUGE-N score 0.60 is greater than or equal to threshold 0.5'),
    ('rouge-n', 'he said "hi" (twice)', 0.5, 'He said "hi", twice!', True, 0.75, 'ROUGE-N score 0.75 is greater than or equal to threshold 0.5'),
    ('rouge-n', 'anything', 0, '   ', True, 0.0, 'ROUGE-N score 0.00 is greater than or equal to threshold 0'),
    ('bleu', 'the cat sat on the mat', None, 'the cat sat on the mat', True, 1.0, 'Assertion passed'),
    ('bleu', 'the cat is on the mat', None, 'the cat sat on the mat', False, 0.010573712634405643, 'BLEU score 0.0106 is less than threshold 0.5'),
    ('bleu', ['a dog on a log', 'the cat was on the mat'], None, 'the cat sat on the mat', False, 0.010573712634405643, 'BLEU score 0.0106 is less than threshold 0.5'),
    ('bleu', 'the cat sat on the mat', 0.1, 'The cat', True, 0.1353352832366127, 'Assertion passed'),
    ('bleu', 'the cat sat on the mat', None, '   ', False, 0.0, 'BLEU score 0.0000 is less than threshold 0.5'),
    ('not-bleu', 'the cat sat on the mat', 0.9, 'the cat sat on the mat', False, 0.0, 'BLEU score 1.0000 is greater than threshold 0.9'),
    ('not-bleu', 'nothing in common', 0.5, 'the cat sat on the mat', True, 0.9999999, 'Assertion passed'),
    ('bleu', 'THE CAT', None, 'the cat', True, 1.0, 'Assertion passed'),
    ('gleu', 'hello world', None, 'Hello world.', True, 1.0, 'Assertion passed'),
    ('gleu', 'hello there world', 0.4, 'Hello world.', False, 0.3333333333333333, 'GLEU score 0.3333 is less than threshold 0.4'),
    ('gleu', ['goodbye', 'hello big world'], None, 'Hello world.', False, 0.3333333333333333, 'GLEU score 0.3333 is less than threshold 0.5'),
    ('not-gleu', 'hello world', None, 'Hello world.', False, 0.0, 'GLEU score 1.0000 is greater than threshold 0.5'),
    ('not-gleu', 'nothing alike', 0.2, 'Hello world.', True, 1.0, 'Assertion passed'),
    ('gleu', 'the cat', 0.3, 'the the the the cat', False, 0.21428571428571427, 'GLEU score 0.2143 is less than threshold 0.3'),
    ('gleu', 'a', None, 'a b', False, 0.3333333333333333, 'GLEU score 0.3333 is less than threshold 0.5'),
    ('meteor', 'the cat sat on the mat', None, 'the cat sat on the mat', True, 0.9976851851851852, 'METEOR assertion passed'),
    ('meteor', 'the cat sat on the mat', None, 'the cats are sitting on a mat', False, 0.3278688524590164, 'METEOR score 0.3279 did not meet threshold 0.5'),
    ('meteor', 'the cat sat on the mat', 0.3, 'on the mat the cat sat', True, 0.7106481481481481, 'METEOR assertion passed'),
    ('not-meteor', 'the cat sat on the mat', None, 'the cat sat on the mat', False, 0.0023148148148147696, 'METEOR score 0.9977 did not meet threshold 0.5'),
    ('not-meteor', 'completely unrelated', None, 'the cat sat on the mat', True, 1.0, 'METEOR assertion passed'),
    ('meteor', ['a dog barked', 'The connection was running.'], None, 'the connected runs', True, 0.6552706552706553, 'METEOR assertion passed'),
    ('meteor', 'generalization of relational agreements', 0.5, 'generalize relate agreed', False, 0.25641025641025644, 'METEOR score 0.2564 did not meet threshold 0.5'),
    ('meteor', 'It is a guide to action which ensures that the military always obeys the commands of the party', None, 'It is a guide to action that ensures that the military will forever heed Party commands', True, 0.6320224719101123, 'METEOR assertion passed'),
    ('word-count', 4, None, 'one two  three\nfour', True, 1.0, 'Assertion passed'),
    ('word-count', '4', None, 'one two three four', True, 1.0, 'Assertion passed'),
    ('word-count', 5, None, 'one two three four', False, 0.0, 'Word count 4 does not equal expected 5'),
    ('word-count', {'min': 2, 'max': 5}, None, 'one two three four', True, 1.0, 'Assertion passed'),
    ('word-count', {'min': 5}, None, 'one two three four', False, 0.0, 'Word count 4 is less than minimum 5'),
    ('word-count', {'max': 3}, None, 'one two three four', False, 0.0, 'Word count 4 is greater than maximum 3'),
    ('word-count', {'min': 5, 'max': 9}, None, 'one two three four', False, 0.0, 'Word count 4 is not between 5 and 9'),
    ('not-word-count', 4, None, 'one two three four', False, 0.0, 'Expected word count to not equal 4, but got 4'),
    ('not-word-count', {'min': 2, 'max': 5}, None, 'one two three four', False, 0.0, 'Expected word count to not be between 2 and 5, but got 4'),
    ('not-word-count', {'min': 1}, None, 'one two three four', False, 0.0, 'Expected word count to be less than 1, but got 4'),
    ('not-word-count', {'max': 10}, None, 'one two three four', False, 0.0, 'Expected word count to be greater than 10, but got 4'),
    ('word-count', 0, None, ' \t\n ', True, 1.0, 'Assertion passed'),
    ('word-count', '', None, '', True, 1.0, 'Assertion passed'),
    ('word-count', '0x3', None, 'a b c', True, 1.0, 'Assertion passed'),
]


@pytest.mark.parametrize("type_,value,threshold,output,passed,score,reason", ROWS)
def test_scores_like_promptfoo(type_, value, threshold, output, passed, score, reason):
    r = grade(type_, value, threshold, output)
    assert r.passed is passed
    assert r.score == pytest.approx(score, abs=1e-12)
    assert reason in r.reason


# (type, value, output) -> the message of promptfoo's invariant or thrown error: the row is an ERROR
ERRORS = [
    ("levenshtein", 123, "123", '"levenshtein" assertion type must have a string value'),
    ("rouge-n", ["a"], "a", '"rouge" assertion type must be a string value'),
    ("bleu", {"a": 1}, "a", '"bleu" assertion type must have a string or array of strings value'),
    ("bleu", [], "a", "Invalid inputs"),
    ("gleu", "a", "", "Invalid inputs"),
    ("gleu", [1, 2], "a", '"gleu" assertion must have a string or array of strings value'),
    ("meteor", "a", "", "Invalid inputs"),
    ("meteor", [1], "a", '"meteor" assertion must have a string or array of strings value'),
    ("word-count", [1], "a", '"word-count" assertion value must be a number or an object with min/max'),
    ("word-count", True, "a", '"word-count" assertion value must be a number or an object with min/max'),
    ("word-count", "abc", "a", '"word-count" assertion value must be a number or an object with min/max'),
    ("word-count", {}, "a", '"word-count" assertion object must have "min" and/or "max" properties'),
    ("word-count", {"min": 5, "max": 2}, "a", '"word-count" assertion: min (5) must be less than or equal to max (2)'),
    # JavaScript compares two strings as text: "9" <= "10" is false
    ("word-count", {"min": "9", "max": "10"}, "a", "min (9) must be less than or equal to max (10)"),
]


@pytest.mark.parametrize("type_,value,output,message", ERRORS)
def test_invalid_input_makes_an_error(type_, value, output, message):
    with pytest.raises(AssertionError_, match=re.escape(message)):
        grade(type_, value, None, output)


def test_rouge_limit_counts_characters_like_js_rouge():
    r = grade("rouge-n", "b", None, "a" * 999_999 + " b")  # exactly at the limit: still scored
    assert r.score == pytest.approx(2 / 3)
    with pytest.raises(AssertionError_, match="N-gram generation exceeds the materialization limit"):
        grade("rouge-n", "b", None, "a" * 1_000_000 + " b")
    with pytest.raises(AssertionError_, match="N-gram generation exceeds the materialization limit"):
        grade("rouge-n", "a" * 1_000_000 + " b", None, "b")


def test_word_count_value_forms_follow_javascript_numbers():
    assert grade("word-count", {"min": 9, "max": "10"}, None, "a b c d e f g h i j").passed
    assert grade("word-count", {"min": None}, None, "a b c").passed  # null compares as 0
    assert grade("word-count", " 3 ", None, "a b c").passed
    r = grade("word-count", "1e0", None, "a b c")
    assert (r.passed, r.reason) == (False, "Word count 3 does not equal expected 1")


def test_meteor_parameters_come_from_the_assertion():
    r = grade("meteor", "the cat sat on the mat", None, "the cats are sitting on a mat",
              alpha=0.5, beta=2, gamma=0.3)
    assert (r.passed, r.reason) == (False, "METEOR score 0.4308 did not meet threshold 0.5")
    assert r.score == pytest.approx(0.4307692307692307, abs=1e-12)
    r = grade("not-meteor", "the cat sat on the mat", 0.4, "on the mat the cat sat", alpha=0.8, gamma=0.9)
    assert (r.passed, r.reason) == (False, "METEOR score 0.4792 did not meet threshold 0.4")
    assert r.score == pytest.approx(0.5208333333333334, abs=1e-12)
    r = grade("meteor", "leading space  ", None, "  leading space")  # split keeps empty edge tokens
    assert r.score == pytest.approx(0.8518518518518519, abs=1e-12)


def test_meteor_has_no_wordnet_synonyms():
    # promptfoo's algorithm with WordNet counts fast/quick as a match and scores 0.9814814814814815
    r = grade("meteor", "a quick car", None, "a fast car")
    assert r.score == pytest.approx(1 / 3, abs=1e-12)
    assert not r.passed


# natural 8.1.1's PorterStemmer, which promptfoo's meteor uses (neither nltk variant matches it)
STEMS = [("running", "run"), ("relational", "relat"), ("byeful", "bye"), ("generalization", "gener"),
         ("caresses", "caress"), ("ponies", "poni"), ("agreed", "agre"), ("hopping", "hop"),
         ("filing", "file"), ("happy", "happi"), ("sky", "sky"), ("conditional", "condit"),
         ("electricity", "electr"), ("adjustment", "adjust"), ("probate", "probat"), ("controll", "control"),
         ("roll", "roll"), ("cryonics", "cryon"), ("flyover", "flyov"), ("abbey", "abbei"), ("ageing", "ag"),
         ("additionally", "addition"), ("was", "wa"), ("ties", "ti"), ("feed", "feed"), ("bled", "bled")]


@pytest.mark.parametrize("word,stem", STEMS)
def test_porter_stem_is_naturals(word, stem):
    assert porter_stem(word) == stem


def test_treebank_tokenizer():
    assert treebank_tokenize('He said "hi" (twice), I can\'t -- it\'s 10:30; cost $5...') == [
        "He", "said", "``", "hi", "\'\'", "(", "twice", ")", ",", "I", "ca", "n\'t", "--", "it", "\'s", "10:30",
        ";", "cost", "$", "5", "..."]
    assert treebank_tokenize(" \t ") == []
    assert treebank_tokenize("gonna cannot") == ["gon", "na", "can", "not"]


# String(x), x.toPrecision(2), x.toFixed(2) and x.toFixed(4), as node prints them
@pytest.mark.parametrize("x,text", [(5, "5"), (0.5, "0.5"), (1e-7, "1e-7"), (1e-6, "0.000001"),
                                    (0.00005, "0.00005"), (123456789012345680000, "123456789012345680000"),
                                    (1e21, "1e+21"), (0.1 + 0.2, "0.30000000000000004"), (-3.5, "-3.5"),
                                    (100.0, "100"), (2.5e-8, "2.5e-8"), (1234.5, "1234.5")])
def test_js_number(x, text):
    assert js_number(x) == text


@pytest.mark.parametrize("x,text", [(0.0123, "0.012"), (123, "1.2e+2"), (0, "0.0"), (1.5, "1.5"),
                                    (0.000001234, "0.0000012"), (0.05, "0.050"), (1e-7, "1.0e-7"),
                                    (99.5, "1.0e+2"), (0.995, "0.99"), (0.125, "0.13"), (-0.0456, "-0.046"),
                                    (12345678, "1.2e+7")])
def test_js_to_precision(x, text):
    assert js_to_precision(x, 2) == text


@pytest.mark.parametrize("x,two,four", [(0.125, "0.13", "0.1250"), (0.375, "0.38", "0.3750"),
                                        (1.005, "1.00", "1.0050"), (2.5, "2.50", "2.5000"),
                                        (0.923076923076923, "0.92", "0.9231"), (0.00004999, "0.00", "0.0000")])
def test_js_to_fixed(x, two, four):
    assert (js_to_fixed(x, 2), js_to_fixed(x, 4)) == (two, four)


# ------------------------------------------------------------------ parity with `promptfoo eval`


def parity_differences(ours: dict, golden: dict) -> list[str]:
    """parity_compare.differences() on the rows that were scored, and on every column's metrics.

    promptfoo drops an ERROR row's response and gradingResult, while factcli keeps them and puts the
    error in the reason, so ERROR rows are compared on their outcome and on the error message instead.
    """

    def split(doc):
        rows = doc["results"]["results"]
        errors = {row_key(r): r for r in rows if r["failureReason"] == 2}
        scored = dict(doc, results=dict(doc["results"], results=[r for r in rows if r["failureReason"] != 2]))
        return scored, errors

    a, a_errors = split(ours)
    b, b_errors = split(golden)
    diffs = differences(a, b)
    if set(a_errors) != set(b_errors):
        diffs.append(f"ERROR rows differ: ours {sorted(a_errors)}, golden {sorted(b_errors)}")
    for key in sorted(set(a_errors) & set(b_errors)):
        ra, rb = a_errors[key], b_errors[key]
        if (ra["success"], ra["score"], ra["namedScores"]) != (rb["success"], rb["score"], rb["namedScores"]):
            diffs.append(f"ERROR row {key}: outcome differs")
        message = rb["error"].splitlines()[0].removeprefix("Error: ").removeprefix("Invariant failed: ")
        if message not in ra["error"]:
            diffs.append(f"ERROR row {key}: ours {ra['error']!r}, promptfoo {message!r}")
    sa, sb = ours["results"]["stats"], golden["results"]["stats"]
    if (sa["successes"], sa["failures"], sa["errors"]) != (sb["successes"], sb["failures"], sb["errors"]):
        diffs.append(f"stats differ: ours {sa}, golden {sb}")
    return diffs


def run_parity(config: Path, golden: Path, tmp_path: Path) -> list[str]:
    out = tmp_path / "ours.json"
    result = CliRunner().invoke(app, ["eval", "-c", str(config), "-o", str(out), "--no-table", "--no-progress-bar"])
    assert result.exit_code == 100, result.output  # some rows fail, as in promptfoo
    return parity_differences(json.loads(out.read_text()), json.loads(golden.read_text()))


def test_parity_with_promptfoo(tmp_path):
    assert run_parity(PARITY / "promptfooconfig.yaml", PARITY / "golden.json", tmp_path) == []


def test_parity_compare_sees_a_changed_score(tmp_path):
    golden = json.loads((PARITY / "golden.json").read_text())
    changed = json.loads((PARITY / "golden.json").read_text())
    changed["results"]["results"][2]["gradingResult"]["componentResults"][0]["score"] += 1e-9
    assert len(parity_differences(changed, golden)) == 1
