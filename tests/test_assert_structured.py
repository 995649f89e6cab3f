"""Structured-output assertions score as promptfoo 0.121.20 scores them.

Every row of ROWS was run through promptfoo 0.121.20 itself (its `assertions.runAssertion`, with
the same output, value and provider) and its pass, score and reason copied here. Where the
libraries cannot agree on wording (expat's vs saxes' XML errors, sqlglot's vs node-sql-parser's
parse errors) the expected reason is the common prefix. ("ERROR", text) rows are promptfoo
assertions that throw, which turns the row into an ERROR; the text is promptfoo's message.
"""

import asyncio
import json
import re
from pathlib import Path

import pytest
from typer.testing import CliRunner

from factcli.scoring.scorer import run_assertion
from factcli.assertions.html_output import contains_html_text
from factcli.assertions.json_schema import compile_schema, errors_text
from factcli.assertions.sql_output import extract_sql_blocks
from factcli.assertions.structured import extract_json_objects
from factcli.assertions.xml_output import extract_xml_candidates, xml_tree
from factcli.cli import app
from factcli.providers.registry import create_provider
from factcli.types import Assertion, ProviderResponse, ProviderSpec, TestCase
from parity_compare import differences

PARITY = Path(__file__).parent / "parity" / "structured"


def run(type_, value, output, provider=None, variables=None):
    prov = None
    if provider is not None:
        prov = create_provider(ProviderSpec(id=provider["id"], config=provider.get("config") or {}))
    variables = variables or {}
    return asyncio.run(run_assertion(
        Assertion(type=type_, value=value), output=output, test=TestCase(vars=variables), variables=variables,
        prompt="p", response=ProviderResponse(output=output), provider=prov))


