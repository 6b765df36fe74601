"""Collection for the whole repository: skip what needs an optional extra that is absent.

The PyTorch adapter's doctests need ``torch`` (the extra ``pgfl[torch]``: ``make test``
installs it, a plain ``pip install -e '.[dev]'`` does not); its tests skip the same way
(``pytest.importorskip``). Kept beside ``tests/conftest.py`` (the fixtures) because
``collect_ignore`` is read from the conftest above the folder it names (``src/``).
"""

import importlib.util

collect_ignore = []
if importlib.util.find_spec("torch") is None:
    collect_ignore.append("src/pgfl/models/torch_adapter.py")
