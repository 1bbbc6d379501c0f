# promsched's operator image: `promsched run`, as the Helm chart (charts/promsched) deploys it.
#   docker build -t REGISTRY/promsched:0.1.0 .
# The build stage installs the package and its runtime dependencies (pyproject.toml's `dependencies`,
# not the `test` extra) into a virtual environment; the final stage copies only that environment onto
# the same slim Python base, so no compiler, pip cache or source tree ships.
ARG PYTHON_IMAGE=python:3.11-slim-bookworm

FROM ${PYTHON_IMAGE} AS build
ENV PIP_NO_CACHE_DIR=1 \
    PIP_DISABLE_PIP_VERSION_CHECK=1
# No pip or setuptools inside the environment: the base image's pip installs into it.
RUN python -m venv --without-pip /opt/promsched
WORKDIR /src
COPY pyproject.toml README.md ./
COPY operator ./operator
RUN pip --python /opt/promsched/bin/python install .

FROM ${PYTHON_IMAGE}
LABEL org.opencontainers.image.title="promsched" \
      org.opencontainers.image.description="A load-aware Kubernetes scheduler driven by Prometheus node metrics" \
      org.opencontainers.image.licenses="Apache-2.0"
# The chart runs the container with a read-only root filesystem: no bytecode is written at run time
# (pip compiled it at build time).
ENV PATH=/opt/promsched/bin:$PATH \
    PYTHONDONTWRITEBYTECODE=1 \
    PYTHONUNBUFFERED=1 \
    PROMSCHED_LISTEN=0.0.0.0:8080
COPY --from=build /opt/promsched /opt/promsched
# A numeric UID, so the kubelet can verify runAsNonRoot without a passwd entry.
USER 65532:65532
EXPOSE 8080
ENTRYPOINT ["promsched", "run"]
