"""The only package that talks to PostgreSQL (psycopg) or reads sql/."""
