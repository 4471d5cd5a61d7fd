# Stand-ins for the compose stack's Prometheus and Alertmanager images, from
# Debian's packages, for hosts that reach no image registry
# (docker/build-images.sh --standins). The upstream images
# (docker/base-images.env) are the ones to run in production.
ARG BASE_IMAGE=docker.io/library/debian:bookworm-slim

FROM ${BASE_IMAGE} AS prometheus
ARG DEBIAN_FRONTEND=noninteractive
# policy-rc.d: the package's maintainer scripts must not start a service here.
RUN printf '#!/bin/sh\nexit 101\n' >/usr/sbin/policy-rc.d && chmod +x /usr/sbin/policy-rc.d \
 && apt-get update && apt-get install -y --no-install-recommends prometheus \
 && rm -rf /var/lib/apt/lists/* \
 && mkdir -p /prometheus && chown prometheus:prometheus /prometheus
USER prometheus
EXPOSE 9090
ENTRYPOINT ["/usr/bin/prometheus"]

FROM ${BASE_IMAGE} AS alertmanager
ARG DEBIAN_FRONTEND=noninteractive
RUN printf '#!/bin/sh\nexit 101\n' >/usr/sbin/policy-rc.d && chmod +x /usr/sbin/policy-rc.d \
 && apt-get update && apt-get install -y --no-install-recommends prometheus-alertmanager \
 && rm -rf /var/lib/apt/lists/* \
 && mkdir -p /alertmanager && chown prometheus:prometheus /alertmanager
USER prometheus
EXPOSE 9093
ENTRYPOINT ["/usr/bin/prometheus-alertmanager"]

# PostgreSQL 15 for the engine replicas (docker/compose.replicas.yaml). The
# entrypoint takes the upstream postgres image's POSTGRES_USER, POSTGRES_DB
# and POSTGRES_PASSWORD_FILE; the user postgres has the upstream uid 999 so
# that a data volume moves between the two images.
FROM ${BASE_IMAGE} AS postgres
ARG DEBIAN_FRONTEND=noninteractive
RUN printf '#!/bin/sh\nexit 101\n' >/usr/sbin/policy-rc.d && chmod +x /usr/sbin/policy-rc.d \
 && groupadd --system --gid 999 postgres \
 && useradd --system --uid 999 --gid postgres --home-dir /var/lib/postgresql --shell /bin/bash postgres \
 && apt-get update && apt-get install -y --no-install-recommends postgresql-15 \
 && rm -rf /var/lib/apt/lists/* \
 && rm -rf /var/lib/postgresql/15 /etc/postgresql/15 \
 && mkdir -p /var/lib/postgresql/data /run/postgresql \
 && chown postgres:postgres /var/lib/postgresql/data /run/postgresql && chmod 0700 /var/lib/postgresql/data
COPY docker/postgres/xpu-postgres-entrypoint /usr/local/bin/xpu-postgres-entrypoint
ENV PATH=/usr/lib/postgresql/15/bin:/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin \
    PGDATA=/var/lib/postgresql/data
VOLUME ["/var/lib/postgresql/data"]
EXPOSE 5432
STOPSIGNAL SIGINT
ENTRYPOINT ["/usr/local/bin/xpu-postgres-entrypoint"]
CMD ["postgres"]
