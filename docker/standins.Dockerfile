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
