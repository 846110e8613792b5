"""The HTTP side: flask endpoints, the gunicorn server, TLS, certificates, caBundle, metrics."""
