"""Tool specs from typed functions: schemas, descriptions, validation and sampled arguments."""

from __future__ import annotations

from typing import Literal

import jsonschema
import numpy as np
import pytest

from agentgym import ToolError, ToolSpec
from agentgym.tools import sample_arguments


def book(city: Literal["Paris", "Oslo"], nights: int, guests: list[str], budget: float | None = None, late: bool = False) -> str:
    """Book a hotel room.

    Longer text that is not part of the summary.

    Args:
        city: Where to stay.
        nights (int): How many nights,
            at least one.
        guests: Names of the guests.
        budget: Most to spend per night.
        late: Whether check-in is after 22:00.

    Returns:
        A confirmation.
    """
    return ""


SPEC = ToolSpec.from_function(book)


def test_schema_from_signature_and_docstring():
    assert SPEC.name == "book" and SPEC.description == "Book a hotel room."
    properties = SPEC.parameters["properties"]
    assert properties["city"] == {"enum": ["Paris", "Oslo"], "type": "string", "description": "Where to stay."}
    assert properties["nights"]["description"] == "How many nights, at least one."
    assert properties["guests"]["type"] == "array" and properties["late"]["default"] is False
    assert SPEC.parameters["required"] == ["city", "nights", "guests"]
    assert SPEC.parameter_names == ["city", "nights", "guests", "budget", "late"]
    jsonschema.Draft202012Validator.check_schema(SPEC.parameters)
    assert SPEC.to_openai()["function"]["parameters"] is SPEC.parameters


def test_validation_coerces_and_names_bad_arguments():
    assert SPEC.validate_arguments({"city": "Oslo", "nights": "2", "guests": ["a"]}) == {
        "city": "Oslo", "nights": 2, "guests": ["a"], "budget": None, "late": False,
    }
    with pytest.raises(ToolError, match="'city' input should be 'Paris' or 'Oslo'"):
        SPEC.validate_arguments({"city": "Rome", "nights": 1, "guests": []})
    with pytest.raises(ToolError, match="missing argument 'nights'.*unexpected argument 'pets'"):
        SPEC.validate_arguments({"city": "Oslo", "guests": [], "pets": 2})


@pytest.mark.parametrize("seed", range(20))
def test_sampled_arguments_fit_the_schema(seed):
    rng = np.random.default_rng(seed)
    jsonschema.validate(sample_arguments(SPEC, rng), SPEC.parameters)
    jsonschema.validate(sample_arguments(SPEC), SPEC.parameters)


def test_a_spec_from_a_json_schema_checks_arguments_against_it():
    schema = {"type": "object", "title": "Arguments", "required": ["issue_id"],
              "properties": {"issue_id": {"type": "integer", "title": "Issue Id"},
                             "state": {"enum": ["open", "closed"], "default": "open"}}}
    spec = ToolSpec.from_json_schema("close_issue", "Close an issue.", schema)
    assert "title" not in spec.parameters and "title" not in spec.parameters["properties"]["issue_id"]
    assert spec.validate_arguments({"issue_id": 3, "state": "closed"}) == {"issue_id": 3, "state": "closed"}
    with pytest.raises(ToolError, match=r"invalid arguments for close_issue: 'issue_id' is a required property"):
        spec.validate_arguments({})
    with pytest.raises(ToolError, match=r"'issue_id': 'x' is not of type 'integer'; 'state': 'shut' is not one of"):
        spec.validate_arguments({"issue_id": "x", "state": "shut"})
    with pytest.raises(jsonschema.SchemaError):
        ToolSpec.from_json_schema("broken", "", {"type": "object", "properties": {"a": {"type": "no-such-type"}}})
