"""The account: checks over one run (check 1 decided-delivered first), the "It understood" row, pointers."""

from otel_footprint.account.account import account_for
from otel_footprint.account.input import (
    AccountInput,
    CarriedVerdict,
    CarriedVerdictError,
    Declarations,
    HeldState,
    RoutingVerdict,
    Score,
    ToolCall,
    held_state_of,
    leg_input,
)
from otel_footprint.account.jsonform import account_json_size, account_to_dict
from otel_footprint.account.model import (
    AccountResult,
    CheckResult,
    Chip,
    Line,
    Pointer,
    RoutingFacts,
    Signal,
    Summary,
)
from otel_footprint.account.understood import (
    delivery_complete,
    routing_verdict_of,
    verdict_to_carry,
)

__all__ = [
    "AccountInput",
    "AccountResult",
    "CarriedVerdict",
    "CarriedVerdictError",
    "CheckResult",
    "Chip",
    "Declarations",
    "HeldState",
    "Line",
    "Pointer",
    "RoutingFacts",
    "RoutingVerdict",
    "Score",
    "Signal",
    "Summary",
    "ToolCall",
    "account_for",
    "account_json_size",
    "account_to_dict",
    "delivery_complete",
    "held_state_of",
    "leg_input",
    "routing_verdict_of",
    "verdict_to_carry",
]
