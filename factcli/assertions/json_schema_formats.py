"""The `format` keyword of JSON Schema as promptfoo's Ajv with ajv-formats checks it:
which format names exist (strict mode refuses any other) and what each accepts, from dates, times and
durations to URIs, e-mail addresses, host names, IP addresses, UUIDs, JSON pointers and regexes. A
string format ignores non-strings and a number format non-numbers, as Ajv does. The long URI/URL
regexes of ajv-formats are approximated, and the `regex` format compiles with Python's `re`.
"""

from __future__ import annotations

import ipaddress
import re

from factcli.assertions.js_semantics import is_number, js_regex


def _regex_ok(pattern: str) -> bool:
    if re.search(r"[^\\]\\Z", pattern):
        return False
    try:
        js_regex(pattern)
        return True
    except (re.error, RecursionError, OverflowError):
        return False


def _string_format(check):
    def run(value):
        return not isinstance(value, str) or bool(check(value))
    return run


def _number_format(check):
    def run(value):
        return not is_number(value) or bool(check(value))
    return run


_DAYS = [0, 31, 28, 31, 30, 31, 30, 31, 31, 30, 31, 30, 31]
_DATE = re.compile(r"(\d\d\d\d)-(\d\d)-(\d\d)\Z")
_TIME = re.compile(r"(\d\d):(\d\d):(\d\d(?:\.\d+)?)(z|([+-])(\d\d)(?::?(\d\d))?)?\Z", re.I)


def _is_date(s: str) -> bool:
    m = _DATE.match(s)
    if not m:
        return False
    year, month, day = int(m.group(1)), int(m.group(2)), int(m.group(3))
    leap = year % 4 == 0 and (year % 100 != 0 or year % 400 == 0)
    return 1 <= month <= 12 and 1 <= day <= (29 if month == 2 and leap else _DAYS[month])


def _time_checker(strict_zone: bool):
    def is_time(s: str) -> bool:
        m = _TIME.match(s)
        if not m:
            return False
        hour, minute, second = int(m.group(1)), int(m.group(2)), float(m.group(3))
        zone = m.group(4)
        zsign = -1 if m.group(5) == "-" else 1
        zh, zm = int(m.group(6) or 0), int(m.group(7) or 0)
        if zh > 23 or zm > 59 or (strict_zone and not zone):
            return False
        if hour <= 23 and minute <= 59 and second < 60:
            return True
        utc_min = minute - zm * zsign
        utc_hour = hour - zh * zsign - (1 if utc_min < 0 else 0)
        return utc_hour in (23, -1) and utc_min in (59, -1) and second < 61
    return is_time


def _date_time_checker(strict_zone: bool):
    is_time = _time_checker(strict_zone)

    def is_date_time(s: str) -> bool:
        parts = re.split(r"t|\s", s, flags=re.I)
        return len(parts) == 2 and _is_date(parts[0]) and is_time(parts[1])
    return is_date_time


def _is_ipv6(s: str) -> bool:
    if "%" in s:
        return False
    try:
        ipaddress.IPv6Address(s)
        return True
    except ValueError:
        return False


