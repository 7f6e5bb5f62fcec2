"""What a request body may hold, checked once and strictly, and said in its schema.

Numbers must be finite and in range, whole numbers are not coerced (2.0 is 2, as JSON
Schema says; "2" and true are refused), text must be valid UTF-8 without NUL, commands
are bounded, and a field the model does not know is refused with the closest known
name. Pydantic only (no web framework): the CLI's client builds its requests with these.
"""

import math
from typing import Annotated, Any, Literal

from pydantic import (
    BaseModel,
    BeforeValidator,
    ConfigDict,
    Field,
    ValidationInfo,
    field_validator,
    model_validator,
)

__all__ = [
    "ABSOLUTE_PATH",
    "MAX_ARGS",
    "MAX_COMMAND_BYTES",
    "MAX_SECONDS",
    "NO_NUL",
    "PATTERN_WORDS",
    "JobClassName",
    "LegacySubmitBody",
    "PolicyBody",
    "RequestBody",
    "SubmitBody",
    "Whole",
    "body_fields",
]

#: Most arguments, and bytes of all arguments, one command may hold (Linux's own
#: limit on a process's arguments is 128 KiB a string, about 2 MiB in all)
MAX_ARGS = 4096
MAX_COMMAND_BYTES = 128 * 1024
#: Longest estimate or checkpoint interval accepted: ten years
MAX_SECONDS = 10 * 365 * 86400.0


def _valid_text(value: str, field: str) -> str:
    """Valid UTF-8 text: a stored row that cannot be encoded is never accepted (NUL is
    refused by the service itself, for every face)."""
    try:
        value.encode("utf-8")
    except UnicodeEncodeError:
        raise ValueError(f"{field} must be valid UTF-8 text (no lone surrogates)") from None
    return value


class RequestBody(BaseModel):
    """Every request body: a field it does not know is refused (422, with the closest
    known name), never dropped: a mistyped ``estimate`` must not silently mean "none"."""

    model_config = ConfigDict(extra="forbid")


def body_fields(model: type[BaseModel]) -> list[str]:
    """The names a body of ``model`` may hold: each field's alias, and its own name."""
    names: list[str] = []
    for name, info in model.model_fields.items():
        if info.alias:
            names.append(info.alias)
        if info.alias is None or model.model_config.get("populate_by_name"):
            names.append(name)
    return names


def _whole(value: Any) -> Any:
    """2.0 is the whole number 2 (JSON Schema's ``integer`` says so: a client may
    serialise it either way); 2.5, "2" and true stay refused by strict validation."""
    if isinstance(value, float) and math.isfinite(value) and value.is_integer():
        return int(value)
    return value


#: A whole number: an integer, or a number with no fraction (see :func:`_whole`)
Whole = Annotated[int, BeforeValidator(_whole)]

#: A job's class as the API spells it (``ilucid.core.model.JobClass``'s values)
JobClassName = Literal["training", "inference", "best-effort"]

#: Text the service stores and hands to processes: no NUL (JSON Schema's own words)
NO_NUL = "^[^\\u0000]*$"
#: A job's working directory: an absolute path, no NUL
ABSOLUTE_PATH = "^/[^\\u0000]*$"
#: what each pattern means, in words (a 422 never shows a regex)
PATTERN_WORDS = {NO_NUL: "must not hold NUL", ABSOLUTE_PATH: "must be an absolute path"}


