"""A minimal Superset configuration for trying dpgate: Superset's own metadata in a local
SQLite file (set SUPERSET_HOME to choose where), a secret key from the environment."""

import os

_HOME = os.environ.get("SUPERSET_HOME", os.path.expanduser("~/.superset"))
SECRET_KEY = os.environ.get("SUPERSET_SECRET_KEY", "change-me-to-a-long-random-string")
SQLALCHEMY_DATABASE_URI = "sqlite:///" + os.path.join(_HOME, "superset.db")
# dpgate answers each question once per analyst and charges it: Superset's own result
# cache keeps dashboards from asking again on every refresh (a repeated question is free
# in dpgate anyway, but a cached one never leaves Superset).
DATA_CACHE_CONFIG = {"CACHE_TYPE": "SimpleCache", "CACHE_DEFAULT_TIMEOUT": 86400}
FEATURE_FLAGS = {"ENABLE_TEMPLATE_PROCESSING": False}
WTF_CSRF_ENABLED = True
