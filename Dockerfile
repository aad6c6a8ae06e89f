# syntax=docker/dockerfile:1
#
# One image for every hedgefs role: `namenode`, `datanode` and the CLI client. The role is the
# first argument (ENTRYPOINT is the `hedgefs` console script), so
#
#   docker run --rm hedgefs:local namenode --host 0.0.0.0 --port 8020 --data-dir /data
#
# docker-compose.yml builds this image and runs the NameNode, ten DataNodes and a client with it.
# tests/test_compose.py reads ENV, ENTRYPOINT and the HEALTHCHECK command below and runs them.
FROM python:3.11-slim-bookworm

ENV PYTHONDONTWRITEBYTECODE=1 \
    PYTHONUNBUFFERED=1 \
    PIP_NO_CACHE_DIR=1 \
    PIP_DISABLE_PIP_VERSION_CHECK=1 \
    PIP_ROOT_USER_ACTION=ignore

WORKDIR /src

# Dependencies first, exactly as pinned in pyproject.toml (read from it, so there is no second
# list to drift), in their own layer: editing the source does not reinstall grpcio and numpy.
COPY pyproject.toml ./
RUN python -c "import tomllib; print('\n'.join(tomllib.load(open('pyproject.toml', 'rb'))['project']['dependencies']))" \
        > /tmp/requirements.txt \
 && pip install -r /tmp/requirements.txt \
 && rm /tmp/requirements.txt

# Then hedgefs itself from the source tree (.dockerignore keeps .git, .venv, tests out).
COPY . .
RUN pip install --no-deps . \
 && pip check

# Unprivileged user; /data is where a server keeps its state (mount a volume there), /security
# a secure cluster's credentials (docker-compose.yml's security-* volumes: the directories exist,
# owned by this user, so an empty volume mounted on one is writable by it; /security/etcd is
# deploy/compose-ha-tls.yml's security-etcd).
RUN useradd --system --uid 10001 --user-group --create-home --home-dir /home/hedgefs \
        --shell /usr/sbin/nologin hedgefs \
 && mkdir -p /data /security/namenode /security/admin /security/etcd $(seq -f /security/dn%g 1 10) \
 && chown -R hedgefs:hedgefs /data /security
USER hedgefs
WORKDIR /home/hedgefs

# 8020: NameNode RPC, 9870: its status page; 9866: DataNode RPC, 9864: its /metrics (as HDFS).
EXPOSE 8020 9870 9866 9864

# Health: one real RPC to this container's own server, 3 s deadline (hedgefs/cli/healthcheck.py).
# HEDGEFS_HEALTH_PORT and HEDGEFS_HEALTH_RPC say which server this container runs; the defaults fit
# a NameNode, a DataNode sets 9866 and /hedgefs.DataNode/GetFaults. In a secure cluster the call is
# TLS with the server's own credential (HEDGEFS_SERVER_CREDENTIALS). Healthy only if the server's
# handler answered; nothing listening, a frozen or wedged process and the wrong server on that port
# are all unhealthy.
ENV HEDGEFS_HEALTH_PORT=8020 \
    HEDGEFS_HEALTH_RPC=/hedgefs.NameNode/Report
HEALTHCHECK --interval=10s --timeout=5s --start-period=30s --retries=3 \
    CMD ["python", "-m", "hedgefs.cli.healthcheck"]

ENTRYPOINT ["hedgefs"]
CMD ["--help"]
