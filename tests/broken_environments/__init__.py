"""Environments with one mistake each, for the bad-input table (ERRORS.md): the corridor of
``examples/custom_environment.py`` with one function replaced."""