ROWS = [
    ('is-json', None, '{"a":1}', None, (True, 1.0, 'Assertion passed')),
    ('is-json', None, 'not json', None, (False, 0.0, 'Expected output to be valid JSON')),
    ('not-is-json', None, 'not json', None, (True, 1.0, 'Assertion passed')),
    ('not-is-json', None, '{"a":1}', None, (False, 0.0, 'Expected output to be valid JSON')),
    ('is-json', None, 'NaN', None, (False, 0.0, 'Expected output to be valid JSON')),
    ('is-json', None, '1', None, (True, 1.0, 'Assertion passed')),
    ('is-json', None, '', None, (False, 0.0, 'Expected output to be valid JSON')),
    ('is-json', {'type': 'object', 'properties': {'name': {'type': 'string'}, 'age': {'type': 'integer', 'minimum': 0}}, 'required': ['name', 'age'], 'additionalProperties': False}, '{"name":"A","age":3}', None, (True, 1.0, 'Assertion passed')),
    ('is-json', {'type': 'object', 'properties': {'name': {'type': 'string'}, 'age': {'type': 'integer', 'minimum': 0}}, 'required': ['name', 'age'], 'additionalProperties': False}, '{"name":"A"}', None, (False, 0.0, "JSON does not conform to the provided schema. Errors: data must have required property 'age'")),
    ('is-json', {'type': 'object', 'properties': {'name': {'type': 'string'}, 'age': {'type': 'integer', 'minimum': 0}}, 'required': ['name', 'age'], 'additionalProperties': False}, '{"name":"A","age":-1}', None, (False, 0.0, 'JSON does not conform to the provided schema. Errors: data/age must be >= 0')),
    ('is-json', {'type': 'object', 'properties': {'name': {'type': 'string'}, 'age': {'type': 'integer', 'minimum': 0}}, 'required': ['name', 'age'], 'additionalProperties': False}, '{"name":"A","age":1,"x":0}', None, (False, 0.0, 'JSON does not conform to the provided schema. Errors: data must NOT have additional properties')),
    ('is-json', {'type': 'object', 'properties': {'name': {'type': 'string'}, 'age': {'type': 'integer', 'minimum': 0}}, 'required': ['name', 'age'], 'additionalProperties': False}, '{"name":"A","age":1.5}', None, (False, 0.0, 'JSON does not conform to the provided schema. Errors: data/age must be integer')),
    ('is-json', {'type': 'object', 'properties': {'name': {'type': 'string'}, 'age': {'type': 'integer', 'minimum': 0}}, 'required': ['name', 'age'], 'additionalProperties': False}, '{"name":"A","age":1.0}', None, (True, 1.0, 'Assertion passed')),
    ('not-is-json', {'type': 'object', 'properties': {'name': {'type': 'string'}, 'age': {'type': 'integer', 'minimum': 0}}, 'required': ['name', 'age'], 'additionalProperties': False}, '{"name":"A","age":3}', None, (False, 0.0, 'Output is JSON that conforms to the provided schema')),
    ('not-is-json', {'type': 'object', 'properties': {'name': {'type': 'string'}, 'age': {'type': 'integer', 'minimum': 0}}, 'required': ['name', 'age'], 'additionalProperties': False}, '{"name":"A"}', None, (True, 1.0, 'Assertion passed')),
    ('is-json', {'type': 'object', 'properties': {'name': {'type': 'string'}, 'age': {'type': 'integer', 'minimum': 0}}, 'required': ['name', 'age'], 'additionalProperties': False}, 'nope', None, (False, 0.0, 'Expected output to be valid JSON')),
    ('is-json', 'type: object\nrequired: [b]', '{"a":1}', None, (False, 0.0, "JSON does not conform to the provided schema. Errors: data must have required property 'b'")),
    ('is-json', 'properties:\n  a: {enum: [yes, no]}', '{"a":"yes"}', None, (True, 1.0, 'Assertion passed')),
    ('is-json', {'properties': {'v': {'anyOf': [{'type': 'string'}, {'type': 'array', 'minItems': 2}]}}}, '{"v":5}', None, (False, 0.0, 'JSON does not conform to the provided schema. Errors: data/v must be string, data/v must be array, data/v must match a schema in anyOf')),
    ('is-json', {'properties': {'v': {'oneOf': [{'type': 'number'}, {'type': 'integer'}]}}}, '{"v":3}', None, (False, 0.0, 'JSON does not conform to the provided schema. Errors: data/v must match exactly one schema in oneOf')),
    ('is-json', {'properties': {'e': {'anyOf': [{'type': 'string', 'enum': ['a']}, {'type': 'string', 'maximum': 3}]}}}, '{"e":5}', None, (False, 0.0, 'JSON does not conform to the provided schema. Errors: data/e must be string, data/e must be equal to one of the allowed values, data/e must be string, data/e must match a schema in anyOf')),
    ('is-json', {'type': 'array', 'uniqueItems': True}, '[1,2,1]', None, (False, 0.0, 'JSON does not conform to the provided schema. Errors: data must NOT have duplicate items (items ## 0 and 2 are identical)')),
    ('is-json', {'type': 'array', 'items': {'type': 'number'}, 'uniqueItems': True}, '[1,2,1]', None, (False, 0.0, 'JSON does not conform to the provided schema. Errors: data must NOT have duplicate items (items ## 2 and 0 are identical)')),
    ('is-json', {'properties': {'e': {'format': 'email'}}}, '{"e":"bad"}', None, (False, 0.0, 'JSON does not conform to the provided schema. Errors: data/e must match format "email"')),
    ('is-json', {'properties': {'d': {'format': 'date'}}}, '{"d":"2024-02-30"}', None, (False, 0.0, 'JSON does not conform to the provided schema. Errors: data/d must match format "date"')),
    ('is-json', {'properties': {'a b': {'type': 'string'}, 'c/d': {'type': 'string'}}}, '{"a b":1,"c/d":2}', None, (False, 0.0, 'JSON does not conform to the provided schema. Errors: data/a b must be string')),
    ('is-json', {'if': {'properties': {'x': {'const': 1}}}, 'then': {'required': ['y']}}, '{"x":1}', None, (False, 0.0, "JSON does not conform to the provided schema. Errors: data must have required property 'y'")),
    ('is-json', {'dependencies': {'x': ['a', 'b']}}, '{"x":1,"y":2}', None, (False, 0.0, 'JSON does not conform to the provided schema. Errors: data must have properties a, b when property x is present')),
    ('is-json', {'propertyNames': {'pattern': '^[a-z]+$'}}, '{"ab":1,"Xc":2}', None, (False, 0.0, 'JSON does not conform to the provided schema. Errors: data must match pattern "^[a-z]+$", data property name must be valid')),
    ('is-json', {'$ref': '#/definitions/x', 'definitions': {'x': {'type': 'object', 'required': ['q']}}}, '{"a":1}', None, (False, 0.0, "JSON does not conform to the provided schema. Errors: data must have required property 'q'")),
    ('is-json', {'items': [{'type': 'number'}], 'additionalItems': False}, '[1,2,3]', None, (False, 0.0, 'JSON does not conform to the provided schema. Errors: data must NOT have more than 1 items')),
    ('is-json', {'contains': {'type': 'string'}}, '[1,2,3]', None, (False, 0.0, 'JSON does not conform to the provided schema. Errors: data must contain at least 1 valid item(s)')),
    ('is-json', {'properties': {'n': {'type': 'string', 'nullable': True}}}, '{"n":null}', None, (True, 1.0, 'Assertion passed')),
    ('is-json', {'properties': {'s': {'pattern': '^(?<y>\\d{4})$'}}}, '{"s":"12"}', None, (False, 0.0, 'JSON does not conform to the provided schema. Errors: data/s must match pattern "^(?<y>\\d{4})$"')),
    ('is-json', {}, '{"a":1}', None, (True, 1.0, 'Assertion passed')),
    ('is-json', {'properties': {'a': False}}, '{"a":{}}', None, (False, 0.0, 'JSON does not conform to the provided schema. Errors: data/a boolean schema is false')),
    ('is-json', {'example': 1}, '{"a":1}', None, ('ERROR', 'strict mode: unknown keyword: "example"')),
    ('is-json', {'type': 'strng'}, '{"a":1}', None, ('ERROR', 'schema is invalid: data/type must be equal to one of the allowed values, data/type must be array, data/type must match a schema in anyOf')),
    ('is-json', 5, '{"a":1}', None, ('ERROR', 'is-json assertion must have a string or object value')),
    ('is-json', [1], '{"a":1}', None, ('ERROR', 'schema is invalid: data must be object,boolean')),
    ('is-json', {'properties': {'e': {'format': 'foo'}}}, '{"a":1}', None, ('ERROR', 'unknown format "foo" ignored in schema at path "#/properties/e"')),
    ('is-json', '{"$schema": "https://json-schema.org/draft/2020-12/schema"}', '{"a":1}', None, ('ERROR', 'no schema with key or ref "https://json-schema.org/draft/2020-12/schema"')),
    ('is-json', {'then': {'type': 'string'}}, '{"a":1}', None, ('ERROR', 'strict mode: "then" without "if" is ignored')),
    ('is-json', {'example': 1}, 'not json', None, (False, 0.0, 'Expected output to be valid JSON')),
    ('contains-json', None, 'Here is {"a": 1} and {"b": 2}', None, (True, 1.0, 'Assertion passed')),
    ('contains-json', None, 'no json here', None, (False, 0.0, 'Expected output to contain valid JSON')),
    ('contains-json', None, '{x}', None, (True, 1.0, 'Assertion passed')),
    ('contains-json', None, '{"a": "}"}', None, (False, 0.0, 'Expected output to contain valid JSON')),
    ('contains-json', None, '{"a": 1', None, (True, 1.0, 'Assertion passed')),
    ('contains-json', None, '{name: John, age: 30}', None, (True, 1.0, 'Assertion passed')),
    ('contains-json', None, "{'a': 'b'}", None, (True, 1.0, 'Assertion passed')),
    ('contains-json', None, '{"a": 1,}', None, (True, 1.0, 'Assertion passed')),
    ('contains-json', None, '{\n "a": 1, // c\n "b": "http://x.com"\n}', None, (True, 1.0, 'Assertion passed')),
    ('contains-json', None, '[1,2,3]', None, (False, 0.0, 'Expected output to contain valid JSON')),
    ('contains-json', None, '```json\n{"answer": 42}\n```', None, (True, 1.0, 'Assertion passed')),
    ('contains-json', None, '{"a": NaN}', None, (True, 1.0, 'Assertion passed')),
    ('not-contains-json', None, 'x {"a":1}', None, (False, 0.0, 'Expected output to contain valid JSON')),
    ('not-contains-json', None, 'none', None, (True, 1.0, 'Assertion passed')),
    ('contains-json', {'type': 'object', 'properties': {'name': {'type': 'string'}, 'age': {'type': 'integer', 'minimum': 0}}, 'required': ['name', 'age'], 'additionalProperties': False}, '{"name":"B","age":3} and {"name":"C"}', None, (True, 1.0, 'Assertion passed')),
    ('not-contains-json', {'type': 'object', 'properties': {'name': {'type': 'string'}, 'age': {'type': 'integer', 'minimum': 0}}, 'required': ['name', 'age'], 'additionalProperties': False}, '{"name":"B","age":3} and {"name":"C"}', None, (False, 0.0, 'Output contains JSON conforming to the provided schema')),
    ('contains-json', {'type': 'object', 'properties': {'name': {'type': 'string'}, 'age': {'type': 'integer', 'minimum': 0}}, 'required': ['name', 'age'], 'additionalProperties': False}, '{"name":1} then {"age":"x"}', None, (False, 0.0, "JSON does not conform to the provided schema. Errors: data must have required property 'name'")),
    ('not-contains-json', {'type': 'object', 'properties': {'name': {'type': 'string'}, 'age': {'type': 'integer', 'minimum': 0}}, 'required': ['name', 'age'], 'additionalProperties': False}, '{"name":1} then {"age":"x"}', None, (True, 1.0, 'Assertion passed')),
    ('contains-json', {'type': 'object', 'properties': {'name': {'type': 'string'}, 'age': {'type': 'integer', 'minimum': 0}}, 'required': ['name', 'age'], 'additionalProperties': False}, 'nothing', None, (False, 0.0, 'Expected output to contain valid JSON')),
    ('not-contains-json', {'type': 'object', 'properties': {'name': {'type': 'string'}, 'age': {'type': 'integer', 'minimum': 0}}, 'required': ['name', 'age'], 'additionalProperties': False}, 'nothing', None, (True, 1.0, 'Assertion passed')),
    ('contains-json', {'properties': {'a': {'type': 'string'}, 'b': {'const': 12}, 'c': {'type': 'integer'}}}, '{"a": yes, "b": 012, "c": 1e5}', None, (True, 1.0, 'Assertion passed')),
    ('contains-json', True, '{"a":1}', None, ('ERROR', 'contains-json assertion must have a string or object value')),
    ('contains-json', True, 'none', None, (False, 0.0, 'Expected output to contain valid JSON')),
    ('is-html', None, '<p>Hello</p>', None, (True, 1.0, 'Assertion passed')),
    ('is-html', None, 'Hello <b>world</b>', None, (False, 0.0, 'Output must be wrapped in HTML tags')),
    ('is-html', None, '<html></html>', None, (True, 1.0, 'Assertion passed')),
    ('is-html', None, '<body>text</body>', None, (True, 1.0, 'Assertion passed')),
    ('is-html', None, 'just text', None, (False, 0.0, 'Output must be wrapped in HTML tags')),
    ('is-html', None, '   ', None, (False, 0.0, 'Output is empty')),
    ('is-html', None, "<?xml version='1.0'?><a/>", None, (False, 0.0, 'Output appears to be XML, not HTML')),
    ('is-html', None, '<foo>bar</foo>', None, (False, 0.0, 'Output does not contain recognized HTML elements')),
    ('is-html', None, '<my-widget>x</my-widget>', None, (True, 1.0, 'Assertion passed')),
    ('is-html', None, '<table>hello</table>', None, (False, 0.0, 'Output must be wrapped in HTML tags')),
    ('is-html', None, '<head>hi</head>', None, (False, 0.0, 'Output must be wrapped in HTML tags')),
    ('is-html', None, '<!-- <body> --> text', None, (False, 0.0, 'Output must be wrapped in HTML tags')),
    ('is-html', None, '<title>x</title>', None, (True, 1.0, 'Assertion passed')),
    ('is-html', None, '<!DOCTYPE html><html><head><title>t</title></head><body><p>x</p></body></html>', None, (True, 1.0, 'Assertion passed')),
    ('is-html', None, '<svg><circle/></svg>', None, (True, 1.0, 'Assertion passed')),
    ('is-html', None, 'text<body>more</body>', None, (False, 0.0, 'Output must be wrapped in HTML tags')),
    ('is-html', None, '<noscript>x</noscript>', None, (True, 1.0, 'Assertion passed')),
    ('is-html', None, '<html><body><p>x</p></body></html> trailing', None, (True, 1.0, 'Assertion passed')),
    ('contains-html', None, '<p>Hello</p>', None, (True, 1.0, 'Assertion passed')),
    ('contains-html', None, 'just text', None, (False, 0.0, 'Expected output to contain HTML content')),
    ('contains-html', None, 'a < b and c > d', None, (False, 0.0, 'Expected output to contain HTML content')),
    ('contains-html', None, '<div class="x">', None, (True, 1.0, 'Assertion passed')),
    ('contains-html', None, 'x &amp; y &lt; z', None, (False, 0.0, 'Expected output to contain HTML content')),
    ('contains-html', None, '<!DOCTYPE html>', None, (True, 1.0, 'Assertion passed')),
    ('contains-html', None, "<img src='a.png'/>", None, (True, 1.0, 'Assertion passed')),
    ('contains-html', None, '</div>', None, (False, 0.0, 'Expected output to contain HTML content')),
    ('contains-html', None, '<pé>x', None, (True, 1.0, 'Assertion passed')),
    ('not-is-html', None, '<p>x</p>', None, (False, 0.0, 'Output is valid HTML')),
    ('not-is-html', None, 'text', None, (True, 1.0, 'Assertion passed')),
    ('not-contains-html', None, '<p>x</p>', None, (False, 0.0, 'Expected output to not contain HTML content')),
    ('not-contains-html', None, 'text', None, (True, 1.0, 'Assertion passed')),
    ('is-xml', None, '<?xml version="1.0"?><config><item id="1">a</item><item id="2">b</item></config>', None, (True, 1.0, 'Assertion passed')),
    ('is-xml', 'config.item.1', '<?xml version="1.0"?><config><item id="1">a</item><item id="2">b</item></config>', None, (True, 1.0, 'Assertion passed')),
    ('is-xml', 'config.item.name', '<?xml version="1.0"?><config><item id="1">a</item><item id="2">b</item></config>', None, (False, 0.0, 'XML is missing required elements: config.item.name')),
    ('is-xml', {'requiredElements': ['config.item.0.@_id', '?xml', 'config.x']}, '<?xml version="1.0"?><config><item id="1">a</item><item id="2">b</item></config>', None, (False, 0.0, 'XML is missing required elements: config.x')),
    ('is-xml', ['config.item'], '<?xml version="1.0"?><config><item id="1">a</item><item id="2">b</item></config>', None, (True, 1.0, 'Assertion passed')),
    ('is-xml', 'config.toString', '<?xml version="1.0"?><config><item id="1">a</item><item id="2">b</item></config>', None, (True, 1.0, 'Assertion passed')),
    ('is-xml', {'x': 1}, '<a/>', None, ('ERROR', 'xml assertion must contain a string, array value, or no value')),
    ('is-xml', 5, '<a/>', None, (True, 1.0, 'Assertion passed')),
    ('is-xml', {}, '<a/>', None, (True, 1.0, 'Assertion passed')),
    ('not-is-xml', None, '<?xml version="1.0"?><config><item id="1">a</item><item id="2">b</item></config>', None, (False, 0.0, 'XML is valid and contains all required elements')),
    ('not-is-xml', None, 'nope', None, (True, 1.0, 'Assertion passed')),
    ('is-xml', None, "<!DOCTYPE a [<!ENTITY x 'y'>]><a>&x;</a>", None, (False, 0.0, 'DTD internal subsets are not supported by is-xml validation')),
    ('is-xml', None, '<!DOCTYPE><a/>', None, (False, 0.0, 'XML parsing failed: Malformed DOCTYPE declaration')),
    ('is-xml', None, '<!DOCTYPE a SYSTEM "a.dtd"><a>&nbsp;</a>', None, (True, 1.0, 'Assertion passed')),
    ('is-xml', None, "<x:a xmlns:x='u'>t</x:a>", None, (True, 1.0, 'Assertion passed')),
    ('is-xml', None, '<root><child>x</child>', None, (False, 0.0, 'XML parsing failed: ')),
    ('is-xml', None, 'not xml', None, (False, 0.0, 'XML parsing failed: ')),
    ('is-xml', None, '', None, (False, 0.0, 'XML parsing failed: ')),
    ('is-xml', None, '<a/>x', None, (False, 0.0, 'XML parsing failed: ')),
    ('is-xml', None, '<x:a>t</x:a>', None, (False, 0.0, 'XML parsing failed: ')),
    ('is-xml', None, '<a>&nbsp;</a>', None, (False, 0.0, 'XML parsing failed: ')),
    ('contains-xml', None, 'Here: <root><child>1</child></root> done', None, (True, 1.0, 'Assertion passed')),
    ('contains-xml', 'root.child', 'Here: <root><child>1</child></root> done', None, (True, 1.0, 'Assertion passed')),
    ('not-contains-xml', None, 'Here: <root><child>1</child></root> done', None, (False, 0.0, 'XML is valid and contains all required elements')),
    ('contains-xml', None, 'Text <a>1</a> and <b>2</b>', None, (True, 1.0, 'Assertion passed')),
    ('contains-xml', 'root.child', 'Text <a>1</a> and <b>2</b>', None, (False, 0.0, 'No valid XML content found matching the requirements')),
    ('not-contains-xml', None, 'Text <a>1</a> and <b>2</b>', None, (False, 0.0, 'XML is valid and contains all required elements')),
    ('contains-xml', None, '<a><b></a>', None, (False, 0.0, 'No XML content found in the output')),
    ('contains-xml', 'root.child', '<a><b></a>', None, (False, 0.0, 'No XML content found in the output')),
    ('not-contains-xml', None, '<a><b></a>', None, (True, 1.0, 'Assertion passed')),
    ('contains-xml', None, 'no xml', None, (False, 0.0, 'No XML content found in the output')),
    ('contains-xml', 'root.child', 'no xml', None, (False, 0.0, 'No XML content found in the output')),
    ('not-contains-xml', None, 'no xml', None, (True, 1.0, 'Assertion passed')),
    ('contains-xml', None, '<p>x < 5</p>', None, (True, 1.0, 'Assertion passed')),
    ('contains-xml', 'root.child', '<p>x < 5</p>', None, (False, 0.0, 'No valid XML content found matching the requirements')),
    ('not-contains-xml', None, '<p>x < 5</p>', None, (False, 0.0, 'XML is valid and contains all required elements')),
    ('contains-xml', 'a, b', 'Text <a>1</a> and <b>2</b>', None, (True, 1.0, 'Assertion passed')),
    ('contains-xml', {'requiredElements': ['r.i.1']}, '<r><i>1</i><i>2</i></r>', None, (True, 1.0, 'Assertion passed')),
    ('is-sql', None, 'SELECT id, name FROM users WHERE id = 1', None, (True, 1.0, 'Assertion passed')),
    ('is-sql', None, 'SELECT name age FROM users', None, (False, 0.0, 'SQL statement does not conform to the provided MySQL database syntax.')),
    ('is-sql', None, 'SELECT * FROM', None, (False, 0.0, 'SQL statement does not conform to the provided MySQL database syntax.')),
    ('is-sql', None, 'hello world', None, (False, 0.0, 'SQL statement does not conform to the provided MySQL database syntax.')),
    ('is-sql', None, '', None, (False, 0.0, 'SQL statement does not conform to the provided MySQL database syntax.')),
    ('is-sql', None, 'SELECT `a FROM t', None, (False, 0.0, 'SQL statement does not conform to the provided MySQL database syntax. SQL statement does not conform to the provided MySQL database syntax.')),
    ('is-sql', None, 'SELECT * FROM generate_series(1,5)', None, (False, 0.0, 'SQL statement does not conform to the provided MySQL database syntax. SQL statement does not conform to the provided MySQL database syntax.')),
    ('is-sql', None, 'INSERT INTO t (a,b) VALUES (1,2)', None, (True, 1.0, 'Assertion passed')),
    ('is-sql', None, "UPDATE users SET name='x' WHERE id = 2", None, (True, 1.0, 'Assertion passed')),
    ('is-sql', None, 'DELETE FROM t WHERE a=1', None, (True, 1.0, 'Assertion passed')),
    ('is-sql', None, 'CREATE TABLE t (id INT, name VARCHAR(20))', None, (True, 1.0, 'Assertion passed')),
    ('is-sql', None, 'DROP TABLE t', None, (True, 1.0, 'Assertion passed')),
    ('is-sql', None, 'SELECT DISTINCT name FROM users', None, (True, 1.0, 'Assertion passed')),
    ('is-sql', None, "SELECT * FROM t WHERE name = 'select a b from'", None, (True, 1.0, 'Assertion passed')),
    ('is-sql', None, 'SELECT', None, (False, 0.0, 'SQL statement does not conform to the provided MySQL database syntax.')),
    ('is-sql', None, 'FROM t', None, (False, 0.0, 'SQL statement does not conform to the provided MySQL database syntax.')),
    ('is-sql', None, 'SELECT a,, b FROM t', None, (False, 0.0, 'SQL statement does not conform to the provided MySQL database syntax.')),
    ('is-sql', None, 'WITH x AS (SELECT 1 AS a) SELECT a FROM x', None, (True, 1.0, 'Assertion passed')),
    ('not-is-sql', None, 'SELECT 1', None, (False, 0.0, 'The output SQL statement is valid')),
    ('not-is-sql', None, 'nope', None, (True, 1.0, 'Assertion passed')),
    ('is-sql', {'databaseType': 'PostgresQL'}, 'SELECT * FROM t', None, (True, 1.0, 'Assertion passed')),
    ('is-sql', {'databaseType': 'Foo'}, 'SELECT * FROM t', None, (False, 0.0, 'SQL statement does not conform to the provided Foo database syntax.')),
    ('is-sql', 'x', 'SELECT 1', None, ('ERROR', 'is-sql assertion must have a object value.')),
    ('is-sql', {'allowedTables': ['(select|update)::null::users']}, "UPDATE users SET name='x' WHERE id IN (SELECT uid FROM bans)", None, (False, 0.0, 'SQL references unauthorized table(s). Found: [select::null::bans, update::null::users]. Allowed: [(select|update)::null::users].')),
    ('is-sql', {'allowedTables': ['select::null::users']}, 'SELECT u.id, o.total FROM users u JOIN orders o ON u.id = o.uid', None, (False, 0.0, 'SQL references unauthorized table(s). Found: [select::null::users, select::null::orders]. Allowed: [select::null::users].')),
    ('is-sql', {'allowedColumns': ['select::users::id']}, 'SELECT id, name FROM users', None, (False, 0.0, 'SQL references unauthorized column(s). Found: [select::null::id, select::null::name]. Allowed: [select::users::id].')),
    ('is-sql', {'allowedColumns': ['select::users::id']}, 'SELECT id FROM users', None, (True, 1.0, 'Assertion passed')),
    ('is-sql', {'allowedTables': ['select::null::t']}, 'DROP TABLE t', None, (False, 0.0, 'SQL references unauthorized table(s). Found: [DROP::null::t]. Allowed: [select::null::t].')),
    ('is-sql', {'allowedColumns': ['insert::t::a']}, 'INSERT INTO t (a,b) VALUES (1,2)', None, (False, 0.0, 'SQL references unauthorized column(s). Found: [insert::t::a, insert::t::b]. Allowed: [insert::t::a].')),
    ('not-is-sql', {'allowedTables': ['select::null::orders']}, 'SELECT id FROM users', None, (True, 1.0, 'Assertion passed')),
    ('contains-sql', None, '```sql\nSELECT * FROM users\n```', None, (True, 1.0, 'Assertion passed')),
    ('not-contains-sql', None, '```sql\nSELECT * FROM users\n```', None, (False, 0.0, 'The output SQL statement is valid')),
    ('contains-sql', None, 'Here:\n```\nSELECT id FROM t\n```\nand\n```sql\nBAD SQL\n```', None, (True, 1.0, 'Assertion passed')),
    ('not-contains-sql', None, 'Here:\n```\nSELECT id FROM t\n```\nand\n```sql\nBAD SQL\n```', None, (False, 0.0, 'The output SQL statement is valid')),
    ('contains-sql', None, '```python\nprint(1)\n```', None, (False, 0.0, 'SQL statement does not conform to the provided MySQL database syntax.')),
    ('not-contains-sql', None, '```python\nprint(1)\n```', None, (True, 1.0, 'Assertion passed')),
    ('contains-sql', None, '```sql\nSELEC x\n```', None, (False, 0.0, 'SQL statement does not conform to the provided MySQL database syntax.')),
    ('not-contains-sql', None, '```sql\nSELEC x\n```', None, (True, 1.0, 'Assertion passed')),
    ('contains-sql', None, 'SELECT 1', None, (True, 1.0, 'Assertion passed')),
    ('not-contains-sql', None, 'SELECT 1', None, (False, 0.0, 'The output SQL statement is valid')),
    ('contains-sql', None, 'words', None, (False, 0.0, 'SQL statement does not conform to the provided MySQL database syntax.')),
    ('not-contains-sql', None, 'words', None, (True, 1.0, 'Assertion passed')),
    ('is-valid-openai-function-call', None, {'name': 'get_weather', 'arguments': '{"location":"Paris"}'}, {'id': 'openai:chat:gpt-4o', 'config': {'functions': [{'name': 'get_weather', 'parameters': {'type': 'object', 'properties': {'location': {'type': 'string'}, 'unit': {'type': 'string', 'enum': ['c', 'f']}}, 'required': ['location']}}]}}, (True, 1.0, 'Assertion passed')),
    ('is-valid-openai-function-call', None, {'name': 'get_weather', 'arguments': '{"unit":"k"}'}, {'id': 'openai:chat:gpt-4o', 'config': {'functions': [{'name': 'get_weather', 'parameters': {'type': 'object', 'properties': {'location': {'type': 'string'}, 'unit': {'type': 'string', 'enum': ['c', 'f']}}, 'required': ['location']}}]}}, (False, 0.0, 'Call to "get_weather" does not match schema: [{"instancePath":"","schemaPath":"#/required","keyword":"required","params":{"missingProperty":"location"},"message":"must have required property \'location\'"}]')),
    ('is-valid-openai-function-call', None, {'name': 'get_weather', 'arguments': '{"location":5}'}, {'id': 'openai:chat:gpt-4o', 'config': {'functions': [{'name': 'get_weather', 'parameters': {'type': 'object', 'properties': {'location': {'type': 'string'}, 'unit': {'type': 'string', 'enum': ['c', 'f']}}, 'required': ['location']}}]}}, (False, 0.0, 'Call to "get_weather" does not match schema: [{"instancePath":"/location","schemaPath":"#/properties/location/type","keyword":"type","params":{"type":"string"},"message":"must be string"}]')),
    ('is-valid-openai-function-call', None, {'name': 'other', 'arguments': '{}'}, {'id': 'openai:chat:gpt-4o', 'config': {'functions': [{'name': 'get_weather', 'parameters': {'type': 'object', 'properties': {'location': {'type': 'string'}, 'unit': {'type': 'string', 'enum': ['c', 'f']}}, 'required': ['location']}}]}}, (False, 0.0, 'Called "other", but there is no function with that name')),
    ('is-valid-openai-function-call', None, {'function_call': {'name': 'get_weather', 'arguments': '{"location":"x"}'}}, {'id': 'openai:chat:gpt-4o', 'config': {'functions': [{'name': 'get_weather', 'parameters': {'type': 'object', 'properties': {'location': {'type': 'string'}, 'unit': {'type': 'string', 'enum': ['c', 'f']}}, 'required': ['location']}}]}}, (True, 1.0, 'Assertion passed')),
    ('is-valid-openai-function-call', None, 'not a call', {'id': 'openai:chat:gpt-4o', 'config': {'functions': [{'name': 'get_weather', 'parameters': {'type': 'object', 'properties': {'location': {'type': 'string'}, 'unit': {'type': 'string', 'enum': ['c', 'f']}}, 'required': ['location']}}]}}, (False, 0.0, 'OpenAI did not return a valid-looking function call: "not a call"')),
    ('is-valid-openai-function-call', None, {'name': 'get_weather'}, {'id': 'openai:chat:gpt-4o', 'config': {'functions': [{'name': 'get_weather', 'parameters': {'type': 'object', 'properties': {'location': {'type': 'string'}, 'unit': {'type': 'string', 'enum': ['c', 'f']}}, 'required': ['location']}}]}}, (False, 0.0, 'OpenAI did not return a valid-looking function call: {"name":"get_weather"}')),
    ('not-is-valid-openai-function-call', None, {'name': 'get_weather', 'arguments': '{"location":"Paris"}'}, {'id': 'openai:chat:gpt-4o', 'config': {'functions': [{'name': 'get_weather', 'parameters': {'type': 'object', 'properties': {'location': {'type': 'string'}, 'unit': {'type': 'string', 'enum': ['c', 'f']}}, 'required': ['location']}}]}}, (True, 1.0, 'Assertion passed')),
    ('is-valid-function-call', None, {'name': 'get_weather', 'arguments': '{}'}, {'id': 'openai:chat:gpt-4o', 'config': {'functions': [{'name': 'get_weather', 'parameters': {'type': 'object', 'properties': {'location': {'type': 'string'}, 'unit': {'type': 'string', 'enum': ['c', 'f']}}, 'required': ['location']}}]}}, (False, 0.0, 'Call to "get_weather" does not match schema: [{"instancePath":"","schemaPath":"#/required","keyword":"required","params":{"missingProperty":"location"},"message":"must have required property \'location\'"}]')),
    ('is-valid-openai-function-call', None, {'name': 'get_weather', 'arguments': '{}'}, {'id': 'echo'}, (False, 0.0, 'Provider does not have functionality for checking function call.')),
    ('is-valid-openai-function-call', None, {'name': 'get_weather', 'arguments': '{}'}, {'id': 'anthropic:messages:claude-3', 'config': {'functions': [{'name': 'get_weather', 'parameters': {'type': 'object', 'properties': {'location': {'type': 'string'}, 'unit': {'type': 'string', 'enum': ['c', 'f']}}, 'required': ['location']}}]}}, (False, 0.0, 'Provider does not have functionality for checking function call.')),
    ('is-valid-openai-function-call', None, {'name': 'get_weather', 'arguments': '{}'}, {'id': 'google:gemini-pro', 'config': {'tools': [{'name': 'get_weather', 'parameters': {'type': 'object', 'properties': {'location': {'type': 'string'}, 'unit': {'type': 'string', 'enum': ['c', 'f']}}, 'required': ['location']}}]}}, (False, 0.0, 'Google did not return a valid-looking function call: {"name":"get_weather","arguments":"{}"}')),
    ('is-valid-openai-function-call', None, {'name': 'f', 'arguments': '{}'}, {'id': 'openai:chat:gpt-4o', 'config': {'functions': [{'name': 'f', 'parameters': {'type': 'object', 'foo': 1}}]}}, (False, 0.0, 'strict mode: unknown keyword: "foo"')),
    ('is-valid-openai-tools-call', None, [{'id': 'c1', 'type': 'function', 'function': {'name': 'get_weather', 'arguments': '{"location":"Paris"}'}}], {'id': 'echo', 'config': {'tools': [{'type': 'function', 'function': {'name': 'get_weather', 'parameters': {'type': 'object', 'properties': {'location': {'type': 'string'}, 'unit': {'type': 'string', 'enum': ['c', 'f']}}, 'required': ['location']}}}]}}, (True, 1.0, 'Assertion passed')),
    ('is-valid-openai-tools-call', None, [{'id': 'c1', 'type': 'function', 'function': {'name': 'get_weather', 'arguments': '{"unit":"c"}'}}], {'id': 'echo', 'config': {'tools': [{'type': 'function', 'function': {'name': 'get_weather', 'parameters': {'type': 'object', 'properties': {'location': {'type': 'string'}, 'unit': {'type': 'string', 'enum': ['c', 'f']}}, 'required': ['location']}}}]}}, (False, 0.0, 'Call to "get_weather" does not match schema: [{"instancePath":"","schemaPath":"#/required","keyword":"required","params":{"missingProperty":"location"},"message":"must have required property \'location\'"}]')),
    ('is-valid-openai-tools-call', None, [{'id': 'c1', 'type': 'function', 'function': {'name': 'nope', 'arguments': '{}'}}], {'id': 'echo', 'config': {'tools': [{'type': 'function', 'function': {'name': 'get_weather', 'parameters': {'type': 'object', 'properties': {'location': {'type': 'string'}, 'unit': {'type': 'string', 'enum': ['c', 'f']}}, 'required': ['location']}}}]}}, (False, 0.0, 'Called "nope", but there is no function with that name')),
    ('is-valid-openai-tools-call', None, [], {'id': 'echo', 'config': {'tools': [{'type': 'function', 'function': {'name': 'get_weather', 'parameters': {'type': 'object', 'properties': {'location': {'type': 'string'}, 'unit': {'type': 'string', 'enum': ['c', 'f']}}, 'required': ['location']}}}]}}, (False, 0.0, 'OpenAI did not return a valid-looking tools response: []')),
    ('is-valid-openai-tools-call', None, '[]', {'id': 'echo', 'config': {'tools': [{'type': 'function', 'function': {'name': 'get_weather', 'parameters': {'type': 'object', 'properties': {'location': {'type': 'string'}, 'unit': {'type': 'string', 'enum': ['c', 'f']}}, 'required': ['location']}}}]}}, (False, 0.0, 'OpenAI did not return a valid-looking tools response: "[]"')),
    ('is-valid-openai-tools-call', None, 'MCP Tool Result (x): ok', {'id': 'echo', 'config': {'tools': [{'type': 'function', 'function': {'name': 'get_weather', 'parameters': {'type': 'object', 'properties': {'location': {'type': 'string'}, 'unit': {'type': 'string', 'enum': ['c', 'f']}}, 'required': ['location']}}}]}}, (True, 1.0, 'MCP tool call succeeded for x')),
    ('is-valid-openai-tools-call', None, 'MCP Tool Error (get_weather): boom', {'id': 'echo', 'config': {'tools': [{'type': 'function', 'function': {'name': 'get_weather', 'parameters': {'type': 'object', 'properties': {'location': {'type': 'string'}, 'unit': {'type': 'string', 'enum': ['c', 'f']}}, 'required': ['location']}}}]}}, (False, 0.0, 'MCP tool call failed for get_weather: boom')),
    ('is-valid-openai-tools-call', None, {'tool_calls': [{'id': 'c1', 'type': 'function', 'function': {'name': 'get_weather', 'arguments': '{"location":"Paris"}'}}]}, {'id': 'echo', 'config': {'tools': [{'type': 'function', 'function': {'name': 'get_weather', 'parameters': {'type': 'object', 'properties': {'location': {'type': 'string'}, 'unit': {'type': 'string', 'enum': ['c', 'f']}}, 'required': ['location']}}}]}}, (True, 1.0, 'Assertion passed')),
    ('is-valid-openai-tools-call', None, {'content': 'hi'}, {'id': 'echo', 'config': {'tools': [{'type': 'function', 'function': {'name': 'get_weather', 'parameters': {'type': 'object', 'properties': {'location': {'type': 'string'}, 'unit': {'type': 'string', 'enum': ['c', 'f']}}, 'required': ['location']}}}]}}, (False, 0.0, 'OpenAI did not return a valid-looking tools response: {"content":"hi"}')),
    ('is-valid-openai-tools-call', None, [{'function': {'name': 'a'}}], {'id': 'echo', 'config': {'tools': [{'type': 'function', 'function': {'name': 'get_weather', 'parameters': {'type': 'object', 'properties': {'location': {'type': 'string'}, 'unit': {'type': 'string', 'enum': ['c', 'f']}}, 'required': ['location']}}}]}}, (False, 0.0, 'OpenAI did not return a valid-looking tools response: [{"function":{"name":"a"}}]')),
    ('not-is-valid-openai-tools-call', None, [{'id': 'c1', 'type': 'function', 'function': {'name': 'get_weather', 'arguments': '{"unit":"c"}'}}], {'id': 'echo', 'config': {'tools': [{'type': 'function', 'function': {'name': 'get_weather', 'parameters': {'type': 'object', 'properties': {'location': {'type': 'string'}, 'unit': {'type': 'string', 'enum': ['c', 'f']}}, 'required': ['location']}}}]}}, (False, 0.0, 'Call to "get_weather" does not match schema: [{"instancePath":"","schemaPath":"#/required","keyword":"required","params":{"missingProperty":"location"},"message":"must have required property \'location\'"}]')),
    ('not-is-valid-openai-tools-call', None, [{'id': 'c1', 'type': 'function', 'function': {'name': 'get_weather', 'arguments': '{"location":"Paris"}'}}], {'id': 'echo', 'config': {'tools': [{'type': 'function', 'function': {'name': 'get_weather', 'parameters': {'type': 'object', 'properties': {'location': {'type': 'string'}, 'unit': {'type': 'string', 'enum': ['c', 'f']}}, 'required': ['location']}}}]}}, (True, 1.0, 'Assertion passed')),
    ('is-valid-openai-tools-call', None, [{'id': 'c1', 'type': 'function', 'function': {'name': 'get_weather', 'arguments': '{}'}}], {'id': 'echo', 'config': {}}, (False, 0.0, 'No tools configured in provider, but output contains tool calls')),
    # Google providers validate Gemini functionCall output against functionDeclarations
    ('is-valid-openai-function-call', None, [{'functionCall': {'name': 'get_weather', 'args': {'location': 'Paris'}}}], {'id': 'google:gemini-pro', 'config': {'tools': [{'functionDeclarations': [{'name': 'get_weather', 'parameters': {'type': 'object', 'properties': {'location': {'type': 'string', 'default': 'x'}, 'unit': {'type': 'string', 'enum': ['c', 'f']}}, 'required': ['location'], 'additionalProperties': False}}, {'name': 'noargs'}]}]}}, (True, 1.0, 'Assertion passed')),
    ('is-valid-openai-function-call', None, [{'functionCall': {'name': 'get_weather', 'args': {'unit': 'k'}}}], {'id': 'google:gemini-pro', 'config': {'tools': [{'functionDeclarations': [{'name': 'get_weather', 'parameters': {'type': 'object', 'properties': {'location': {'type': 'string', 'default': 'x'}, 'unit': {'type': 'string', 'enum': ['c', 'f']}}, 'required': ['location'], 'additionalProperties': False}}, {'name': 'noargs'}]}]}}, (False, 0.0, 'Call to "get_weather":\n{"name":"get_weather","args":{"unit":"k"}}\ndoes not match schema:\n[{"instancePath":"","schemaPath":"#/required","keyword":"required","params":{"missingProperty":"location"},"message":"must have required property \'location\'"}]')),
    ('is-valid-openai-function-call', None, [{'functionCall': {'name': 'get_weather', 'args': {}}}], {'id': 'google:gemini-pro', 'config': {'tools': [{'functionDeclarations': [{'name': 'get_weather', 'parameters': {'type': 'object', 'properties': {'location': {'type': 'string', 'default': 'x'}, 'unit': {'type': 'string', 'enum': ['c', 'f']}}, 'required': ['location'], 'additionalProperties': False}}, {'name': 'noargs'}]}]}}, (False, 0.0, 'Call to "get_weather":\n{"name":"get_weather","args":{}}\ndoes not match schema:\n{"name":"get_weather","parameters":{"type":"OBJECT","properties":{"location":{"type":"STRING"},"unit":{"type":"STRING","enum":["c","f"]}},"required":["location"]}}')),
    ('is-valid-openai-function-call', None, [{'functionCall': {'name': 'noargs', 'args': {}}}], {'id': 'google:gemini-pro', 'config': {'tools': [{'functionDeclarations': [{'name': 'get_weather', 'parameters': {'type': 'object', 'properties': {'location': {'type': 'string', 'default': 'x'}, 'unit': {'type': 'string', 'enum': ['c', 'f']}}, 'required': ['location'], 'additionalProperties': False}}, {'name': 'noargs'}]}]}}, (True, 1.0, 'Assertion passed')),
    ('is-valid-openai-function-call', None, [{'functionCall': {'name': 'noargs', 'args': {'a': 1}}}], {'id': 'google:gemini-pro', 'config': {'tools': [{'functionDeclarations': [{'name': 'get_weather', 'parameters': {'type': 'object', 'properties': {'location': {'type': 'string', 'default': 'x'}, 'unit': {'type': 'string', 'enum': ['c', 'f']}}, 'required': ['location'], 'additionalProperties': False}}, {'name': 'noargs'}]}]}}, (False, 0.0, 'Call to "noargs":\n{"name":"noargs","args":{"a":1}}\ndoes not match schema:\n{"name":"noargs"}')),
    ('is-valid-openai-function-call', None, [{'functionCall': {'name': 'nope', 'args': {}}}], {'id': 'google:gemini-pro', 'config': {'tools': [{'functionDeclarations': [{'name': 'get_weather', 'parameters': {'type': 'object', 'properties': {'location': {'type': 'string', 'default': 'x'}, 'unit': {'type': 'string', 'enum': ['c', 'f']}}, 'required': ['location'], 'additionalProperties': False}}, {'name': 'noargs'}]}]}}, (False, 0.0, 'Called "nope", but there is no function with that name')),
    ('is-valid-openai-function-call', None, {'toolCall': {'functionCalls': [{'name': 'get_weather', 'args': {'location': 'x'}}]}}, {'id': 'google:gemini-pro', 'config': {'tools': [{'functionDeclarations': [{'name': 'get_weather', 'parameters': {'type': 'object', 'properties': {'location': {'type': 'string', 'default': 'x'}, 'unit': {'type': 'string', 'enum': ['c', 'f']}}, 'required': ['location'], 'additionalProperties': False}}, {'name': 'noargs'}]}]}}, (True, 1.0, 'Assertion passed')),
    ('is-valid-openai-function-call', None, 'not json', {'id': 'google:gemini-pro', 'config': {'tools': [{'functionDeclarations': [{'name': 'get_weather', 'parameters': {'type': 'object', 'properties': {'location': {'type': 'string', 'default': 'x'}, 'unit': {'type': 'string', 'enum': ['c', 'f']}}, 'required': ['location'], 'additionalProperties': False}}, {'name': 'noargs'}]}]}}, (False, 0.0, 'Google did not return a valid-looking function call: "not json"')),
    ('is-valid-openai-function-call', None, '[{"functionCall": {"name": "get_weather", "args": {"location": "Paris", "zzz": 1}}}]', {'id': 'google:gemini-pro', 'config': {'tools': [{'functionDeclarations': [{'name': 'get_weather', 'parameters': {'type': 'object', 'properties': {'location': {'type': 'string', 'default': 'x'}, 'unit': {'type': 'string', 'enum': ['c', 'f']}}, 'required': ['location'], 'additionalProperties': False}}, {'name': 'noargs'}]}]}}, (True, 1.0, 'Assertion passed')),
    ('is-valid-openai-function-call', None, {'x': 1}, {'id': 'google:gemini-pro', 'config': {'tools': [{'functionDeclarations': [{'name': 'get_weather', 'parameters': {'type': 'object', 'properties': {'location': {'type': 'string', 'default': 'x'}, 'unit': {'type': 'string', 'enum': ['c', 'f']}}, 'required': ['location'], 'additionalProperties': False}}, {'name': 'noargs'}]}]}}, (False, 0.0, 'Google did not return a valid-looking function call: {"x":1}')),
    ('is-valid-openai-function-call', None, [{'text': 'hi'}], {'id': 'google:gemini-pro', 'config': {'tools': [{'functionDeclarations': [{'name': 'get_weather', 'parameters': {'type': 'object', 'properties': {'location': {'type': 'string', 'default': 'x'}, 'unit': {'type': 'string', 'enum': ['c', 'f']}}, 'required': ['location'], 'additionalProperties': False}}, {'name': 'noargs'}]}]}}, (True, 1.0, 'Assertion passed')),
    ('is-valid-openai-function-call', None, [{'functionCall': {'name': 'get_weather', 'args': None}}], {'id': 'google:gemini-pro', 'config': {'tools': [{'functionDeclarations': [{'name': 'get_weather', 'parameters': {'type': 'object', 'properties': {'location': {'type': 'string', 'default': 'x'}, 'unit': {'type': 'string', 'enum': ['c', 'f']}}, 'required': ['location'], 'additionalProperties': False}}, {'name': 'noargs'}]}]}}, (False, 0.0, 'Cannot convert undefined or null to object')),
    ('is-valid-openai-function-call', None, 5, {'id': 'google:gemini-pro', 'config': {'tools': [{'functionDeclarations': [{'name': 'get_weather', 'parameters': {'type': 'object', 'properties': {'location': {'type': 'string', 'default': 'x'}, 'unit': {'type': 'string', 'enum': ['c', 'f']}}, 'required': ['location'], 'additionalProperties': False}}, {'name': 'noargs'}]}]}}, (False, 0.0, 'Google did not return a valid-looking function call: 5')),
    ('is-valid-openai-function-call', None, [{'functionCall': {'name': 'get_weather', 'args': {'location': 1}}}], {'id': 'vertex:gemini-pro', 'config': {'tools': [{'functionDeclarations': [{'name': 'get_weather', 'parameters': {'type': 'OBJECT', 'properties': {'location': {'type': 'STRING'}}, 'propertyOrdering': ['location']}}]}]}}, (False, 0.0, 'Tool schema doesn\'t compile with ajv: Error: strict mode: unknown keyword: "propertyOrdering". If this is a valid tool schema you may need to reformulate your assertion without is-valid-function-call.')),
    ('is-valid-openai-function-call', None, [{'functionCall': {'name': 'get_weather', 'args': {'location': 1}}}], {'id': 'google:gemini-pro', 'config': {}}, (False, 0.0, 'Called "get_weather", but there is no function with that name')),
]


