"""A small Kubernetes API client: credentials, requests built apart from sending, errors with Status."""
