"""ccltune: measure, diagnose, tune and validate GPU collective communication."""

__version__ = "0.1.0"
