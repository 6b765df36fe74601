"""Privacy mechanisms and their accounting: secure aggregation, Shamir sharing, ε per iteration."""

from pgfl.privacy.secagg import SecAggAbort, SecAggConfig, SecureAggregation, quantized_mean

__all__ = ["SecAggAbort", "SecAggConfig", "SecureAggregation", "quantized_mean"]
