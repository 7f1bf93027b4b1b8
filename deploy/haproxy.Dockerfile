# HAProxy from Debian's own packages (the same haproxy the local test runs).
FROM debian:bookworm-slim
RUN apt-get update \
    && DEBIAN_FRONTEND=noninteractive apt-get install -y --no-install-recommends haproxy \
    && rm -rf /var/lib/apt/lists/*
COPY deploy/haproxy.cfg /etc/haproxy/haproxy.cfg
EXPOSE 6432
CMD ["haproxy", "-f", "/etc/haproxy/haproxy.cfg", "-db"]
