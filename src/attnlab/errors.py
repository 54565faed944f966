"""User-facing errors: the CLI prints their message on one line and exits with their ``exit_code``."""


class AttnlabError(Exception):
    """Bad input (unknown preset or key, out-of-range value, unwritable output, ...): exit status 2."""

    exit_code = 2


class NonFiniteResultError(AttnlabError):
    """A run whose evaluated checks came out non-finite (NaN or infinite theory or simulation): nothing is written,
    exit status 1 (the input was valid; the run failed)."""

    exit_code = 1
