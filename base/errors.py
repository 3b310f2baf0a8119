"""Exceptions a user can cause (the CLI turns them into one line and exit status 2), and the
hardware's error codes (the status register's ERROR field; docs/isa.md)."""

from enum import IntEnum


class ConfigError(ValueError):
    """A configuration, workload or input value is outside what the design supports.

    The message names the field, the value given and what would be valid.
    """


def bad(field: str, value, valid: str) -> ConfigError:
    """Build the standard message: ``field=value is invalid: valid``."""
    return ConfigError(f"{field}={value!r} is invalid: {valid}")


class ErrorCode(IntEnum):
    """Values of the status register's error field (docs/registers.md)."""

    NONE = 0
    ILLEGAL_OPCODE = 1
    RESERVED_BITS = 2
    FIELD_RANGE = 3
    TOKEN_OVERFLOW = 4
    TOKEN_UNDERFLOW = 5
    ADDRESS_RANGE = 6
    AXI_READ = 7
    AXI_WRITE = 8
    PROGRAM_OVERRUN = 9
    TIMEOUT = 10
    ABORTED = 11
    REGION_OVERLAP = 12
    NO_WRITE_WINDOW = 13
    NO_KV_WINDOW = 14
    PART_ORDER = 15
