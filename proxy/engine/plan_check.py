"""Compute a private statement's constants and check it against PostgreSQL's plan.

Both happen on the reader connection before the charge: an error here is PostgreSQL's
own, costs nothing and cannot depend on private rows (the constants read public tables
only; EXPLAIN plans without reading rows). Verdicts are remembered per statement text and
parameter types where the check held for every value: the generic plan of a statement
with the client's parameters (generic_plan.py), or the plan of literals lifted out of the
text (literals.py); per parameter values on servers without generic plans.
"""

from __future__ import annotations

import json
from typing import Any

from rewriter.aggregate.groups import CELLS_HINT
from rewriter.analysis.constants import evaluation_sql, substitute
from rewriter.checks.plan_check import expected_scans, plan_failure, public_plan_failure
from rewriter.checks.plan_joins import JoinKeys, catalog_sql, renaming_failure
from rewriter.errors import Refusal
from rewriter.plan import PrivateAggregate
from rewriter.policy.model import Policy
from rewriter.sqlstate import SqlState

from ..pgwire.backend import BackendConnection, Parameters
from .generic_plan import generic_explain, has_generic_plans, type_names
from .literals import LiftedParameters
from .shapes import Remembered


class PlanChecker:
    """Shared by every session of one proxy: the statements PostgreSQL's plan confirmed."""

    def __init__(self, policy: Policy, size: int = 4096):
        self.policy = policy
        # Each bounded by entries and by 16 MiB of the text in their keys (shapes.py).
        self._checked: Remembered[tuple[str, bytes], bool] = Remembered(size)
        # The answers' shapes of lifted statements (session.py), and type names by OID.
        self.shapes: Remembered[tuple, Any] = Remembered(size)
        self.type_names: Remembered[tuple[int, ...], list[str]] = Remembered(size)

    async def prepare(self, backend: BackendConnection, plan: PrivateAggregate,
                      parameters: Parameters | None, check: bool = True) -> str:
        """The SQL to run: constants computed and written in, the plan checked.

        Describe passes check=False: it runs nothing private, and without the values of
        its parameters the statement cannot be planned yet. Raises Refusal, or
        BackendError for PostgreSQL's own errors.
        """
        sql, checks = plan.sql, plan.checks
        reads = checks.reads
        if checks.cells_sql is not None:
            (cells,) = (await backend.fetch(checks.cells_sql)).rows[0]
            if int(bytes(cells or b"0")) > self.policy.max_cells:
                raise Refusal(SqlState.INSUFFICIENT_PRIVILEGE,
                              "the histogram's public domain has more "
                              f"keys than the {self.policy.max_cells} cells the policy allows",
                              hint=CELLS_HINT)
        if plan.constants:
            evaluation = evaluation_sql(plan.constants)
            await self._check(backend, evaluation, None, lambda e: public_plan_failure(
                e, self.policy))
            rows = (await backend.fetch(evaluation)).rows
            if len(rows) != 1:
                raise Refusal(SqlState.CARDINALITY_VIOLATION,
                              "a value dpgate computes before the query "
                              f"must be one value, and this one has {len(rows)} rows",
                              hint="Set-returning functions are not allowed in conditions.")
            literals = [bytes(value or b"").decode() for value in rows[0]]
            sql = substitute(sql, plan.constants, literals, max(1, len(reads)))
            reads = tuple(substitute(read, plan.constants, literals) for read in reads)
        if not check:
            return sql
        if checks.join_keys is not None and checks.join_keys.renamed:
            await self._check_renamings(backend, checks.join_keys)
        scans = expected_scans(checks)
        # The verdict depends on the analysis too (its scans and columns), not only on
        # the SQL: a plan analysed with other metrics is checked again.
        analysis = repr((sorted(scans.items()), checks.windows, checks.join_keys))
        await self._check(backend, sql, parameters,
                          lambda e: plan_failure(e, scans, self.policy, checks.windows,
                                                 checks.join_keys), analysis)
        # Each read on its own too: the statement's allowance is pooled over its reads.
        once = expected_scans(checks, read=True)
        for read in reads:
            await self._check(backend, read, parameters, lambda e: plan_failure(
                e, once, self.policy, 0, checks.join_keys), analysis)
        return sql

    async def _check_renamings(self, backend: BackendConnection, keys: JoinKeys) -> None:
        """A column alias list read as PostgreSQL reads it: by the catalog's order."""
        catalog: dict[str, list[str]] = {}
        for table in {table for table, _, _ in keys.renamed}:
            rows = (await backend.fetch(catalog_sql(table))).rows
            catalog[table] = [bytes(name or b"").decode() for (name,) in rows]
        reason = renaming_failure(keys, catalog)
        if reason is not None:
            raise Refusal(SqlState.FEATURE_NOT_SUPPORTED, reason,
                          hint="dpgate checks every private query against PostgreSQL's plan; "
                          "drop the column alias list.")

    async def _check(self, backend: BackendConnection, sql: str,
                     parameters: Parameters | None, failure, analysis: str = "") -> None:
        generic = _generic(backend, parameters)
        values = repr(("generic", parameters.types)).encode() if generic and parameters \
            else _parameters_key(parameters)
        key = (sql, values + analysis.encode())
        if self._checked.get(key):
            return
        if generic and parameters is not None:
            names = self.type_names.get(parameters.types)
            if names is None:
                names = await type_names(backend, list(parameters.types))
                self.type_names.put(parameters.types, names)
            rows = await backend.fetch(generic_explain(sql, names))
        else:
            rows = await backend.fetch("EXPLAIN (VERBOSE, FORMAT JSON) " + sql, parameters)
        (plan_json,) = rows.rows[0]
        assert plan_json is not None  # EXPLAIN always answers
        reason = failure(json.loads(plan_json))
        if reason is not None:
            raise Refusal(SqlState.FEATURE_NOT_SUPPORTED, reason,
                          hint="dpgate checks every private query against PostgreSQL's plan; "
                          "ask a simpler query.")
        self._checked.put(key, True)


def _generic(backend: BackendConnection, parameters: Parameters | None) -> bool:
    """Whether the client's parameters are checked once for all their values, on the
    generic plan: every type known (Describe gave them) and a server that has one."""
    return (parameters is not None and not isinstance(parameters, LiftedParameters)
            and bool(parameters.types) and all(parameters.types)
            and has_generic_plans(backend))


def _parameters_key(parameters: Parameters | None) -> bytes:
    if parameters is None:
        return b""
    if isinstance(parameters, LiftedParameters):
        # Literals lifted out of WHERE comparisons (literals.py) are valid for their types
        # by construction, so binding them cannot fail; and a value there cannot add a
        # scan, a SubPlan or a row multiplier to PostgreSQL's plan (at most prune a
        # partition, a scan fewer). So the verdict holds for every value of these types.
        return repr(("lifted", parameters.types)).encode()
    return repr((parameters.types, parameters.formats, parameters.values)).encode()
