"""template.yaml, read as data: the single source of truth for every local resource.

The local stack and the tests create their tables, find their handlers and build
their functions' environments from the SAM template, never from a second list, so
the emulator cannot drift from what is deployed.

- ``load_template`` parses the template with a YAML loader that understands
  CloudFormation's short-form tags (``!Ref X`` becomes ``{"Ref": "X"}``,
  ``!GetAtt A.B`` becomes ``{"Fn::GetAtt": ["A", "B"]}``, and so on).
- ``table_specs`` / ``create_tables``: each ``AWS::DynamoDB::Table`` as the
  keyword arguments of DynamoDB's ``CreateTable`` (what the API accepts; settings
  that only CloudFormation knows, such as point-in-time recovery, are dropped).
- ``function_specs``: each ``AWS::Serverless::Function`` with its code directory,
  handler, environment (Globals merged with its own, intrinsics unresolved) and
  its API routes; ``authorizer_function`` names the default authorizer's function.
- ``resolve_environment``: a function's environment with ``Ref`` / ``Fn::Sub`` /
  ``Fn::GetAtt`` resolved against the local resources and parameters; a variable naming an API
  Gateway resource (the usage plan, an API key) is empty: the local stack has no API Gateway.
"""

from __future__ import annotations

import re
from collections.abc import Callable, Iterator, Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING, Any, Final

# No types-PyYAML in the dev environment (yet): silence mypy either way.
import yaml  # type: ignore[import-untyped,unused-ignore]

if TYPE_CHECKING:
    from mypy_boto3_dynamodb import DynamoDBClient

REPO_ROOT: Final = Path(__file__).resolve().parents[2]
DEFAULT_TEMPLATE_PATH: Final = REPO_ROOT / "template.yaml"

TABLE_TYPE: Final = "AWS::DynamoDB::Table"
FUNCTION_TYPE: Final = "AWS::Serverless::Function"
API_TYPE: Final = "AWS::Serverless::Api"

#: Prefix of every table name the local stack creates: ``kaibo-<LogicalId>-<suffix>``.
TABLE_NAME_PREFIX: Final = "kaibo"

#: Values of the pseudo parameters when the caller does not give them.
DEFAULT_PSEUDO_PARAMETERS: Final[Mapping[str, str]] = {
    "AWS::AccountId": "123456789012",
    "AWS::Region": "us-east-1",
    "AWS::Partition": "aws",
    "AWS::URLSuffix": "amazonaws.com",
    "AWS::StackName": "kaibo",
    "AWS::StackId": "arn:aws:cloudformation:us-east-1:123456789012:stack/kaibo/local",
}

_TABLE_NAME_SUFFIX = re.compile(r"^[A-Za-z0-9_.-]{1,64}$")
_SUB_VARIABLE = re.compile(r"\$\{([^}]*)\}")


class TemplateError(ValueError):
    """The template does not have the shape this module reads (names the resource and property)."""


class UnresolvedReferenceError(TemplateError):
    """An environment value refers to something the caller did not provide."""


# --- Loading ---------------------------------------------------------------------------------------


class CloudFormationLoader(yaml.SafeLoader):  # type: ignore[misc,unused-ignore]
    """SafeLoader that reads CloudFormation's short-form tags as their long-form dicts.

    Like CloudFormation, it keeps unquoted dates as strings (``2010-09-09`` is not a ``date``).
    """


# A copy without the timestamp resolver: yaml.SafeLoader's own table stays untouched.
CloudFormationLoader.yaml_implicit_resolvers = {
    first: [(tag, regexp) for tag, regexp in resolvers if tag != "tag:yaml.org,2002:timestamp"]
    for first, resolvers in yaml.SafeLoader.yaml_implicit_resolvers.items()
}


#: Short-form tag → long-form key. ``!GetAtt A.B`` also becomes a list: ``["A", "B"]``.
INTRINSIC_TAGS: Final[Mapping[str, str]] = {
    "!Ref": "Ref",
    "!Condition": "Condition",
    "!GetAtt": "Fn::GetAtt",
    "!Sub": "Fn::Sub",
    "!If": "Fn::If",
    "!Join": "Fn::Join",
    "!Select": "Fn::Select",
    "!Split": "Fn::Split",
    "!Equals": "Fn::Equals",
    "!Not": "Fn::Not",
    "!And": "Fn::And",
    "!Or": "Fn::Or",
    "!FindInMap": "Fn::FindInMap",
    "!Base64": "Fn::Base64",
    "!Cidr": "Fn::Cidr",
    "!ImportValue": "Fn::ImportValue",
    "!GetAZs": "Fn::GetAZs",
}


