"""Base model shared by every DTO: snake_case on the wire, camelCase accepted on input."""

from __future__ import annotations

from pydantic import AliasGenerator, BaseModel, ConfigDict
from pydantic.alias_generators import to_camel


class BaseDTO(BaseModel):
    """Pydantic base for wire DTOs.

    Fields serialize under their Python (snake_case) names; inputs may use either
    the snake_case name or its camelCase alias.
    """

    model_config = ConfigDict(
        alias_generator=AliasGenerator(validation_alias=to_camel),
        validate_by_name=True,
        validate_by_alias=True,
        extra="ignore",
    )