def _id(row):
    type_, value, output, _, _ = row
    text = output if isinstance(output, str) else json.dumps(output)
    return f"{type_}:{text[:40]}:{json.dumps(value)[:30] if value is not None else ''}"


@pytest.mark.parametrize("type_, value, output, provider, expected", ROWS, ids=[_id(r) for r in ROWS])
def test_matches_promptfoo(type_, value, output, provider, expected):
    if expected[0] == "ERROR":
        with pytest.raises(Exception) as info:
            run(type_, value, output, provider)
        assert expected[1] in str(info.value)
        return
    passed, score, reason = expected
    result = run(type_, value, output, provider)
    assert (result.passed, result.score) == (passed, score)
    assert result.reason.startswith(reason)
    if not reason.endswith(": "):  # a full reason, not a prefix
        assert result.reason == reason


# ------------------------------------------------------------------ helpers and edge cases

def test_json_extraction_follows_promptfoo_brace_scanning():
    assert extract_json_objects('a {"x": 1} b {"y": {"z": 2}}') == [{"x": 1}, {"y": {"z": 2}}]
    assert extract_json_objects('{"a": "}"}') == []  # braces in strings are counted too
    assert extract_json_objects('{"a": 1') == [{"a": 1}]  # unterminated: closed for it
    assert extract_json_objects("[1, 2]") == []  # arrays are never extracted
    assert extract_json_objects("{a: yes, b: 012, c: 0x1F}") == [{"a": "yes", "b": 12, "c": 31}]  # YAML 1.2 core
    assert extract_json_objects('{"url": "http://x.io/a"} // note') == [{"url": "http://x.io/a"}]