def _submit_schema(schema: dict[str, Any]) -> None:
    """What :class:`SubmitBody`'s validators refuse, said in its JSON schema, so that
    every request the schema allows is one the service takes (the cluster willing):
    the program is named, a gang states no ``gpus`` (it is nodes x gpus_per_node), and
    a share of a GPU (``gpu_milli`` < 1000) is one GPU, never a gang."""
    props = schema["properties"]
    command = props["command"]
    command["prefixItems"] = [{"type": "string", "minLength": 1, "pattern": NO_NUL}]
    for name in ("nodes", "gpus_per_node"):  # absent, never null
        props[name].pop("default", None)
    schema["dependentRequired"] = {"nodes": ["gpus_per_node"], "gpus_per_node": ["nodes"]}
    schema["allOf"] = [
        {
            "if": {"required": ["nodes"]},
            "then": {"not": {"required": ["gpus"]}, "properties": {"gpu_milli": {"const": 1000}}},
        },
        {
            "if": {"required": ["gpu_milli"], "properties": {"gpu_milli": {"maximum": 999}}},
            "then": {"properties": {"gpus": {"const": 1}}},
        },
    ]


class SubmitBody(RequestBody):
    """A submission, validated once, strictly: whole numbers are whole numbers, numbers
    are finite and in range, text is valid UTF-8 without NUL, and sizes are bounded.
    Every rule is in its schema (:func:`_submit_schema`); what only the cluster can
    tell (a GPU type it has, more GPUs than it holds) the service answers with 409."""

    command: list[Annotated[str, Field(pattern=NO_NUL)]] = Field(
        min_length=1, max_length=MAX_ARGS, description="program and arguments (no shell)"
    )
    # a gang first: ``gpus`` is checked against it
    nodes: Whole = Field(None, ge=1, le=4096, description="a gang: this many nodes...")  # type: ignore[assignment]
    gpus_per_node: Whole = Field(  # type: ignore[assignment]
        None, ge=1, le=1024, description="...with this many GPUs (both or neither)"
    )
    gpu_milli: Whole = Field(
        1000,
        ge=1,
        le=1000,
        description="a share of one GPU in thousandths (below 1000: gpus = 1, no gang)",
    )
    gpus: Whole = Field(1, ge=0, le=4096, description="GPUs (left out for a gang)")
    job_class: JobClassName = Field("training", alias="class")
    # at least 1 s: a statement is blended in log space (ilucid.core.stated_estimate)
    estimate_s: float | None = Field(None, ge=1, le=MAX_SECONDS, allow_inf_nan=False)
    checkpoint_s: float | None = Field(None, gt=0, le=MAX_SECONDS, allow_inf_nan=False)
    cloud: bool = Field(
        True, description="may burst to a paid pool when waiting costs more (false: on-prem only)"
    )
    cwd: str | None = Field(
        None, max_length=4096, pattern=ABSOLUTE_PATH, description="an absolute path"
    )
    name: str | None = Field(
        None, max_length=128, pattern=NO_NUL, description="a name to show beside the id"
    )
    priority: Whole = Field(
        0, ge=-100, le=100, description="higher first within a class; above 0 needs an admin"
    )
    gpu_type: str | None = Field(
        None, max_length=64, description="only GPUs of this type (a hard constraint)"
    )
    preferred_gpu_types: list[Annotated[str, Field(max_length=64)]] = Field(
        default_factory=list, max_length=16, description="GPU types to try first, best first"
    )
    gpu_memory_gb: float | None = Field(
        None, gt=0, le=4096, allow_inf_nan=False, description="GPU memory needed per GPU"
    )
    cpus: float | None = Field(None, gt=0, le=100000, allow_inf_nan=False)
    memory_gb: float | None = Field(None, gt=0, le=1 << 20, allow_inf_nan=False)
    # the bounds before the validator: after it, pydantic's schema would lose them
    max_retries: Annotated[int, Field(ge=0, le=100), BeforeValidator(_whole)] | None = Field(
        None,
        description="retries after a failed launch or a vanished process, with a backoff"
        " (default: the service's)",
    )

    model_config = ConfigDict(
        populate_by_name=True, strict=True, extra="forbid", json_schema_extra=_submit_schema
    )

    @property
    def gang(self) -> bool:
        return self.nodes is not None

    def gpu_count(self) -> int:
        """The GPUs asked for: a gang's nodes x gpus_per_node, else ``gpus``."""
        if self.nodes is not None and self.gpus_per_node is not None:
            return self.nodes * self.gpus_per_node
        return self.gpus

    @field_validator("command")
    @classmethod
    def _command(cls, value: list[str]) -> list[str]:
        for argument in value:
            _valid_text(argument, "command")
        if not value[0]:
            raise ValueError("the program must be named (command[0] is empty)")
        size = sum(len(a.encode("utf-8")) + 1 for a in value)
        if size > MAX_COMMAND_BYTES:
            raise ValueError(f"command holds {size:,} bytes; at most {MAX_COMMAND_BYTES:,}")
        return value

    @field_validator("gpus_per_node")
    @classmethod
    def _gang(cls, value: int, info: ValidationInfo) -> int:
        if info.data.get("nodes") is None:
            raise ValueError("comes with nodes (a gang of nodes x GPUs)")
        return value

    @field_validator("gpu_milli")
    @classmethod
    def _share(cls, value: int, info: ValidationInfo) -> int:
        if value < 1000 and info.data.get("nodes") is not None:
            raise ValueError("a share of one GPU is not a gang (leave nodes out)")
        return value

    @field_validator("gpus")
    @classmethod
    def _gpus(cls, value: int, info: ValidationInfo) -> int:
        if info.data.get("nodes") is not None:
            raise ValueError(
                "leave it out with nodes and gpus_per_node (a gang's GPUs are"
                " nodes x gpus_per_node)"
            )
        if info.data.get("gpu_milli", 1000) < 1000 and value != 1:
            raise ValueError("a share of a GPU (gpu_milli) is one GPU")
        return value

    @model_validator(mode="after")
    def _whole_gang(self) -> "SubmitBody":
        if self.nodes is not None and self.gpus_per_node is None:
            raise ValueError("nodes: comes with gpus_per_node (a gang of nodes x GPUs)")
        return self

    @field_validator("cwd")
    @classmethod
    def _cwd(cls, value: str | None) -> str | None:
        return None if value is None else _valid_text(value, "cwd")

    @field_validator("name", "gpu_type")
    @classmethod
    def _text(cls, value: str | None) -> str | None:
        return None if value is None else _valid_text(value, "name or gpu_type")

    @field_validator("preferred_gpu_types")
    @classmethod
    def _types(cls, value: list[str]) -> list[str]:
        for gpu_type in value:
            _valid_text(gpu_type, "preferred_gpu_types")
        return value


