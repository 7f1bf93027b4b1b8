"""dpgate.toml: settings, each overridable by a DPGATE_<SECTION>_<KEY> environment variable."""

from __future__ import annotations

import os
import tomllib
from dataclasses import dataclass, field, fields, replace
from pathlib import Path
from typing import Any

import platformdirs

from mechanisms.names import Mechanism
from rewriter.policy.model import Policy


def default_data_dir() -> Path:
    return Path(platformdirs.user_data_dir("dpgate"))


@dataclass(frozen=True)
class ServerSettings:
    listen_host: str = "127.0.0.1"
    listen_port: int = 6432
    # Largest client message accepted; a bigger one closes that client's connection.
    max_message_size: int = 1 << 20
    auth_timeout: float = 30.0
    # Seconds an authenticated client may wait outside a transaction before it is
    # disconnected (57P05); 0 never disconnects, as PostgreSQL's idle_session_timeout.
    idle_timeout: float = 0.0
    # On SIGTERM/SIGINT: seconds running statements get to finish before every client is
    # disconnected (57P01).
    shutdown_grace: float = 10.0
    # PEM certificate (chain) and private key: with both, SSLRequest is answered 'S'.
    tls_cert: str = ""
    tls_key: str = ""
    # With a certificate configured, refuse password authentication over plain TCP (28000).
    # Without one it has no effect: every connection is then plain TCP.
    require_tls_for_password: bool = True
    # Sessions at once, in all and per analyst (53300 beyond). Each session holds one relay
    # connection to PostgreSQL: keep max_clients below PostgreSQL's max_connections minus
    # twice backend.pool_size (reader and post-processing pools), and
    # max_clients_per_analyst well below max_clients, so that one
    # analyst's flood leaves room for the others to log in.
    max_clients: int = 64
    max_clients_per_analyst: int = 16
    # The last sessions of max_clients go only to analysts with no session open, so that
    # several analysts flooding together still leave a new analyst room to log in.
    reserved_clients: int = 4
    # What one statement may ask of the analysis (limits.py): characters and tokens
    # (54000), nesting of parentheses and depth of expressions (54001), and seconds of
    # analysis (or calibration) before it is stopped (54000).
    max_statement_size: int = 128 * 1024
    max_statement_tokens: int = 10_000
    max_nesting: int = 200
    max_expression_depth: int = 400
    analysis_timeout: float = 5.0
    # Worker threads (of 4) one analyst's analyses, calibrations and releases may use at
    # once; the others' work takes the rest, round robin (engine/fair.py).
    analyses_per_analyst: int = 1
    # Bytes of statement text the plan cache may hold (least recently used go first).
    plan_cache_bytes: int = 64 << 20
    # HTTP health endpoint for a load balancer (GET /health: 200 or 503); 0 serves none.
    # Like metrics and the dashboard, on loopback unless configured otherwise.
    health_port: int = 0
    health_host: str = "127.0.0.1"
    # Operations (proxy/ops): Prometheus metrics and the data owner's dashboard on their
    # own HTTP ports (0: off), a JSON line per statement decision ("" off, "-" stdout),
    # and the ledger accounts (comma-separated) that may open the admin console database
    # "dpgate" and the dashboard. Those accounts may not query the data.
    metrics_host: str = "127.0.0.1"
    metrics_port: int = 0
    # Non-empty: /metrics (analysts' names and spend) answers only a request that shows
    # it, as a bearer token or as the password of HTTP basic authentication (any user).
    metrics_token: str = ""
    dashboard_host: str = "127.0.0.1"
    dashboard_port: int = 0
    audit_log: str = ""
    admin_users: str = ""


@dataclass(frozen=True)
class BackendSettings:
    # Role that reads private tables; used only for rewritten private aggregates.
    dsn: str = ""
    # Role for relayed catalog and session traffic; it should not be able to read
    # private tables. Empty: use `dsn` (weaker, the classifier is then the only guard).
    relay_dsn: str = ""
    pool_size: int = 4
    # Seconds a private aggregate may run on the backend (PostgreSQL's statement_timeout
    # on the reader connections): bounds how long a data-dependent plan can take, so
    # timing differences stay within it. Expiry is the generic 22000, charged.
    private_statement_timeout: float = 60.0
    # Private aggregates one analyst may run at once, of pool_size: the analyst's other
    # statements wait, and a freed connection goes round robin to the analysts waiting.
    private_statements_per_analyst: int = 2
    # Reader-seconds one analyst's private queries may use per minute on average (30: half
    # a connection busy all the time); an analyst may run ahead by a burst of
    # private_statements_per_analyst × private_statement_timeout, then its next private
    # query is refused (53000, uncharged) until the account refills. 0: no limit.
    reader_seconds_per_minute: float = 30.0


