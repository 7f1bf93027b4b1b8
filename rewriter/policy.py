"""Which tables are private, which are public: the data owner's policy."""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any

CATALOG_SCHEMAS = frozenset({"pg_catalog", "information_schema"})


@dataclass(frozen=True)
class TablePolicy:
    schema: str
    name: str
    private: bool


@dataclass(frozen=True)
class Policy:
    """Tables keyed by "schema.name" (lower case).

    A table the policy does not name is private: a forgotten table must never leak.
    """

    tables: Mapping[str, TablePolicy] = field(default_factory=dict)
    default_schema: str = "public"

    def resolve(self, schema: str | None, name: str) -> tuple[str, str]:
        """The schema a table reference means: unqualified pg_* names are catalogs."""
        if schema:
            return schema.lower(), name.lower()
        if name.lower().startswith("pg_"):
            return "pg_catalog", name.lower()
        return self.default_schema, name.lower()

    def is_catalog(self, schema: str | None, name: str) -> bool:
        return self.resolve(schema, name)[0] in CATALOG_SCHEMAS

    def is_private(self, schema: str | None, name: str) -> bool:
        resolved = self.resolve(schema, name)
        if resolved[0] in CATALOG_SCHEMAS:
            return False
        table = self.tables.get(".".join(resolved))
        return table is None or table.private

    @classmethod
    def from_dict(cls, data: Mapping[str, Any]) -> Policy:
        """Build from the `[policy]` TOML table: `[policy.tables.NAME] private = true|false`."""
        default_schema = str(data.get("default_schema", "public")).lower()
        tables: dict[str, TablePolicy] = {}
        for key, spec in dict(data.get("tables", {})).items():
            schema, _, name = key.lower().rpartition(".")
            schema = schema or default_schema
            if "private" not in spec:
                raise ValueError(f"policy for table {key!r} must say private = true or false")
            tables[f"{schema}.{name}"] = TablePolicy(schema, name, bool(spec["private"]))
        return cls(tables=tables, default_schema=default_schema)
