# syntax=docker/dockerfile:1
# placement-webhook: the project's wheel is built in one stage and installed into a clean slim
# Python in the next, which holds no source tree, no build tools and no pip cache.

ARG PYTHON_IMAGE=python:3.11-slim

FROM ${PYTHON_IMAGE} AS builder
ENV PIP_DISABLE_PIP_VERSION_CHECK=1 \
    PIP_NO_CACHE_DIR=1
WORKDIR /src
# Wheels of exactly the locked dependencies, checked against the lock's hashes (hack/lock.sh
# refreshes it), so the image runs what CI tested; the locked build backend goes into this stage.
COPY requirements/runtime.txt requirements/runtime.txt
RUN pip wheel --require-hashes --no-deps --wheel-dir /wheels -r requirements/runtime.txt \
 && pip install --no-index --find-links=/wheels setuptools wheel
COPY pyproject.toml setup.cfg setup.py README.md ./
COPY webhook/ webhook/
# The project's own wheel, pure Python, built with that backend (tests/chart/test_image.py runs
# this very command).
RUN pip wheel --no-deps --no-build-isolation --wheel-dir /wheels .

FROM ${PYTHON_IMAGE}
LABEL org.opencontainers.image.title="placement-webhook" \
      org.opencontainers.image.description="Kubernetes mutating admission webhook that adds placement to workloads" \
      org.opencontainers.image.licenses="Apache-2.0"
# Nothing is written at run time: bytecode is compiled by pip at install time, logs go to stdout
# unbuffered, so the container runs with a read-only root filesystem.
ENV PYTHONDONTWRITEBYTECODE=1 \
    PYTHONUNBUFFERED=1 \
    PLACEMENT_WEBHOOK_POLICIES=/etc/placement-webhook/policies \
    PLACEMENT_WEBHOOK_TLS_CERT=/etc/placement-webhook/tls/tls.crt \
    PLACEMENT_WEBHOOK_TLS_KEY=/etc/placement-webhook/tls/tls.key
RUN --mount=type=bind,from=builder,source=/wheels,target=/wheels \
    pip install --no-cache-dir --disable-pip-version-check --no-index --find-links=/wheels placement-webhook \
 && groupadd --system --gid 65532 nonroot \
 && useradd --system --uid 65532 --gid 65532 --home-dir /nonexistent --no-create-home \
            --shell /usr/sbin/nologin nonroot \
 && mkdir -p /etc/placement-webhook/policies /etc/placement-webhook/tls
# Numeric, so that the kubelet can verify runAsNonRoot without reading /etc/passwd.
USER 65532:65532
WORKDIR /
EXPOSE 8443 8080
ENTRYPOINT ["placement-webhook", "serve"]
