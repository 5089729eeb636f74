"""Settings of the shared Django project: production settings (DEBUG off) and nothing the scenarios do not use.

No database unless the server was started for one of TechEmpower's database scenarios (NETARENA_POSTGRESQL_URL
set: the PostgreSQL of the run, through Django's ORM on psycopg 3, the world app); otherwise DATABASES is empty,
so django.db is never configured. /mongo
goes through PyMongo, as Django projects that use MongoDB without an ORM backend do. No sessions, auth,
messages or admin, whose middleware needs a database; the default middleware that does not is kept.
"""
import os
from urllib.parse import urlsplit

# Nothing is signed or kept between requests (no sessions, no forms), so the key protects nothing; Django
# refuses to start without one.
SECRET_KEY = "netarena-benchmark-no-secrets-here"
DEBUG = False
# The server is reached by whatever address a run gives it ({host}: 127.0.0.1, another loopback address, or
# the server host's address in a run across hosts), so any Host header is accepted.
ALLOWED_HOSTS = ["*"]

INSTALLED_APPS = ["netarena_django.world"]  # the World and Fortune models, the fortunes template
MIDDLEWARE = [
    "django.middleware.security.SecurityMiddleware",
    "django.middleware.common.CommonMiddleware",
    "django.middleware.csrf.CsrfViewMiddleware",
    "django.middleware.clickjacking.XFrameOptionsMiddleware",
]
DATABASES = {}
_postgresql_url = os.environ.get("NETARENA_POSTGRESQL_URL")  # netarena_shared.world.POSTGRESQL_URL_VAR
if _postgresql_url:
    # Django holds one persistent connection per process, never a pool: the manifest's pool ({db_pool}) must
    # say so, or the report would state a pool this server does not have.
    from netarena_shared.world import DB_POOL_VAR, pool_size

    if pool_size() != 1:
        raise RuntimeError(f"{DB_POOL_VAR}={pool_size()}: Django keeps one persistent connection per worker process "
                           "(CONN_MAX_AGE), so [database] pool must be 1 in the manifest")
    _url = urlsplit(_postgresql_url)
    DATABASES["default"] = {
        "ENGINE": "django.db.backends.postgresql",  # psycopg 3
        "NAME": _url.path.lstrip("/"),
        "USER": _url.username,
        "PASSWORD": _url.password or "",
        "HOST": _url.hostname,
        "PORT": str(_url.port or 5432),
        # One persistent connection per worker process (Django's own connection handling, no pool): a sync
        # worker serves one request at a time, and under ASGI the async ORM runs every query in the one thread
        # Django keeps for sync code, so neither ever needs a second.
        "CONN_MAX_AGE": None,
    }
TEMPLATES = [{"BACKEND": "django.template.backends.django.DjangoTemplates", "APP_DIRS": True}]
ROOT_URLCONF = "netarena_django.urls_sync"  # settings_asgi names the async one
USE_TZ = True
# Request errors are logged to stderr (Django's default with DEBUG off mails them to ADMINS, of which there are none).
LOGGING = {
    "version": 1,
    "disable_existing_loggers": False,
    "handlers": {"stderr": {"class": "logging.StreamHandler"}},
    "loggers": {"django": {"handlers": ["stderr"], "level": "ERROR"}},
}
