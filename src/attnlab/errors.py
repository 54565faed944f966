"""User-facing errors: the CLI prints their message on one line and exits with status 2."""


class AttnlabError(Exception):
    """Bad input (unknown preset or key, out-of-range value, unwritable output, ...)."""