class LegacySubmitBody(SubmitBody):
    """A submission on the old, unversioned ``POST /jobs``: as before, a gang may also
    state ``gpus`` when it equals nodes x gpus_per_node."""

    @field_validator("gpus")
    @classmethod
    def _gpus(cls, value: int, info: ValidationInfo) -> int:
        nodes, per_node = info.data.get("nodes"), info.data.get("gpus_per_node")
        if nodes is not None and per_node is not None and value != nodes * per_node:
            raise ValueError(f"{value} is not nodes x gpus_per_node ({nodes} x {per_node})")
        if nodes is None and info.data.get("gpu_milli", 1000) < 1000 and value != 1:
            raise ValueError("a share of a GPU (gpu_milli) is one GPU")
        return value


def _live_profiles_enum(schema: dict[str, Any]) -> None:
    # read when the schema is made, as the route reads them (a site may register its own)
    from ilucid.core.policies import live_profiles

    schema["enum"] = list(live_profiles())


class PolicyBody(RequestBody):
    policy: str = Field(
        description="a live scheduling profile (GET /policy lists them)",
        json_schema_extra=_live_profiles_enum,
    )

    @field_validator("policy")
    @classmethod
    def _known(cls, value: str) -> str:
        from ilucid.core.policies import live_profiles

        allowed = live_profiles()
        if value not in allowed:
            raise ValueError(f"must be one of {', '.join(allowed)}")
        return value
