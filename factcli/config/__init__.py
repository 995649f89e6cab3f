"""Loading a config: read, merge, validate and expand (prompts × providers × tests) promptfoo configs,
test files (CSV, JSON, JSONL, YAML), `--model-outputs` suites and calibrate's label files."""