def test_first_valid_block_decides_contains_json():
    schema = {"type": "object", "required": ["b"]}
    r = run("contains-json", schema, '{"a": 1} then {"b": 2} then {"c": 3}')
    assert (r.passed, r.score) == (True, 1.0)
    r = run("not-contains-json", schema, '{"a": 1} then {"b": 2}')
    assert (r.passed, r.reason) == (False, "Output contains JSON conforming to the provided schema")
    r = run("contains-json", schema, '{"a": 1} then {"c": 3}')  # the last block's errors are reported
    assert r.reason == "JSON does not conform to the provided schema. Errors: data must have required property 'b'"


def test_schema_value_is_templated_and_yaml():
    r = run("is-json", "type: object\nrequired: ['{{ key }}']", '{"a": 1}', variables={"key": "b"})
    assert r.reason == "JSON does not conform to the provided schema. Errors: data must have required property 'b'"


def test_ajv_error_list_for_function_calls():
    compiled = compile_schema({"type": "object", "properties": {"a": {"type": "string"}}, "required": ["a"]})
    errors = compiled.errors({"a": 1})
    assert errors == [{"instancePath": "/a", "schemaPath": "#/properties/a/type", "keyword": "type",
                       "params": {"type": "string"}, "message": "must be string"}]
    assert errors_text(errors) == "data/a must be string"
    assert compiled.errors({"a": "x"}) == []


