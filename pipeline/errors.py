"""One base exception with narrow subclasses.

The CLI maps them to exit codes: :class:`UsageError` and :class:`ConfigError` exit 2,
:class:`InputRejected` exits 1 (the run went through, some input went to quarantine),
:class:`EngineError` and any exception that is not a :class:`FleetfaultError` exit 3
(an internal error: one line, the traceback in a log file).
"""

from __future__ import annotations


class FleetfaultError(Exception):
    """Base class of every error fleetfault raises on purpose."""

    exit_code = 2


class UsageError(FleetfaultError):
    """The command line or an argument is wrong: say what was passed and what is allowed."""


class ConfigError(FleetfaultError):
    """The config file is wrong. Carries every problem found, not just the first."""

    def __init__(self, problems: list[str], source: str = "config"):
        self.problems = list(problems)
        self.source = source
        head = f"{source}: {len(self.problems)} problem(s): "
        super().__init__(head + "; ".join(self.problems))


class SchemaError(FleetfaultError):
    """A table does not match its declared schema in ``pipeline/declared/tables/``."""


class EngineError(FleetfaultError):
    """A SQL step failed; names the step and shows the SQL. A bug, not the user's doing: exit 3."""

    exit_code = 3

    def __init__(self, step: str, sql: str, cause: BaseException):
        self.step, self.sql, self.cause = step, sql, cause
        super().__init__(f"SQL step {step!r} failed: {cause}\n--- SQL ---\n{sql.strip()}")


class DependencyMissing(FleetfaultError):
    """An optional extra is needed: the message says which ``pip install`` fixes it."""
