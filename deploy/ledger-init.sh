#!/bin/sh
# Run once by the postgres image on first start (/docker-entrypoint-initdb.d): a database
# and a role for the shared dpgate ledger, apart from the data dpgate protects.
set -eu
psql -v ON_ERROR_STOP=1 --username "$POSTGRES_USER" --dbname postgres <<SQL
CREATE ROLE dpgate_ledger LOGIN PASSWORD '${DPGATE_LEDGER_PASSWORD:-dpgate_ledger}';
CREATE DATABASE dpgate_ledger OWNER dpgate_ledger;
SQL