def test_no_network_for_remote_refs():
    with pytest.raises(Exception, match="can't resolve reference"):
        compile_schema({"$ref": "https://example.com/schema.json"})


def test_contains_html_scores_evidence():
    assert contains_html_text("<div>x</div>")
    assert not contains_html_text("x < y > z")
    assert not contains_html_text("&amp; and &lt;")  # one kind of evidence (entities) is one point
    assert contains_html_text("&amp; and <i>")  # entity + opening tag
    assert not contains_html_text("plain")


def test_xml_candidates_and_tree():
    text = "a <r><i>1</i><i>2</i></r> b <s/>"
    spans = [text[s:e] for s, e in extract_xml_candidates(text)]
    assert spans == ["<r><i>1</i><i>2</i></r> b <s/>", "<r><i>1</i><i>2</i></r>", "<s/>"]  # sibling runs first
    assert xml_tree('<r a="1"><i>1</i><i>2</i><?pi x?></r>') == {"r": {"@_a": "1", "i": ["1", "2"], "?pi": {"@_x": True}}}


def test_sql_code_blocks():
    assert extract_sql_blocks("x\n```sql\nSELECT 1\n```\n```py\nprint()\n```\n~~~\nSELECT 2\n~~~") == ["SELECT 1", "SELECT 2"]


