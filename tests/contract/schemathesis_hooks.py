"""Schemathesis hooks for Tayga's API contract test (tests/it/api_contract.rs).

The OpenAPI document states every rule on a single parameter. Three rules relate
parameters to each other or to a grammar, which JSON Schema cannot state; the document
says them in words (docs/api.md, "The contract") and the server answers a request that
breaks one with a 400 naming the parameter. This file teaches the fuzzer exactly those
three, and nothing else:

1. The window (`x-tayga-window` on the operation: `default_ns`, `max_ns`): `[from, to)`
   with `to` defaulting to now and `from` to `to - default_ns`, must not be empty and may
   span at most `max_ns`. A schema-valid request that breaks it is mended into one that
   keeps it (its generated values kept where they can be).
2. `min_duration_ns <= max_duration_ns` (trace search and scatter): the two are swapped.
3. `q` is a query in the search language (docs/api.md, "Search"): a rejection of `q` by
   the parser, which says "at character N: ...", is not counted as a valid request
   rejected. Every other check still runs on those requests.

Negative cases (made to break the schema) are left as generated.
"""

import json
import re
import time

import schemathesis

U64_MAX = 2**64 - 1


def positive(case):
    return case.meta is not None and case.meta.generation.mode.is_positive


def as_int(value):
    """A query value as a number: generated as one, or already as its text (the coverage
    phase hands over query strings)."""
    if isinstance(value, int) and not isinstance(value, bool):
        return value
    if isinstance(value, str) and value.isdigit():
        return int(value)
    return None


def put(query, name, number, like):
    query[name] = str(number) if isinstance(like, str) else number


def mend_window(query, rule):
    default, widest = rule["default_ns"], rule["max_ns"]
    now = time.time_ns()
    frm, to = as_int(query.get("from")), as_int(query.get("to"))
    like = query.get("from", query.get("to"))
    end = now if to is None else to
    start = max(end - default, 0) if frm is None else frm
    if start < end and end - start <= widest:
        return
    if frm is not None and frm + default <= U64_MAX:
        put(query, "to", frm + default, like)  # keep `from`; the default span after it
    elif to is not None and to > 0:
        put(query, "from", max(to - default, 0), like)  # keep `to`
    else:
        put(query, "from", now - default, like)
        put(query, "to", now, like)


@schemathesis.hook
def map_case(context, case):
    if not positive(case) or not isinstance(case.query, dict):
        return case
    rule = (case.operation.definition.raw or {}).get("x-tayga-window")
    if rule is not None:
        mend_window(case.query, rule)
    low, high = as_int(case.query.get("min_duration_ns")), as_int(case.query.get("max_duration_ns"))
    if low is not None and high is not None and low > high:
        case.query["min_duration_ns"], case.query["max_duration_ns"] = (
            case.query["max_duration_ns"],
            case.query["min_duration_ns"],
        )
    return case


GRAMMAR = re.compile(r"^parameter `q`: at character \d+: ")


@schemathesis.hook
def filter_failure(context, failure, case, response):
    """Keep every failure but a valid request rejected for the grammar of `q`."""
    if getattr(failure, "code", None) != "ST202" or response.status_code != 400:
        return True
    try:
        error = json.loads(response.content)["error"]
    except (ValueError, KeyError, TypeError):
        return True
    return not (error.get("parameter") == "q" and GRAMMAR.match(error.get("message", "")))
