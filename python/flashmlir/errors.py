"""Exceptions of the flashmlir package."""


class CompileError(RuntimeError):
    """The compiler refused the request; the message holds its diagnostics."""
