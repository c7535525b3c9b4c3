"""One conversion to JSON-ready values, used by every file powerdp writes."""

from __future__ import annotations

import math
import numbers
from typing import Any

import numpy as np

__all__ = ["jsonable"]


def jsonable(x: Any) -> Any:
    """Dicts (keys as strings), lists, tuples and arrays become lists of plain Python values;
    numpy scalars become int/float/bool; non-finite floats become None."""
    if isinstance(x, dict):
        return {str(k): jsonable(v) for k, v in x.items()}
    if isinstance(x, np.ndarray):
        return jsonable(x.tolist())
    if isinstance(x, (list, tuple)):
        return [jsonable(v) for v in x]
    if isinstance(x, (bool, np.bool_)):
        return bool(x)
    if isinstance(x, numbers.Integral):
        return int(x)
    if isinstance(x, numbers.Real):
        v = float(x)
        return v if math.isfinite(v) else None
    return x
