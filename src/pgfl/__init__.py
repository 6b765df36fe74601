"""pgfl: privacy-preserving graph federated learning."""

__version__ = "0.1.0"