def _construct_node(loader: CloudFormationLoader, node: Any) -> Any:
    if isinstance(node, yaml.ScalarNode):
        return loader.construct_scalar(node)
    if isinstance(node, yaml.SequenceNode):
        return loader.construct_sequence(node, deep=True)
    if isinstance(node, yaml.MappingNode):
        return loader.construct_mapping(node, deep=True)
    raise yaml.constructor.ConstructorError(None, None, f"unexpected node for {node.tag}", node.start_mark)


def _intrinsic_constructor(key: str) -> Callable[[CloudFormationLoader, Any], dict[str, Any]]:
    def construct(loader: CloudFormationLoader, node: Any) -> dict[str, Any]:
        value = _construct_node(loader, node)
        if key == "Fn::GetAtt" and isinstance(value, str):
            resource, dot, attribute = value.partition(".")
            if not dot:
                raise yaml.constructor.ConstructorError(
                    None, None, f"!GetAtt {value!r} is not of the form Resource.Attribute", node.start_mark
                )
            value = [resource, attribute]
        return {key: value}

    return construct


for _tag, _key in INTRINSIC_TAGS.items():
    CloudFormationLoader.add_constructor(_tag, _intrinsic_constructor(_key))


def parse_template(text: str) -> dict[str, Any]:
    """A template's text (YAML or JSON) as a dict, intrinsics in their long form."""
    document = yaml.load(text, Loader=CloudFormationLoader)  # noqa: S506 - a SafeLoader subclass
    if not isinstance(document, dict) or not isinstance(document.get("Resources"), dict):
        raise TemplateError("not a CloudFormation template: no Resources mapping")
    return document


def load_template(path: Path = DEFAULT_TEMPLATE_PATH) -> dict[str, Any]:
    """The SAM template at ``path`` (default: the repository's template.yaml)."""
    return parse_template(path.read_text(encoding="utf-8"))


def resources_of_type(
    template: Mapping[str, Any], resource_type: str
) -> Iterator[tuple[str, dict[str, Any]]]:
    """``(logical id, resource)`` of every resource of ``resource_type``, in template order."""
    for logical_id, resource in template["Resources"].items():
        if isinstance(resource, dict) and resource.get("Type") == resource_type:
            yield logical_id, resource


def is_intrinsic(value: Any) -> bool:
    """True for ``{"Ref": ...}``, ``{"Fn::...": ...}`` and ``{"Condition": ...}``."""
    if not isinstance(value, dict) or len(value) != 1:
        return False
    (key,) = value
    return key in ("Ref", "Condition") or str(key).startswith("Fn::")


def _contains_intrinsic(value: Any) -> bool:
    if is_intrinsic(value):
        return True
    if isinstance(value, dict):
        return any(_contains_intrinsic(v) for v in value.values())
    if isinstance(value, list):
        return any(_contains_intrinsic(v) for v in value)
    return False


# --- Tables ----------------------------------------------------------------------------------------


@dataclass(frozen=True)
class TableSpec:
    """One ``AWS::DynamoDB::Table`` as DynamoDB ``CreateTable`` arguments (``TableName`` included)."""

    logical_id: str
    create_table_kwargs: dict[str, Any]

    @property
    def table_name(self) -> str:
        return str(self.create_table_kwargs["TableName"])


#: CloudFormation table properties passed to CreateTable as they are.
_CREATE_TABLE_PROPERTIES: Final = (
    "AttributeDefinitions",
    "KeySchema",
    "BillingMode",
    "ProvisionedThroughput",
)
#: Index properties CreateTable accepts (CloudFormation adds e.g. ContributorInsightsSpecification).
_INDEX_PROPERTIES: Final = ("IndexName", "KeySchema", "Projection", "ProvisionedThroughput")


def table_name(logical_id: str, suffix: str) -> str:
    """The local name of a table: ``kaibo-<LogicalId>-<suffix>``."""
    if not _TABLE_NAME_SUFFIX.match(suffix):
        raise ValueError(f"table name suffix {suffix!r}: use 1-64 of letters, digits, '_', '.', '-'")
    return f"{TABLE_NAME_PREFIX}-{logical_id}-{suffix}"


