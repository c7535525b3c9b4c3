"""Checks of privacy parameters, shared by the sensitivity, mechanism and accounting modules."""

from __future__ import annotations

import math
import numbers
from typing import Any

from ..errors import ConfigError

__all__ = ["PrivacyWarning", "check_real", "check_positive", "check_delta", "check_rule", "check_kind",
           "SENSITIVITY_RULES", "ADJACENCIES", "MECHANISM_KINDS"]

SENSITIVITY_RULES = ("sound", "paper")
ADJACENCIES = ("value", "bus")
MECHANISM_KINDS = ("laplace", "gaussian", "staircase")


class PrivacyWarning(UserWarning):
    """A privacy parameter is outside the range where a guarantee is proven."""


# --------------------------------------------------------------------------- #
# parameter checks
# --------------------------------------------------------------------------- #


def check_real(name: str, value: Any) -> float:
    if isinstance(value, bool) or not isinstance(value, numbers.Real):
        raise ConfigError(f"{name} must be a real number, got {value!r}")
    value = float(value)
    if not math.isfinite(value):
        raise ConfigError(f"{name} must be finite, got {value!r}")
    return value


def check_positive(name: str, value: Any) -> float:
    value = check_real(name, value)
    if value <= 0.0:
        raise ConfigError(f"{name} must be > 0, got {value!r}")
    return value


def check_delta(name: str, value: Any) -> float:
    value = check_real(name, value)
    if not 0.0 < value < 1.0:
        raise ConfigError(f"{name} must lie in the open interval (0, 1), got {value!r}")
    return value


def check_rule(rule: Any) -> str:
    if rule not in SENSITIVITY_RULES:
        raise ConfigError(f"rule must be one of {SENSITIVITY_RULES}, got {rule!r}")
    return rule


def check_kind(kind: Any, name: str = "kind") -> str:
    if not isinstance(kind, str) or kind.lower() not in MECHANISM_KINDS:
        raise ConfigError(f"{name} must be one of {MECHANISM_KINDS}, got {kind!r}")
    return kind.lower()


