"""The application's tests: model-graded checks through factcli's pytest plugin. The judge's
answers are cached under .pytest_cache/d/factcli, so a second run pays for none of them."""

from app import answer


def test_capital_is_right(factcli_grader):
    factcli_grader.assert_rubric(answer("What is the capital of France?"), 'Names "Paris" as the capital')


def test_eiffel_tower_year(factcli_grader):  # fails: the app says 1887
    factcli_grader.assert_rubric(answer("When was the Eiffel Tower completed?"), 'Gives the year "1889"')
