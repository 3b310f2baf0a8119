"""Exceptions a user can cause; the CLI turns them into one line and exit status 2."""


class ConfigError(ValueError):
    """A configuration, workload or input value is outside what the design supports.

    The message names the field, the value given and what would be valid.
    """


def bad(field: str, value, valid: str) -> ConfigError:
    """Build the standard message: ``field=value is invalid: valid``."""
    return ConfigError(f"{field}={value!r} is invalid: {valid}")
