# The one image behind every Think service in docker-compose.yml: `think api`, `think worker`
# and the one-shot `think migrate` differ only in their command.
FROM python:3.11-slim

ENV PYTHONDONTWRITEBYTECODE=1 \
    PYTHONUNBUFFERED=1 \
    PIP_NO_CACHE_DIR=1 \
    PIP_DISABLE_PIP_VERSION_CHECK=1

WORKDIR /app
# The runtime's exact versions first (requirements.lock, written by `make lock` from the
# virtualenv the tests ran against), in a layer of their own that a code change keeps.
COPY requirements.lock ./
RUN pip install -r requirements.lock
# Then Think itself, without resolving anything again (`--no-deps`): nothing unpinned enters.
# Only what the package needs: no .venv, .think data or tests end up in the image.
COPY pyproject.toml README.md think_launcher.py ./
COPY think ./think
COPY api ./api
COPY workers ./workers
COPY examples ./examples
RUN pip install --no-deps ".[otel]" && pip check

# Nothing in the container needs root; the services write nothing to disk.
RUN useradd --create-home --uid 10001 think
USER think

EXPOSE 8000
ENTRYPOINT ["think"]
CMD ["api", "--host", "0.0.0.0", "--port", "8000"]
