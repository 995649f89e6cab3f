"""Assertion types, one module per family: text, structured (JSON), html_output, xml_output, sql_output,
function_calls, similarity, operational, graded, rag, scripts, and compare (select-best, max-score
across a test's columns). A family registers its types with `factcli.scoring.registry` when it is
imported; the registry imports a family by name the first time a config uses one of its types.
Shared helpers: js_semantics (JavaScript values as promptfoo sees them), json_schema (+ formats)
and the graders' prompts (prompts, rag_prompts)."""
