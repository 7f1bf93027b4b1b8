"""The released columns of a private aggregate: each output (a key, a noisy aggregate, a
choice of the exponential mechanism, or one computed from others) and the noisy parts
the aggregates share (an AVG is a sum and a count; the same SUM asked twice is one part).
"""

from __future__ import annotations

from dataclasses import dataclass, field, replace
from fractions import Fraction

from sqlglot import exp

from mechanisms.approx_bounds import bucket_edges

from ..analysis.arithmetic import TooCostly, refuse_long_numbers
from ..analysis.row_cost import COSTLY_HINT
from ..analysis.sources import Resolved
from ..errors import PROGRAM_LIMIT_EXCEEDED, Refusal, policy_refusal, unsupported
from ..plan import OutputColumn, OutputKind
from ..sql.nodes import default_name, unalias
from .aggregate_args import mark_total, with_clamped_columns
from .bounds import ValueBounds, bounded_expression, centred
from .choice import ChoiceSpec, choice_spec
from .keys import GroupKeys
from .rewrite import PartSpec
from .scope import Scope

# As arithmetic.py's MAX_DIGITS allows: four numeric values multiplied, not five.
MAX_PRODUCTS = 3
ONLY_AGGREGATES = "only aggregates of private tables are answered"
NO_AGGREGATE_REASON = "rows of a private table asked without an aggregate"
# Computed from released COUNT, SUM and SUM of squares (computed_sql.py's variance).
VARIANCES = (exp.Variance, exp.VariancePop, exp.Stddev, exp.StddevSamp, exp.StddevPop)
# Marks a SUM whose NULL another released count decides (a variance's sums: its count n).
COUNTED = "dpgate_counted"


