"""Settings of the shared Django project: production settings (DEBUG off) and nothing the scenarios do not use.

No database: the catalog's pages touch none (DATABASES is empty, so django.db is never configured), and /mongo
goes through PyMongo, as Django projects that use MongoDB without an ORM backend do. No sessions, auth,
messages or admin, whose middleware needs a database; the default middleware that does not is kept.
"""
# Nothing is signed or kept between requests (no sessions, no forms), so the key protects nothing; Django
# refuses to start without one.
SECRET_KEY = "netarena-benchmark-no-secrets-here"
DEBUG = False
# The server is reached by whatever address a run gives it ({host}: 127.0.0.1, another loopback address, or
# the server host's address in a run across hosts), so any Host header is accepted.
ALLOWED_HOSTS = ["*"]

INSTALLED_APPS = []
MIDDLEWARE = [
    "django.middleware.security.SecurityMiddleware",
    "django.middleware.common.CommonMiddleware",
    "django.middleware.csrf.CsrfViewMiddleware",
    "django.middleware.clickjacking.XFrameOptionsMiddleware",
]
DATABASES = {}
ROOT_URLCONF = "netarena_django.urls_sync"  # settings_asgi names the async one
USE_TZ = True
# Request errors are logged to stderr (Django's default with DEBUG off mails them to ADMINS, of which there are none).
LOGGING = {
    "version": 1,
    "disable_existing_loggers": False,
    "handlers": {"stderr": {"class": "logging.StreamHandler"}},
    "loggers": {"django": {"handlers": ["stderr"], "level": "ERROR"}},
}
