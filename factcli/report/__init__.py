"""Showing results: `view`, `show` and `diff` from the store, the summary and table after an eval,
the results document (promptfoo's JSON layout) and the other export formats, the calibration table."""
