#!/usr/bin/env bash
# Apache Superset in a virtualenv of its own (it pins SQLAlchemy 1.4 and many packages:
# never install it into dpgate's). Usage: examples/superset/install.sh [VENV]
# (default /tmp/superset-venv). About 1.5 minutes with a nearby mirror; 9 on a busy 2-core machine.
set -euo pipefail
venv="${1:-/tmp/superset-venv}"
python3 -m venv "$venv"
# Superset 6.1.0 needs, beyond what pip resolves for it: Flask-Caching < 2.4 (2.5 fails at
# start: "_memoize_make_cache_key() got an unexpected keyword argument 'timeout'"),
# cachetools (imported by its AWS IAM engine spec, not declared), rich (imported by
# `superset db upgrade`, not declared) and the PostgreSQL driver for SQLAlchemy.
"$venv/bin/pip" install apache-superset "flask-caching<2.4" cachetools rich psycopg2-binary
echo "Superset installed: DPGATE_SUPERSET_PYTHON=$venv/bin/python"