@dataclass
class Released:
    scope: Scope
    keys: GroupKeys
    bounds: ValueBounds
    unit_mode: bool  # whose contributions are bounded: a unit's (else one row's, FLEX)
    outputs: list[OutputColumn] = field(default_factory=list)
    parts: list[PartSpec] = field(default_factory=list)
    choices: list[tuple[ChoiceSpec, Resolved]] = field(default_factory=list)
    # Per hidden aggregate output: the aggregate as written (a SUM sharing an AVG's part
    # has the SUM's type, not the AVG's).
    hidden_sources: dict[int, exp.Expression] = field(default_factory=dict)

    def output(self, projection: exp.Expression, index: int, hidden: bool = False
               ) -> OutputColumn | None:
        """The output of a bare key, aggregate or choice; None for an expression that is
        computed from released values (a visible one only)."""
        inner = unalias(projection)
        position = self.scope.position(projection)
        name = projection.alias if isinstance(projection, exp.Alias) else default_name(inner)
        bucket = self.keys.expression_index(inner)
        if bucket is not None:
            return OutputColumn(name, OutputKind.KEY, None, (bucket,), hidden)
        if isinstance(inner, exp.Column) and not isinstance(inner.this, exp.Star):
            key = self.keys.index(inner)
            if key is None:
                raise policy_refusal(
                    f"{ONLY_AGGREGATES}: output column {index + 1} "
                    f"({projection.sql(dialect='postgres')}) would reveal rows",
                    hint="Group by it (GROUP BY a column with a declared domain) or wrap it "
                    "in an aggregate such as count(…).", position=position,
                    reason=NO_AGGREGATE_REASON)
            return OutputColumn(name, OutputKind.KEY, None, (key,), hidden)
        if isinstance(inner, exp.Window):
            raise unsupported("window functions are not supported over private tables",
                              position=position)
        if isinstance(inner, (exp.Count, exp.Sum, exp.Avg)) or (
                isinstance(inner, exp.Filter) and
                isinstance(inner.this, (exp.Count, exp.Sum, exp.Avg))):
            return self.aggregate(inner, name, hidden, position)
        spec = choice_spec(inner, self.scope.offset)
        if spec is not None:
            resolved = self.scope.resolve(spec.column)
            self.scope.findings.group_columns |= resolved.bases  # its candidates are grouped
            self.choices.append((spec, resolved))
            return OutputColumn(name, OutputKind.CHOICE, spec.aggregate, (len(self.choices) - 1,),
                                hidden)
        if isinstance(inner, VARIANCES) and not hidden:
            return None  # from released COUNT, SUM and SUM of squares: see variance
        if isinstance(inner, exp.AggFunc):
            raise unsupported(
                f"{inner.sql_name()} is not supported: dpgate answers COUNT, "
                "COUNT(DISTINCT), SUM, AVG, MIN, MAX, median, percentile_cont, "
                "percentile_disc and mode", position=position)
        if not hidden:
            return None  # computed from released values: see computed_sql.py
        if inner.find(exp.AggFunc):
            raise unsupported(
                "arithmetic on a released aggregate is not supported here",
                hint="Select the aggregates themselves and compute with them in the client: "
                "it costs no privacy.", position=position)
        raise policy_refusal(
            f"{ONLY_AGGREGATES}: output column {index + 1} "
            f"({projection.sql(dialect='postgres')}) is not an aggregate",
            hint="Ask for an aggregate such as SELECT count(*) FROM … WHERE ….",
            position=position, reason=NO_AGGREGATE_REASON)

    def aggregate(self, node: exp.Expression, name: str, hidden: bool, position: int | None
                  ) -> OutputColumn:
        node = _without_filter(node, position)
        argument = node.this
        expression = isinstance(node, (exp.Sum, exp.Avg)) and bounded_expression(argument)
        if expression:
            # Total by construction: its columns are clamped to their bounds and the value
            # is computed in NUMERIC within the interval derived (aggregate_args.py); the
            # check below still reads its CASE conditions, which run as written. Its
            # numbers keep row_cost.py's bound: a long one would cost time on chosen rows.
            try:
                refuse_long_numbers(argument)
                if len(list(argument.find_all(exp.Mul))) > MAX_PRODUCTS:
                    raise TooCostly(f"at most {MAX_PRODUCTS + 1} factors are multiplied "
                                    "inside an aggregate: a product's digits grow with "
                                    "those of the values a row holds")
            except TooCostly as error:
                raise Refusal(PROGRAM_LIMIT_EXCEEDED, str(error), COSTLY_HINT,
                              self.scope.position(argument)) from None
            mark_total(argument)
        if not isinstance(argument, (exp.Star, exp.Distinct)):
            # The analysis's checks by type (arrays, a numeric meeting a float) besides
            # totality.py's walk, which knows no types; arithmetic is rewritten on this copy.
            self.scope.analyzer.check_row_expression(argument, self.scope.relation)
        if isinstance(node, exp.Count):
            return self._count(node, argument, name, hidden, position)
        bounds = self.bounds.of_aggregate(node, position)
        if expression:
            argument = with_clamped_columns(argument, self.bounds.columns(node.key.upper(),
                                                                          position),
                                            self.bounds.types)
            node = node.copy()  # summed with each column clamped first (aggregate_args.py)
            node.set("this", argument)
        lo, hi = bounds
        edges = self._edges(argument, bounds)
        if isinstance(node, exp.Sum):
            total = self._part("sum", node, max(abs(lo), abs(hi)), bounds, edges)
            return OutputColumn(name, OutputKind.NOISY, "sum", (total,), hidden, bounds)
        # AVG: the sum of x − m, m the bounds' midpoint, has sensitivity (hi − lo)/2 per
        # row instead of max(|lo|, |hi|); release.py adds m back after the division. With
        # bounds chosen at release, m is theirs and release.py centres the sum.
        centre = (lo + hi) / 2
        if edges is not None:
            total = self._part("sum", exp.Sum(this=argument.copy()), (hi - lo) / 2, bounds,
                               edges, centred=True)
        else:
            total = self._part("sum", exp.Sum(this=centred(argument, centre)), (hi - lo) / 2,
                               (lo - centre, hi - centre))
        count = self._part("count", exp.Count(this=argument.copy()), 1.0, None)
        return OutputColumn(name, OutputKind.NOISY, "avg", (total, count), hidden, bounds)

    def _count(self, node: exp.Expression, argument: exp.Expression, name: str, hidden: bool,
               position: int | None) -> OutputColumn:
        if isinstance(argument, exp.Distinct):
            if len(argument.expressions) != 1 or \
                    not isinstance(argument.expressions[0], exp.Column):
                raise unsupported("COUNT(DISTINCT …) takes one column", position=position)
            self.scope.resolve(argument.expressions[0])
            part = self._part("count", node, 1.0, None)
            return OutputColumn(name, OutputKind.NOISY, "count_distinct", (part,), hidden)
        # Whatever it counts, one row changes a count by at most one.
        if argument.find(exp.AggFunc, exp.Subquery, exp.Select, exp.Window):
            raise unsupported("COUNT takes *, a column, an expression of columns or "
                              "DISTINCT column", position=position)
        for column in argument.find_all(exp.Column):
            self.scope.resolve(column)
        part = self._part("count", node, 1.0, None)
        return OutputColumn(name, OutputKind.NOISY, "count", (part,), hidden)

    def _edges(self, argument: exp.Expression, bounds: tuple[float, float]
               ) -> tuple[Fraction, ...] | None:
        """The buckets of a sum whose clamping bounds are chosen from the data at release
        (mechanisms/approx_bounds.py): a plain column's, where the sensitivity does not
        depend on the data (unit mode, or no join of private tables)."""
        if not isinstance(argument, exp.Column) or \
                (not self.unit_mode and self.scope.relation.stability.depends_on_k):
            return None
        edges = bucket_edges(*bounds)
        return edges if len(edges) > 2 else None

    def _part(self, aggregate: str, node: exp.Expression, magnitude: float,
              bounds: tuple[float, float] | None,
              edges: tuple[Fraction, ...] | None = None, centred: bool = False) -> int:
        # The same aggregate asked twice (the SUM of a column in a statement and in its
        # ORDER BY) is noised once.
        spec = PartSpec(aggregate, node.copy(), magnitude, bounds, edges, centred)
        text = _part_text(spec)
        for index, existing in enumerate(self.parts):
            if _part_text(existing) == text:
                return index
        self.parts.append(spec)
        return len(self.parts) - 1

    def presence(self) -> None:
        """Give each SUM the noisy count of its non-NULL values that decides whether it is
        released as NULL (from a released value, never from the data): the
        statement's own COUNT or AVG of the same values where there is one, else a hidden
        count that takes a share of the SUM's ε (calibrate.part_epsilons)."""
        for index, output in enumerate(self.outputs):
            source = self.hidden_sources.get(index)
            if output.aggregate != "sum" or (source is not None and source.meta.get(COUNTED)):
                continue
            total = output.parts[0]
            asked = len(self.parts)
            count = self._part("count", exp.Count(this=self.parts[total].node.this.copy()),
                               1.0, None)
            if count >= asked:
                self.parts[count] = replace(self.parts[count], presence_of=total)
            self.outputs[index] = replace(output, present=count)

    def selection_part(self) -> int:
        """The noisy COUNT(*) that decides which groups pass the threshold."""
        for output in self.outputs:
            if output.aggregate == "count" and isinstance(
                    self.parts[output.parts[0]].node.this, exp.Star):
                return output.parts[0]
        self.outputs.append(self.aggregate(exp.Count(this=exp.Star()), "count", True, None))
        return self.outputs[-1].parts[0]

    def hidden_aggregate(self, node: exp.Expression) -> int:
        """An aggregate that HAVING or ORDER BY reads, released as a hidden output."""
        self.outputs.append(self.aggregate(node, default_name(node), True,
                                           self.scope.position(node)))
        self.hidden_sources[len(self.outputs) - 1] = node
        return len(self.outputs) - 1

    def hidden_key(self, column: exp.Expression) -> int:
        output = self.output(column, len(self.outputs), hidden=True)
        assert output is not None
        self.outputs.append(output)
        return len(self.outputs) - 1

    def hidden_bucket(self, node: exp.Expression) -> int | None:
        if self.keys.expression_index(node) is None:
            return None
        return self.hidden_key(node)

    def source(self, index: int, output: OutputColumn) -> exp.Expression:
        """An output as the statement asks for it, for PostgreSQL's type of it: the
        aggregate as written, not the part it shares (an AVG's sum is numeric, a SUM of
        integers bigint)."""
        if output.kind == "key":
            return self.keys.expressions[output.parts[0]] or self.keys.keys[output.parts[0]][1]
        if output.kind == "computed":
            return exp.cast(exp.Null(), "text")
        if index < len(self.scope.tree.expressions):
            return unalias(self.scope.tree.expressions[index])
        return self.hidden_sources.get(index) or self.parts[output.parts[0]].node


def _without_filter(node: exp.Expression, position: int | None) -> exp.Expression:
    """agg(x) FILTER (WHERE c) as agg(CASE WHEN c THEN x END), which PostgreSQL computes
    alike: a row the filter leaves out contributes NULL, which the aggregate skips."""
    if not isinstance(node, exp.Filter):
        return node
    aggregate = node.this.copy()
    argument = aggregate.this
    if isinstance(argument, exp.Distinct):
        raise unsupported("an aggregate of DISTINCT values with FILTER is not supported",
                          position=position)
    value = exp.Literal.number(1) if isinstance(argument, exp.Star) else argument
    aggregate.set("this", exp.Case(ifs=[exp.If(this=node.expression.this.copy(),
                                               true=value)]))
    return aggregate


def _part_text(part: PartSpec) -> str:
    argument = part.node.this
    centred = "centred " if part.centred else ""
    return f"{part.aggregate}:{centred}{argument.sql(dialect='postgres', normalize=True)}"
