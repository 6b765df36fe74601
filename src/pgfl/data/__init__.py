"""Federated data: the padded container, synthetic generators, real-data loaders, partitioning."""

from pgfl.data.datasets import classification_federated_data, load_dataset
from pgfl.data.federated import FederatedData
from pgfl.data.partition import partition
from pgfl.data.synthetic import client_schedule, logistic_data, regression_data

__all__ = [
    "FederatedData",
    "classification_federated_data",
    "client_schedule",
    "load_dataset",
    "logistic_data",
    "partition",
    "regression_data",
]
