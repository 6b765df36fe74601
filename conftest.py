"""Collection for the whole repository: skip what needs an optional extra that is absent.

The deployment (``pgfl[deploy]``: Flower, gRPC) and the PyTorch adapter's doctests
(``pgfl[torch]``) are skipped where they are not installed; ``make test`` installs every
extra, so CI collects and runs them (a plain ``pip install -e '.[dev]'`` does not). The
torch tests skip the same way (``pytest.importorskip``). Kept beside ``tests/conftest.py``
(the fixtures) because ``collect_ignore`` is read from the conftest above the folder it
names (``src/``).
"""

import importlib.util

collect_ignore = []
collect_ignore_glob = []
if importlib.util.find_spec("flwr") is None or importlib.util.find_spec("grpc") is None:
    collect_ignore_glob += ["src/pgfl/deploy/*", "tests/deploy/*"]
if importlib.util.find_spec("torch") is None:
    collect_ignore.append("src/pgfl/models/torch_adapter.py")
