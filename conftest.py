"""Collection: the deployment (pgfl[deploy]: Flower, gRPC) is skipped where it is not installed.

``make test`` installs every extra, so CI collects and runs it.
"""

import importlib.util

collect_ignore_glob = []
if importlib.util.find_spec("flwr") is None or importlib.util.find_spec("grpc") is None:
    collect_ignore_glob += ["src/pgfl/deploy/*", "tests/deploy/*"]
