"""Deployment shells around the dreamer library: the scheduler daemon and Celery workers."""