_URI_CHARS = r"(?:[a-z0-9\-._~!$&'()*+,;=:@/?#\[\]]|%[0-9a-f]{2})"
_FORMAT_PATTERNS = {
    "duration": re.compile(r"P(?!\Z)((\d+Y)?(\d+M)?(\d+D)?(T(?=\d)(\d+H)?(\d+M)?(\d+S)?)?|(\d+W)?)\Z"),
    "uri-reference": re.compile(rf"(?:[a-z][a-z0-9+\-.]*:)?{_URI_CHARS}*\Z", re.I),
    "uri-template": re.compile(
        r"(?:(?:[^\x00-\x20\"'<>%\\^`{|}]|%[0-9a-f]{2})|\{[+#./;?&=,!@|]?(?:[a-z0-9_]|%[0-9a-f]{2})+"
        r"(?::[1-9][0-9]{0,3}|\*)?(?:,(?:[a-z0-9_]|%[0-9a-f]{2})+(?::[1-9][0-9]{0,3}|\*)?)*\})*\Z", re.I),
    "url": re.compile(r"(?:https?|ftp)://(?:\S+(?::\S*)?@)?[^\s/:?#.]+(?:\.[^\s/:?#.]+)*(?::\d{2,5})?(?:[/?#]\S*)?\Z",
                      re.I),
    "email": re.compile(r"[a-z0-9!#$%&'*+/=?^_`{|}~-]+(?:\.[a-z0-9!#$%&'*+/=?^_`{|}~-]+)*@"
                        r"(?:[a-z0-9](?:[a-z0-9-]*[a-z0-9])?\.)+[a-z0-9](?:[a-z0-9-]*[a-z0-9])?\Z", re.I),
    "hostname": re.compile(r"(?=.{1,253}\.?\Z)[a-z0-9](?:[a-z0-9-]{0,61}[a-z0-9])?"
                           r"(?:\.[a-z0-9](?:[-0-9a-z]{0,61}[0-9a-z])?)*\.?\Z", re.I),
    "ipv4": re.compile(r"(?:(?:25[0-5]|2[0-4]\d|1\d\d|[1-9]?\d)\.){3}(?:25[0-5]|2[0-4]\d|1\d\d|[1-9]?\d)\Z"),
    "uuid": re.compile(r"(?:urn:uuid:)?[0-9a-f]{8}-(?:[0-9a-f]{4}-){3}[0-9a-f]{12}\Z", re.I),
    "json-pointer": re.compile(r"(?:/(?:[^~/]|~0|~1)*)*\Z"),
    "json-pointer-uri-fragment": re.compile(r"#(?:/(?:[a-z0-9_\-.!$&'()*+,;:=@]|%[0-9a-f]{2}|~0|~1)*)*\Z", re.I),
    "relative-json-pointer": re.compile(r"(?:0|[1-9][0-9]*)(?:#|(?:/(?:[^~/]|~0|~1)*)*)\Z"),
}
_URI = re.compile(rf"[a-z][a-z0-9+\-.]*:{_URI_CHARS}*\Z", re.I)
_BYTE = re.compile(r"^(?:[A-Za-z0-9+/]{4})*(?:[A-Za-z0-9+/]{2}==|[A-Za-z0-9+/]{3}=)?$", re.M)

_STRING_FORMATS = {
    "date": _is_date,
    "time": _time_checker(True),
    "date-time": _date_time_checker(True),
    "iso-time": _time_checker(False),
    "iso-date-time": _date_time_checker(False),
    "uri": lambda s: bool(re.search(r"/|:", s)) and bool(_URI.match(s)),
    "ipv6": _is_ipv6,
    "regex": _regex_ok,
    "byte": lambda s: bool(_BYTE.search(s)),
    "password": lambda s: True,
    "binary": lambda s: True,
    **{name: (lambda rx: (lambda s: bool(rx.match(s))))(rx) for name, rx in _FORMAT_PATTERNS.items()},
}
_NUMBER_FORMATS = {
    "int32": lambda x: float(x).is_integer() and -(2 ** 31) <= x <= 2 ** 31 - 1,
    "int64": lambda x: float(x).is_integer(),
    "float": lambda x: True,
    "double": lambda x: True,
}
KNOWN_FORMATS = set(_STRING_FORMATS) | set(_NUMBER_FORMATS)


def format_checker():
    """A jsonschema FormatChecker that knows exactly ajv-formats' formats (and no others)."""
    import jsonschema

    checker = jsonschema.FormatChecker(formats=())
    for name, fn in _STRING_FORMATS.items():
        checker.checks(name)(_string_format(fn))
    for name, fn in _NUMBER_FORMATS.items():
        checker.checks(name)(_number_format(fn))
    return checker
