"""streamkm's test suite (a package, so modules in different folders may share a basename
and import the shared helpers as ``tests.helpers``)."""

import pytest

# Before anything imports them: plain ``assert`` in the helpers reports its operands.
pytest.register_assert_rewrite("tests.helpers")