def create_table_kwargs(logical_id: str, properties: Mapping[str, Any], name: str) -> dict[str, Any]:
    """CreateTable arguments from a table's CloudFormation Properties.

    Kept: key schema, attribute definitions, billing, provisioned throughput, secondary indexes
    (their CreateTable fields) and streams (``StreamViewType`` → ``StreamEnabled``). Dropped: what
    CreateTable does not take or the emulator does not need (PointInTimeRecoverySpecification,
    SSESpecification, TimeToLiveSpecification, Tags, ContributorInsights, Kinesis, ...).
    """
    if _contains_intrinsic(properties.get("KeySchema")) or _contains_intrinsic(
        properties.get("AttributeDefinitions")
    ):
        raise TemplateError(f"{logical_id}: KeySchema/AttributeDefinitions must be literal values")
    kwargs: dict[str, Any] = {"TableName": name}
    for prop in _CREATE_TABLE_PROPERTIES:
        if prop in properties:
            kwargs[prop] = properties[prop]
    for prop in ("GlobalSecondaryIndexes", "LocalSecondaryIndexes"):
        if properties.get(prop):
            kwargs[prop] = [
                {k: index[k] for k in _INDEX_PROPERTIES if k in index} for index in properties[prop]
            ]
    stream = properties.get("StreamSpecification")
    if isinstance(stream, Mapping) and "StreamViewType" in stream:
        kwargs["StreamSpecification"] = {"StreamEnabled": True, "StreamViewType": stream["StreamViewType"]}
    if _contains_intrinsic(kwargs):
        raise TemplateError(f"{logical_id}: table properties must be literal values (found an intrinsic)")
    return kwargs


def table_specs(template: Mapping[str, Any], suffix: str) -> list[TableSpec]:
    """Every DynamoDB table of the template, named ``kaibo-<LogicalId>-<suffix>``."""
    return [
        TableSpec(
            logical_id=logical_id,
            create_table_kwargs=create_table_kwargs(
                logical_id, resource.get("Properties", {}), table_name(logical_id, suffix)
            ),
        )
        for logical_id, resource in resources_of_type(template, TABLE_TYPE)
    ]


def time_to_live_attributes(template: Mapping[str, Any]) -> dict[str, str]:
    """Logical id → TTL attribute, for tables whose TimeToLiveSpecification is enabled."""
    found: dict[str, str] = {}
    for logical_id, resource in resources_of_type(template, TABLE_TYPE):
        ttl = resource.get("Properties", {}).get("TimeToLiveSpecification")
        if isinstance(ttl, Mapping) and ttl.get("Enabled") is True:
            found[logical_id] = str(ttl["AttributeName"])
    return found


def create_tables(
    dynamodb_client: DynamoDBClient, template: Mapping[str, Any], suffix: str
) -> dict[str, str]:
    """Create every table of the template (and its TTL setting); logical id → table name.

    Waits for nothing: the emulator creates tables at once.
    """
    ttl = time_to_live_attributes(template)
    names: dict[str, str] = {}
    for spec in table_specs(template, suffix):
        dynamodb_client.create_table(**spec.create_table_kwargs)
        if spec.logical_id in ttl:
            dynamodb_client.update_time_to_live(
                TableName=spec.table_name,
                TimeToLiveSpecification={"Enabled": True, "AttributeName": ttl[spec.logical_id]},
            )
        names[spec.logical_id] = spec.table_name
    return names


# --- Functions and routes --------------------------------------------------------------------------


@dataclass(frozen=True)
class RouteSpec:
    """One API route (an ``Api`` event of a function): ``method`` upper-case, ``path`` as in the template."""

    method: str
    path: str
    function_logical_id: str
    authorized: bool


@dataclass(frozen=True)
class FunctionSpec:
    """One ``AWS::Serverless::Function``.

    ``environment`` is Globals.Function's variables updated with the function's own, intrinsics
    unresolved (see ``resolve_environment``). ``qualified_module`` is the handler module's dotted
    name from the repository root (``functions.remember.app``), for importing it in-process;
    on Lambda the module is ``handler_module`` inside ``code_dir``.
    """

    logical_id: str
    code_dir: Path
    handler_module: str
    handler_name: str
    environment: dict[str, Any]
    routes: list[RouteSpec] = field(default_factory=list)
    qualified_module: str = ""
    timeout_seconds: float = 3.0  # Lambda's default when neither the function nor Globals sets one


def _globals_function(template: Mapping[str, Any]) -> Mapping[str, Any]:
    globals_section = template.get("Globals") or {}
    return globals_section.get("Function") or {}


def _variables(properties: Mapping[str, Any]) -> dict[str, Any]:
    return dict((properties.get("Environment") or {}).get("Variables") or {})


