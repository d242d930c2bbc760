# One image for every service; compose.yaml picks the app with SOORMA_SERVICE_APP.
FROM python:3.11-slim
WORKDIR /app
ENV PYTHONDONTWRITEBYTECODE=1 PYTHONUNBUFFERED=1 LITELLM_LOCAL_MODEL_COST_MAP=True
COPY common ./common
COPY sdk ./sdk
COPY services ./services
RUN pip install --no-cache-dir ./common ./sdk ./services/servicekit ./services/event-service \
    ./services/memory-service ./services/registry-service ./services/tracker-service \
    ./services/gateway-a2a
EXPOSE 8080
# servicekit.server: uvicorn (httptools, no access log) with request heads bounded in size
# and reading time (SOORMA_MAX_HEADER_BYTES, SOORMA_HEADER_TIMEOUT_SECONDS).
CMD ["sh", "-c", "exec python -m servicekit.server \"$SOORMA_SERVICE_APP\" --host 0.0.0.0 --port 8080"]
