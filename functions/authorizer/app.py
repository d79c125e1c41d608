"""The REST API's token authorizer: API key → project (or admin) → IAM policy.

Raising ``Exception("Unauthorized")`` is API Gateway's contract for a 401
(answered with the UNAUTHORIZED gateway response, in our error shape).
"""

# First of all: no garbage collection until the first invocation has returned (cold_start.py).
from kaibo_core import cold_start  # isort: skip

cold_start.pause_collector()

from functools import lru_cache
from typing import Any

from aws_lambda_powertools.utilities.typing import LambdaContext

from kaibo_core.adapters.aws import dynamodb_client
from kaibo_core.adapters.dynamodb_projects import DynamoProjectStore
from kaibo_core.observability import logger
from kaibo_core.services.authorization import AuthorizationService, policy_for
from kaibo_core.settings import get_settings


@lru_cache(maxsize=1)
def service() -> AuthorizationService:
    settings = get_settings()
    return AuthorizationService(
        DynamoProjectStore(dynamodb_client(), settings.projects_table), settings.admin_key_hash
    )


@cold_start.resume_collector_after_first_invocation
@logger.inject_lambda_context(log_event=False)
def lambda_handler(event: dict[str, Any], context: LambdaContext) -> dict[str, Any]:  # noqa: ARG001
    found = service().authenticate(event.get("authorizationToken"))
    if found is None:
        logger.info("key refused")
        raise Exception("Unauthorized")
    logger.info("key accepted", extra={"keyId": found.key_id, "role": found.role})
    return policy_for(found, str(event.get("methodArn", "")))