def function_property(template: Mapping[str, Any], logical_id: str, name: str) -> Any:
    """A function's effective property as SAM merges it: its own value, else Globals.Function's
    (None if neither); a list in both is Globals' followed by its own (SAM: lists are additive)."""
    properties = template["Resources"][logical_id].get("Properties", {})
    shared = _globals_function(template).get(name)
    if name in properties:
        own = properties[name]
        return [*shared, *own] if isinstance(own, list) and isinstance(shared, list) else own
    return shared


def _default_authorizers(template: Mapping[str, Any]) -> dict[str, str | None]:
    """Api logical id → its DefaultAuthorizer (None when it has none or it is NONE)."""
    defaults: dict[str, str | None] = {}
    for logical_id, resource in resources_of_type(template, API_TYPE):
        default = ((resource.get("Properties") or {}).get("Auth") or {}).get("DefaultAuthorizer")
        defaults[logical_id] = default if default and default != "NONE" else None
    return defaults


def _routes(template: Mapping[str, Any], logical_id: str, properties: Mapping[str, Any]) -> list[RouteSpec]:
    defaults = _default_authorizers(template)
    routes: list[RouteSpec] = []
    for event_name, event in (properties.get("Events") or {}).items():
        if not isinstance(event, Mapping) or event.get("Type") != "Api":
            continue
        props = event.get("Properties") or {}
        api_ref = props.get("RestApiId")
        if isinstance(api_ref, Mapping) and "Ref" in api_ref:
            api_default = defaults.get(str(api_ref["Ref"]))
        elif api_ref is None:
            api_default = None  # SAM's implicit API: no authorizer unless the event names one
        else:
            raise TemplateError(f"{logical_id}.Events.{event_name}: RestApiId must be a !Ref")
        authorizer = (props.get("Auth") or {}).get("Authorizer")
        authorized = authorizer != "NONE" if authorizer is not None else api_default is not None
        routes.append(
            RouteSpec(
                method=str(props["Method"]).upper(),
                path=str(props["Path"]),
                function_logical_id=logical_id,
                authorized=authorized,
            )
        )
    return routes


def _timeout_seconds(logical_id: str, timeout: Any) -> float | None:
    if timeout is None:
        return None
    if isinstance(timeout, bool) or not isinstance(timeout, int | float) or timeout <= 0:
        raise TemplateError(f"{logical_id}: Timeout must be a positive number of seconds, got {timeout!r}")
    return float(timeout)


def function_specs(template: Mapping[str, Any], root: Path = REPO_ROOT) -> list[FunctionSpec]:
    """Every ``AWS::Serverless::Function`` of the template; ``CodeUri`` is relative to ``root``."""
    global_env = _variables(_globals_function(template))
    specs: list[FunctionSpec] = []
    for logical_id, resource in resources_of_type(template, FUNCTION_TYPE):
        properties = resource.get("Properties") or {}
        code_uri = function_property(template, logical_id, "CodeUri")
        handler = function_property(template, logical_id, "Handler")
        if not isinstance(code_uri, str) or not isinstance(handler, str) or "." not in handler:
            raise TemplateError(f"{logical_id}: needs a local CodeUri and a Handler like module.function")
        module, _, name = handler.rpartition(".")
        timeout = _timeout_seconds(logical_id, function_property(template, logical_id, "Timeout"))
        code_dir = (root / code_uri).resolve()
        try:
            package = ".".join(code_dir.relative_to(root.resolve()).parts)
        except ValueError:
            package = ""
        specs.append(
            FunctionSpec(
                logical_id=logical_id,
                code_dir=code_dir,
                handler_module=module,
                handler_name=name,
                environment={**global_env, **_variables(properties)},
                routes=_routes(template, logical_id, properties),
                qualified_module=f"{package}.{module}" if package else module,
                **({} if timeout is None else {"timeout_seconds": timeout}),
            )
        )
    return specs


def routes(template: Mapping[str, Any]) -> list[RouteSpec]:
    """Every API route of every function."""
    return [route for spec in function_specs(template) for route in spec.routes]


