# One image for the API, the Celery worker and beat.
FROM python:3.11-slim

ENV PYTHONDONTWRITEBYTECODE=1 \
    PYTHONUNBUFFERED=1 \
    PIP_NO_CACHE_DIR=1 \
    PIP_DISABLE_PIP_VERSION_CHECK=1

WORKDIR /srv/threadline
RUN useradd --system --create-home --home-dir /home/threadline threadline

# Dependencies first (cached), pinned by the same lock the README's commands use.
COPY pyproject.toml constraints.txt README.md ./
COPY app/__init__.py app/__init__.py
RUN pip install -c constraints.txt -e .

COPY alembic.ini ./
COPY migrations ./migrations
COPY app ./app

USER threadline
EXPOSE 8000
CMD ["threadline", "serve", "--host", "0.0.0.0", "--port", "8000"]
