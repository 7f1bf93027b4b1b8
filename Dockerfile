# dpgate: differential-privacy proxy for PostgreSQL.
FROM python:3.11-slim

ENV PYTHONDONTWRITEBYTECODE=1 \
    PYTHONUNBUFFERED=1 \
    PIP_NO_CACHE_DIR=1 \
    PIP_DISABLE_PIP_VERSION_CHECK=1

# Unprivileged runtime user; it owns /var/lib/dpgate so that a fresh named volume
# mounted there (the SQLite ledger) inherits that ownership.
RUN useradd --create-home --uid 10001 dpgate \
    && install -d -o dpgate -g dpgate /var/lib/dpgate /etc/dpgate

WORKDIR /opt/dpgate
COPY . .
RUN pip install .

USER dpgate
EXPOSE 6432
VOLUME ["/var/lib/dpgate"]
ENTRYPOINT ["dpgate"]
CMD ["serve", "--config", "/etc/dpgate/dpgate.toml"]
