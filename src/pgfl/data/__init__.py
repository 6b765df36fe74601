"""Federated data: the padded container, synthetic generators, real-data loaders, partitioning."""

import importlib
from typing import Any

#: Public names by module, imported on first use (pandas and scipy only when real data is
#: loaded).
_LAZY = {
    "FederatedData": "pgfl.data.federated",
    "classification_federated_data": "pgfl.data.datasets",
    "load_dataset": "pgfl.data.datasets",
    "partition": "pgfl.data.partition",
    "client_schedule": "pgfl.data.synthetic",
    "logistic_data": "pgfl.data.synthetic",
    "regression_data": "pgfl.data.synthetic",
}


def __getattr__(name: str) -> Any:
    """Import a public name's module on first use (PEP 562)."""
    if name not in _LAZY:
        raise AttributeError(f"module 'pgfl.data' has no attribute {name!r}")
    value = getattr(importlib.import_module(_LAZY[name]), name)
    globals()[name] = value
    return value


__all__ = [
    "FederatedData",
    "classification_federated_data",
    "client_schedule",
    "load_dataset",
    "logistic_data",
    "partition",
    "regression_data",
]