def authorizer_function(template: Mapping[str, Any], api_logical_id: str | None = None) -> str:
    """Logical id of the function behind the default authorizer of ``api_logical_id``.

    Without ``api_logical_id`` the template must have exactly one Api with a default authorizer.
    """
    defaults = {api: name for api, name in _default_authorizers(template).items() if name is not None}
    if api_logical_id is None:
        if len(defaults) != 1:
            raise TemplateError(f"expected one Api with a DefaultAuthorizer, found {sorted(defaults)}")
        ((api_logical_id, authorizer_name),) = defaults.items()
    elif api_logical_id in defaults:
        authorizer_name = defaults[api_logical_id]
    else:
        raise TemplateError(f"{api_logical_id}: no such Api, or it has no DefaultAuthorizer")
    auth = template["Resources"][api_logical_id]["Properties"]["Auth"]
    arn = (auth.get("Authorizers") or {}).get(authorizer_name, {}).get("FunctionArn")
    if isinstance(arn, Mapping) and "Fn::GetAtt" in arn:
        resource, attribute = arn["Fn::GetAtt"]
        if attribute == "Arn":
            return str(resource)
    raise TemplateError(
        f"{api_logical_id}.Auth.Authorizers.{authorizer_name}.FunctionArn must be !GetAtt <Function>.Arn"
    )


# --- Environment -----------------------------------------------------------------------------------


def parameter_values(template: Mapping[str, Any], given: Mapping[str, str] | None = None) -> dict[str, str]:
    """Template parameter defaults and pseudo parameters, overridden by ``given``."""
    values: dict[str, str] = dict(DEFAULT_PSEUDO_PARAMETERS)
    for name, parameter in (template.get("Parameters") or {}).items():
        if isinstance(parameter, Mapping) and "Default" in parameter:
            values[name] = _scalar_text(parameter["Default"])
    values.update(given or {})
    return values


def condition_holds(template: Mapping[str, Any], name: str, parameters: Mapping[str, str]) -> bool:
    """Whether the template's condition ``name`` holds for ``parameters`` (``parameter_values``):
    ``Fn::Equals`` of parameters and literals, ``Fn::Not``, ``Fn::And``, ``Fn::Or``, ``Condition``."""
    conditions = template.get("Conditions") or {}
    if name not in conditions:
        raise TemplateError(f"no condition {name!r} in the template")
    return _holds(conditions[name], template, parameters, f"condition {name}")


def _holds(value: Any, template: Mapping[str, Any], parameters: Mapping[str, str], where: str) -> bool:
    if not is_intrinsic(value):
        raise TemplateError(f"{where}: {value!r} is not a condition function")
    ((key, argument),) = value.items()
    if key == "Condition":
        return condition_holds(template, str(argument), parameters)
    if key == "Fn::Equals":
        left, right = (_condition_operand(v, parameters, where) for v in argument)
        return left == right
    if key == "Fn::Not":
        (inner,) = argument
        return not _holds(inner, template, parameters, where)
    if key in ("Fn::And", "Fn::Or"):
        results = [_holds(inner, template, parameters, where) for inner in argument]
        return all(results) if key == "Fn::And" else any(results)
    raise TemplateError(f"{where}: {key} is not evaluated locally")


def _condition_operand(value: Any, parameters: Mapping[str, str], where: str) -> str:
    if isinstance(value, Mapping) and set(value) == {"Ref"}:
        name = str(value["Ref"])
        if name not in parameters:
            raise UnresolvedReferenceError(f"{where}: nothing provides the value of Ref {name!r}")
        return parameters[name]
    return _scalar_text(value)


def chosen(value: Any, template: Mapping[str, Any], parameters: Mapping[str, str]) -> Any:
    """``value``, or the branch its ``Fn::If`` takes for ``parameters`` (a setting that depends on a
    condition, such as a batch size)."""
    if isinstance(value, Mapping) and set(value) == {"Fn::If"}:
        name, when, otherwise = value["Fn::If"]
        branch = when if condition_holds(template, str(name), parameters) else otherwise
        return chosen(branch, template, parameters)
    return value


def _scalar_text(value: Any) -> str:
    """An environment variable's text, as CloudFormation writes literal values."""
    if isinstance(value, bool):
        return "true" if value else "false"
    if isinstance(value, int | float | str):
        return str(value)
    raise TemplateError(f"not a scalar value: {value!r}")


