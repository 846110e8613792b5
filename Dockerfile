# guardhook: the admission webhook image. Build from the repository root:
#   docker build -t guardhook:dev .
# Runs as a non-root user on a read-only root filesystem: nothing is written at run time except
# gunicorn's worker heartbeat in /tmp (an emptyDir in manifests/base/deployment.yaml).

FROM python:3.11-slim AS build
ENV PIP_NO_CACHE_DIR=1 PIP_DISABLE_PIP_VERSION_CHECK=1
WORKDIR /src
COPY pyproject.toml README.md ./
COPY guardhook ./guardhook
RUN python -m venv /opt/guardhook \
 && /opt/guardhook/bin/pip install . \
 && /opt/guardhook/bin/python -m compileall -q /opt/guardhook

FROM python:3.11-slim
# Bytecode is compiled at build time; at run time Python must not try to write it.
ENV PATH=/opt/guardhook/bin:$PATH \
    PYTHONDONTWRITEBYTECODE=1 \
    PYTHONUNBUFFERED=1 \
    HOME=/tmp
RUN groupadd --system --gid 10001 guardhook \
 && useradd --system --uid 10001 --gid guardhook --home-dir /nonexistent --no-create-home \
      --shell /usr/sbin/nologin guardhook
COPY --from=build /opt/guardhook /opt/guardhook
USER 10001:10001
EXPOSE 8443
ENTRYPOINT ["guardhook"]
CMD ["serve", "--cert-dir", "/certs"]