@dataclass(frozen=True)
class LedgerSettings:
    path: str = str(default_data_dir() / "ledger.sqlite3")
    # A postgresql:// URL: the ledger is kept there instead (shared by several proxies),
    # in its own schema; `path` is then unused.
    dsn: str = ""
    schema: str = "dpgate_ledger"


@dataclass(frozen=True)
class PrivacySettings:
    # ε charged per query unless the session says SET dp.epsilon.
    default_epsilon: float = 0.1
    # δ charged by a query that needs one (joins of private tables: smooth sensitivity;
    # GROUP BY with key selection), unless the session says SET dp.delta.
    default_delta: float = 1e-8
    # Noise of a session that does not SET dp.mechanism: shifted_laplace (the default: a
    # secret shift per analyst), laplace (no shift) or gaussian (costs delta; no private
    # joins).
    default_mechanism: str = Mechanism.SHIFTED_LAPLACE
    # The ε a session may SET per query. Below the floor each exact bit of a failed
    # defence would cost next to nothing, and calibration work grows as 1/ε.
    min_epsilon: float = 1e-3
    max_epsilon: float = 10.0
    # The δ a session may SET: below the floor the smooth-sensitivity scan grows as
    # ln(1/δ); above the ceiling a release may fail to be private with that probability.
    min_delta: float = 1e-20
    max_delta: float = 1e-3
    # Budget of `dpgate user add` when --epsilon is not given.
    default_budget: float = 1.0
    # The per-analyst location μ_u of shifted Laplace is drawn once from this interval, in units of
    # the noise scale b ("scale") or of the answer ("absolute"). [0, 0] is plain Laplace.
    shift_unit: str = "scale"
    shift_interval: tuple[float, float] = (0.5, 1.5)
    # Confidence of the accuracy bound in the NOTICE (0.95 gives a 95% bound).
    confidence: float = 0.95
    # Share of a SUM's (an AVG's sum's) ε spent choosing its clamping bounds inside the
    # declared ones from a noisy histogram of the values (mechanisms/approx_bounds.py);
    # 0 uses the declared bounds as they are.
    bounds_share: float = 0.2
    # Unit mode: the share of a count's ε spent choosing its τ from the query's own rows
    # (three quarters) and estimating how many units exceed it (one quarter); the rest
    # answers. 0 answers at the policy's max_contributions, as SET dp.max_contributions.
    bound_choice_share: float = 0.2
    # Share of a SUM's ε spent on a hidden noisy count of its values when the statement
    # has no COUNT or AVG of them: the SUM is NULL, as PostgreSQL's over no value, when
    # that count's released value is below 0.5.
    sum_count_share: float = 0.1  # rewriter/sensitivity/calibrate.py's SUM_COUNT_SHARE


@dataclass(frozen=True)
class Config:
    server: ServerSettings = field(default_factory=ServerSettings)
    backend: BackendSettings = field(default_factory=BackendSettings)
    ledger: LedgerSettings = field(default_factory=LedgerSettings)
    privacy: PrivacySettings = field(default_factory=PrivacySettings)
    policy: Policy = field(default_factory=Policy)

    def validate(self) -> Config:
        server = self.server
        if bool(server.tls_cert) != bool(server.tls_key):
            raise ValueError("server.tls_cert and server.tls_key must be set together")
        if not 0 < server.max_clients_per_analyst <= server.max_clients:
            raise ValueError("server.max_clients_per_analyst must be between 1 and "
                             "server.max_clients")
        if not 0 <= server.reserved_clients < server.max_clients:
            raise ValueError("server.reserved_clients must be between 0 and "
                             "server.max_clients - 1")
        if min(server.max_statement_size, server.max_statement_tokens, server.max_nesting,
               server.max_expression_depth, server.analyses_per_analyst) <= 0 or \
                server.analysis_timeout <= 0:
            raise ValueError("server.max_statement_size, max_statement_tokens, max_nesting, "
                             "max_expression_depth, analyses_per_analyst and "
                             "analysis_timeout must be positive")
        if server.idle_timeout < 0 or server.shutdown_grace < 0 or server.auth_timeout <= 0:
            raise ValueError("server.idle_timeout and server.shutdown_grace must be >= 0, "
                             "server.auth_timeout > 0")
        if not self.backend.reader_seconds_per_minute >= 0:
            raise ValueError("backend.reader_seconds_per_minute must be 0 or more")
        if not self.backend.private_statement_timeout > 0:
            raise ValueError("backend.private_statement_timeout must be positive")
        if not 0 < self.backend.private_statements_per_analyst:
            raise ValueError("backend.private_statements_per_analyst must be positive")
        privacy = self.privacy
        if privacy.shift_unit not in ("scale", "absolute"):
            raise ValueError("privacy.shift_unit must be 'scale' or 'absolute'")
        low, high = privacy.shift_interval
        if low > high:
            raise ValueError("privacy.shift_interval must be [low, high] with low <= high")
        if not 0 < privacy.min_epsilon <= privacy.default_epsilon <= privacy.max_epsilon:
            raise ValueError("privacy.default_epsilon must lie in [privacy.min_epsilon, "
                             "privacy.max_epsilon], and min_epsilon must be positive")
        if not 0 < privacy.min_delta <= privacy.default_delta <= privacy.max_delta < 1:
            raise ValueError("privacy.default_delta must lie in [privacy.min_delta, "
                             "privacy.max_delta], within (0, 1)")
        if privacy.default_mechanism not in tuple(Mechanism):
            raise ValueError("privacy.default_mechanism must be shifted_laplace, laplace or "
                             "gaussian")
        if not 0 < privacy.confidence < 1:
            raise ValueError("privacy.confidence must be between 0 and 1")
        if not 0 <= privacy.bounds_share < 1:
            raise ValueError("privacy.bounds_share must be at least 0 and below 1")
        if not 0 <= privacy.bound_choice_share < 1:
            raise ValueError("privacy.bound_choice_share must be at least 0 and below 1")
        if not 0 < privacy.sum_count_share < 1:
            raise ValueError("privacy.sum_count_share must be above 0 and below 1")
        return self


