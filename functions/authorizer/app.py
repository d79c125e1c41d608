"""The REST API's token authorizer: API key → project (or admin) → IAM policy.

Raising ``Exception("Unauthorized")`` is API Gateway's contract for a 401
(answered with the UNAUTHORIZED gateway response, in our error shape).
"""

# First of all: no garbage collection until the first invocation has returned (cold_start.py).
from kaibo_core.runtime import cold_start  # isort: skip

cold_start.pause_collector()

from typing import Any

from aws_lambda_powertools.utilities.typing import LambdaContext

from kaibo_core.runtime import wiring
from kaibo_core.runtime.observability import log_failure, logger
from kaibo_core.services.authorization import AuthorizationService, policy_for


@cold_start.resume_collector_after_first_invocation
@logger.inject_lambda_context(log_event=False)
def lambda_handler(
    event: dict[str, Any],
    context: LambdaContext,  # noqa: ARG001
    service: AuthorizationService | None = None,
) -> dict[str, Any]:
    try:
        found = (service or wiring.authorization_service()).authenticate(event.get("authorizationToken"))
    except Exception as exc:  # API Gateway answers 500; the token never reaches a log line
        raise log_failure("authorization", exc) from None
    if found is None:
        logger.info("key refused")
        raise Exception("Unauthorized")
    logger.info("key accepted", extra={"keyId": found.key_id, "role": found.role})
    return policy_for(found, str(event.get("methodArn", "")))
