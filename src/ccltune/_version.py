"""ccltune's version: the lowest layer, so that any module (the environment record, a rule file's header, a
report's footer) can name it without importing the package's face (ccltune/__init__.py hands out the API)."""

__version__ = "0.1.0"