def test_tool_definitions_from_a_file(tmp_path):
    tools = [{"type": "function", "function": {"name": "f", "parameters": {"type": "object", "required": ["q"]}}}]
    (tmp_path / "tools.json").write_text(json.dumps(tools))
    prov = create_provider(ProviderSpec(id="echo", config={"tools": "file://tools.json"}), tmp_path)
    call = [{"id": "1", "type": "function", "function": {"name": "f", "arguments": "{}"}}]
    result = asyncio.run(run_assertion(Assertion(type="is-valid-openai-tools-call"), output=call, test=TestCase(),
                                       variables={}, prompt="p", response=ProviderResponse(output=call), provider=prov))
    assert not result.passed and result.reason.startswith('Call to "f" does not match schema: ')


def test_weight_zero_and_registry_aliases():
    from factcli.scoring.registry import lookup

    assert lookup("is-valid-function-call").name == "is-valid-openai-function-call"
    assert lookup("not-contains-sql").name == "contains-sql"


# ------------------------------------------------------------------------- parity fixture

def _comparable(doc: dict) -> dict:
    for row in doc["results"]["results"]:
        if row["failureReason"] == 2:  # an ERROR row: promptfoo keeps neither output nor grading
            row["response"] = None
            row["gradingResult"] = None
    return doc


def test_parity_with_promptfoo(tmp_path):
    out = tmp_path / "ours.json"
    result = CliRunner().invoke(app, ["eval", "-c", str(PARITY / "promptfooconfig.yaml"), "-o", str(out),
                                      "--no-progress-bar"])
    assert result.exit_code == 100, result.output
    ours = json.loads(out.read_text())
    golden = json.loads((PARITY / "golden.json").read_text())
    errors = {r["testIdx"]: r["error"] for r in ours["results"]["results"] if r["failureReason"] == 2}
    golden_errors = {r["testIdx"]: r["error"] for r in golden["results"]["results"] if r["failureReason"] == 2}
    assert errors.keys() == golden_errors.keys()
    for idx, message in golden_errors.items():
        assert re.sub(r"^Error: ", "", message) in errors[idx]
    assert differences(_comparable(ours), _comparable(golden)) == []
    stats, gstats = ours["results"]["stats"], golden["results"]["stats"]
    assert (stats["successes"], stats["failures"], stats["errors"]) == (
        gstats["successes"], gstats["failures"], gstats["errors"])
