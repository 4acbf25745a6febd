"""Ways to start a worker for an environment: a local subprocess, or a Docker container."""
