# One image for every role: `pgsched api`, `pgsched worker`, `pgsched migrate`.
FROM python:3.11-slim-bookworm

ENV PYTHONDONTWRITEBYTECODE=1 \
    PYTHONUNBUFFERED=1 \
    PIP_NO_CACHE_DIR=1 \
    PIP_DISABLE_PIP_VERSION_CHECK=1

RUN useradd --create-home --uid 10001 pgsched
WORKDIR /src
COPY pyproject.toml README.md alembic.ini ./
COPY app ./app
COPY sql ./sql
COPY migrations ./migrations
# A non-editable install: sql/ and migrations/ travel inside the package.
RUN pip install . && rm -rf /src

USER pgsched
WORKDIR /home/pgsched
# Workers stop claiming on SIGTERM and release what they could not finish in the
# grace period (PGSCHED_SHUTDOWN_GRACE_SECONDS); give Docker/Kubernetes longer than it.
STOPSIGNAL SIGTERM
ENTRYPOINT ["pgsched"]
CMD ["worker"]
