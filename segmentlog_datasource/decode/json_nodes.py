"""The columns a JSON Schema maps to, as the row-by-row decoder (json_schema.py) and the
compiled one's program (json_program.py) both take them: a Node per part of the schema,
and the Misfit a value that does not fit raises."""
import json
from dataclasses import dataclass
from typing import Any, Callable, Dict, List, Optional

import pyarrow as pa

KINDS = ("string", "boolean", "integer", "number", "date", "timestamp", "base64",
         "connect_days", "connect_millis", "text", "enum", "array", "object", "map", "union")


class Misfit(Exception):
    """A value that does not fit its column (caught per row; never escapes the module)."""

    def __init__(self, path: str, reason: str):
        self.reason = reason
        super().__init__(f"field {path or '<value>'}: {reason}")


def describe_value(value) -> str:
    if isinstance(value, bool):
        return f"the boolean {json.dumps(value)}"
    if isinstance(value, (int, float)):
        return f"the number {value!r}"
    if isinstance(value, str):
        shown = value if len(value) <= 40 else value[:37] + "..."
        return f"the string {shown!r}"
    if isinstance(value, list):
        return f"an array of {len(value)}"
    if isinstance(value, dict):
        return "an object"
    return "null"


NO_DEFAULT = object()


@dataclass
class Node:
    """The column of one part of a schema: its Arrow type, whether null fits, and what
    turns a non-null JSON value into what the Arrow type holds (raising Misfit)."""
    type: pa.DataType
    nullable: bool
    convert: Callable[[Any, str], Any]
    union: bool = False  # a struct of member0..: any writer type may fit one member
    text: bool = False  # schema-less: JSON text
    fields: Optional[Dict[str, "Node"]] = None  # a struct's, by name
    element: Optional["Node"] = None  # an array's items, a map's values
    # What `convert` does, for the compiled decoder (json_program.py), which mirrors it:
    # one of KINDS; an object's properties as (name, node, nullable, default, required),
    # default the schema's JSON value or NO_DEFAULT; a union's member nodes.
    kind: str = ""
    properties: Optional[List[tuple]] = None
    members: Optional[List["Node"]] = None

    def checked(self, nullable: Optional[bool] = None) -> Callable[[Any, str], Any]:
        """convert, with null passed through where the column takes it."""
        accepts_null = self.nullable if nullable is None else nullable
        convert = self.convert

        def convert_or_null(value, path):
            if value is None:
                if accepts_null:
                    return None
                raise Misfit(path, "null, and the column's schema requires a value")
            return convert(value, path)

        return convert_or_null