@dataclass(frozen=True)
class _Resolver:
    refs: Mapping[str, str]  # Ref name → value (physical ids of resources, parameters)
    region: str
    account: str
    partition: str

    def resolve(self, value: Any, where: str) -> str:
        if not is_intrinsic(value):
            return _scalar_text(value)
        ((key, argument),) = value.items()
        if key == "Ref":
            return self.ref(str(argument), where)
        if key == "Fn::GetAtt":
            resource, attribute = argument if isinstance(argument, list) else str(argument).split(".", 1)
            return self.get_att(str(resource), str(attribute), where)
        if key == "Fn::Sub":
            return self.sub(argument, where)
        if key == "Fn::Join":
            separator, parts = argument
            return str(separator).join(self.resolve(part, where) for part in parts)
        raise UnresolvedReferenceError(f"{where}: {key} is not supported in a local environment")

    def ref(self, name: str, where: str) -> str:
        if name in self.refs:
            return self.refs[name]
        raise UnresolvedReferenceError(f"{where}: nothing provides the value of Ref {name!r}")

    def get_att(self, resource: str, attribute: str, where: str) -> str:
        if attribute == "Arn" and resource in self.refs:
            # Only tables are ever given by name; their ARN is what DynamoDB would report.
            return f"arn:{self.partition}:dynamodb:{self.region}:{self.account}:table/{self.refs[resource]}"
        raise UnresolvedReferenceError(f"{where}: cannot resolve Fn::GetAtt {resource}.{attribute} locally")

    def sub(self, argument: Any, where: str) -> str:
        if isinstance(argument, list):
            text, variables = argument
            local = {name: self.resolve(v, where) for name, v in variables.items()}
        else:
            text, local = argument, {}

        def replace(match: re.Match[str]) -> str:
            name = match.group(1)
            if name.startswith("!"):
                return "${" + name[1:] + "}"
            if name in local:
                return local[name]
            if "." in name and not name.startswith("AWS::"):
                resource, attribute = name.split(".", 1)
                return self.get_att(resource, attribute, where)
            return self.ref(name, where)

        return _SUB_VARIABLE.sub(replace, str(text))


def api_gateway_resources(template: Mapping[str, Any]) -> frozenset[str]:
    """Logical ids of the template's API Gateway resources (the API, its usage plan and keys)."""
    return frozenset(
        logical_id
        for logical_id, resource in template["Resources"].items()
        if isinstance(resource, dict)
        and (
            resource.get("Type") == API_TYPE or str(resource.get("Type", "")).startswith("AWS::ApiGateway::")
        )
    )


def _names_any(value: Any, logical_ids: frozenset[str]) -> bool:
    """Whether ``value`` refers to one of ``logical_ids`` (``Ref``, ``Fn::GetAtt``, ``Fn::Sub``)."""
    if isinstance(value, dict):
        if set(value) == {"Ref"}:
            return str(value["Ref"]).split(".", 1)[0] in logical_ids
        if set(value) == {"Fn::GetAtt"}:
            target = value["Fn::GetAtt"]
            return str(target[0] if isinstance(target, list) else target.split(".", 1)[0]) in logical_ids
        if set(value) == {"Fn::Sub"}:
            argument = value["Fn::Sub"]
            text = argument[0] if isinstance(argument, list) else argument
            named = {name.split(".", 1)[0] for name in _SUB_VARIABLE.findall(str(text))}
            variables = argument[1] if isinstance(argument, list) else {}
            return bool(named & logical_ids) or _names_any(variables, logical_ids)
        return any(_names_any(inner, logical_ids) for inner in value.values())
    if isinstance(value, list):
        return any(_names_any(inner, logical_ids) for inner in value)
    return False


def resolve_environment(
    env: Mapping[str, Any],
    table_names: Mapping[str, str],
    parameters: Mapping[str, str],
    template: Mapping[str, Any] | None = None,
) -> dict[str, str]:
    """A function's environment with every value a string, intrinsics resolved.

    ``Ref`` resolves to ``table_names[logical id]`` (any resource whose ``Ref`` value the caller
    knows may be passed there, e.g. queue URLs), to ``parameters[name]``, or, for parameters not
    given, to the default in ``template`` (default: the repository's template.yaml) or a pseudo
    parameter (``AWS::Region`` ...). ``Fn::Sub``, ``Fn::Join`` and ``Fn::GetAtt <Table>.Arn`` are
    resolved too. A variable that names an API Gateway resource is ``""``: there is none locally (the
    functions then make no API Gateway call, docs/local-stack.md). Anything else raises
    ``UnresolvedReferenceError`` naming the variable.
    """
    template = load_template() if template is None else template
    values = parameter_values(template, parameters)
    absent = api_gateway_resources(template)
    resolver = _Resolver(
        refs={**values, **table_names},
        region=values["AWS::Region"],
        account=values["AWS::AccountId"],
        partition=values["AWS::Partition"],
    )
    return {
        name: "" if _names_any(value, absent) else resolver.resolve(value, f"environment variable {name}")
        for name, value in env.items()
    }