_SECTIONS = {
    "server": ServerSettings, "backend": BackendSettings,
    "ledger": LedgerSettings, "privacy": PrivacySettings,
}


def _coerce(value: Any, like: Any, name: str) -> Any:
    if isinstance(like, tuple):
        items = value.split(",") if isinstance(value, str) else list(value)
        return tuple(float(item) for item in items)
    if isinstance(like, bool):
        return value if isinstance(value, bool) else str(value).lower() in ("1", "true", "yes")
    try:
        return type(like)(value)
    except (TypeError, ValueError):
        raise ValueError(f"setting {name}: {value!r} is not a {type(like).__name__}") from None


def load_config(path: str | Path | None = None, environ: dict[str, str] | None = None) -> Config:
    """Read the TOML file (if any), then apply DPGATE_<SECTION>_<KEY> overrides."""
    environ = dict(os.environ if environ is None else environ)
    data: dict[str, Any] = {}
    if path is not None:
        with open(path, "rb") as handle:
            data = tomllib.load(handle)
    unknown = set(data) - set(_SECTIONS) - {"policy"}
    if unknown:
        raise ValueError(f"unknown section(s) in {path}: {', '.join(sorted(unknown))}")
    sections = {}
    for section, kind in _SECTIONS.items():
        settings = kind()
        given = dict(data.get(section, {}))
        names = {f.name for f in fields(kind)}
        if set(given) - names:
            raise ValueError(f"unknown setting(s) in [{section}]: {', '.join(set(given) - names)}")
        for name in names:
            env_name = f"DPGATE_{section}_{name}".upper()
            if env_name in environ:
                given[name] = environ[env_name]
            if name in given:
                given[name] = _coerce(given[name], getattr(settings, name), f"{section}.{name}")
        sections[section] = replace(settings, **given)
    base = Path(path).parent if path is not None else Path.cwd()
    # Certificate, audit log and ledger paths, like policy.file, are relative to the
    # configuration file, so a service started from another directory finds the same files
    # ("-" is standard output; `~` is the home directory).
    sections["server"] = replace(sections["server"], **{
        name: _beside(base, value) for name in ("tls_cert", "tls_key", "audit_log")
        if (value := getattr(sections["server"], name)) and value != "-"})
    sections["ledger"] = replace(sections["ledger"],
                                 path=_beside(base, sections["ledger"].path))
    policy_data = dict(data.get("policy", {}))
    policy_file = environ.get("DPGATE_POLICY_FILE", policy_data.pop("file", None))
    # row_level = true answers with row-level (FLEX) privacy even when the policy names a
    # privacy unit: the end-to-end tests compare zero-noise answers with PostgreSQL's,
    # which contribution bounding makes differ by design.
    row_level = _coerce(environ.get("DPGATE_POLICY_ROW_LEVEL", policy_data.pop("row_level", False)),
                        False, "policy.row_level")
    if policy_file:
        if policy_data.get("tables"):
            raise ValueError("[policy] names a file and lists tables: choose one")
        policy = load_policy_file(base / policy_file)
    else:
        policy = Policy.from_dict(policy_data)
    if row_level:
        policy = replace(policy, unit=None)
    return Config(policy=policy, **sections).validate()


def _beside(base: Path, value: str) -> str:
    """A path named in the configuration: absolute, under `~`, or relative to `base`."""
    return str(base / Path(value).expanduser())


def load_policy_file(path: str | Path) -> Policy:
    """A policy file: what dpgate.toml's [policy] holds, at the top level or under [policy]."""
    with open(path, "rb") as handle:
        data = tomllib.load(handle)
    return Policy.from_dict(data.get("policy", data))
