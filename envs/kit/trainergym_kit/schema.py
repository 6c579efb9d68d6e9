"""OpenAI function-tool schemas: how a family declares its `EVAL_TOOLS` without verifiers.

A family's `family.py` must not import verifiers, so it cannot read its own Toolset's schemas;
it states them with `function_tool`, and the family contract test checks they name the same
tools and parameters as the Toolset.
"""

from __future__ import annotations


def function_tool(name: str, description: str, **params: str) -> dict:
    """The OpenAI function-tool schema of one eval tool, as the trained model is shown it.

    Takes the advertised name (prefix included: `calc_add`), the description (the `@vf.tool`
    method's docstring) and each parameter, in order, with its JSON type (`a="integer"`,
    `ticket_id="string"`). Returns `{"type": "function", "function": {name, description,
    parameters}}` where every parameter is required and titled as pydantic titles a field of
    that name (`ticket_id` -> "Ticket Id"). No parameters gives an empty object schema.
    """
    return {
        "type": "function",
        "function": {
            "name": name,
            "description": description,
            "parameters": {
                "type": "object",
                "properties": {p: {"title": p.replace("_", " ").title(), "type": kind} for p, kind in params.items()},
                "required": list(params),
            },
        },
    }
