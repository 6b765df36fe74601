"""Collection for the whole repository: skip what needs an optional extra that is absent.

The PyTorch adapter's doctests need ``torch`` (the extra ``pgfl[torch]``, which ``make
test`` does not install: see the Makefile); its tests skip the same way
(``pytest.importorskip``).
"""

import importlib.util

collect_ignore = []
if importlib.util.find_spec("torch") is None:
    collect_ignore.append("src/pgfl/models/torch_adapter.py")
