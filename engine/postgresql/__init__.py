"""Django's PostgreSQL backend with pooled connections checked as they leave the pool (base.py)."""
