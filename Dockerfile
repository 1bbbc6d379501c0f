# promsched's operator image: `promsched run`, as the Helm chart (charts/promsched) deploys it.
#   docker build -t REGISTRY/promsched:0.1.0 \
#     --build-arg REVISION="$(git rev-parse HEAD)" --build-arg SOURCE=https://REPOSITORY-URL .
# Without Docker, `make image` builds this file with buildah, on a Debian bookworm base made by mmdebstrap
# and passed as PYTHON_IMAGE (operator/promsched/sandbox/imaging.py).
# The build stage installs the runtime dependencies from requirements/runtime.txt (pyproject.toml's
# `dependencies`, locked by `make lock`; no extra), each file checked against its hash, and promsched
# itself built by the locked build backend, into a virtual environment; the final stage copies only that
# environment onto the same slim Python base, so no compiler, build tool, pip cache or source tree ships.
# The base, pinned by the digest of its multi-architecture index. Moving the tag or the digest is a
# change to review: `docker buildx imagetools inspect python:3.11-slim-bookworm` shows the current one,
# and `--build-arg PYTHON_IMAGE=...` builds on another.
ARG PYTHON_IMAGE=python:3.11.15-slim-bookworm@sha256:d29f48a31a8b408ed19272ca1e7b10ebae13b240a27e862d3d4217c528e2e0c3

FROM ${PYTHON_IMAGE} AS build
ENV PIP_NO_CACHE_DIR=1 \
    PIP_DISABLE_PIP_VERSION_CHECK=1
WORKDIR /src
COPY requirements ./requirements
# No pip or setuptools inside the environment: the base image's pip installs into it. Wheels only, so
# nothing is built with tools the lock does not name; without --no-deps pip also refuses a lock that
# misses a dependency.
RUN python -m venv --without-pip /opt/promsched
RUN pip --python /opt/promsched/bin/python install --require-hashes --only-binary :all: -r requirements/runtime.txt
# The build backend (pyproject.toml's [build-system]), locked the same way, in an environment that stays here.
RUN python -m venv /opt/build-tools
RUN /opt/build-tools/bin/pip install --require-hashes --only-binary :all: -r requirements/build.txt
COPY pyproject.toml README.md ./
COPY operator ./operator
RUN /opt/build-tools/bin/pip wheel --no-deps --no-build-isolation --wheel-dir /wheels .
RUN pip --python /opt/promsched/bin/python install --no-deps /wheels/promsched-*.whl
# The lock satisfies what promsched requires, or the build stops here.
RUN pip --python /opt/promsched/bin/python check

FROM ${PYTHON_IMAGE}
# OCI annotations: VERSION is pyproject.toml's version (a test keeps them equal); REVISION, the commit;
# SOURCE, the repository's URL.
ARG VERSION=0.1.0
ARG REVISION=
ARG SOURCE=
LABEL org.opencontainers.image.title="promsched" \
      org.opencontainers.image.description="A load-aware Kubernetes scheduler driven by Prometheus node metrics" \
      org.opencontainers.image.licenses="Apache-2.0" \
      org.opencontainers.image.version="${VERSION}" \
      org.opencontainers.image.revision="${REVISION}" \
      org.opencontainers.image.source="${SOURCE}"
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
