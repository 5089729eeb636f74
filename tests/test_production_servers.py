"""No contestant runs a development server: each start command is the production server its framework
documents, not `flask run`, Django's runserver, `fastapi dev`, `sbt run`, a --reload watcher or the like.

Three checks on every manifest: its start commands (start.command and echo_command) against DEV_COMMANDS,
its start environment against DEV_ENV, and the source files it runs (its own folder and the folders beside it
that its start fields name, `{dir}/../NAME` or `../NAME`) against DEV_SOURCE. Each list says why a pattern is a
development server; the tests at the end hold every pattern to a real example, so none is dead.
"""

import re
import tomllib
from pathlib import Path

import pytest

REPO = Path(__file__).resolve().parents[1]
CONTESTANTS = REPO / "contestants"
NAMES = sorted(p.parent.name for p in CONTESTANTS.glob("*/contestant.toml"))

# (program, then a word anywhere after it in the same command) -> why it is a development server. A program
# matches a word that is its name or ends with /name ({env_dir}/venv/bin/uvicorn); "python -m flask run"
# matches ("flask", "run") too. A word of None: the program itself is a development tool.
DEV_COMMANDS = {
    ("flask", "run"): "Flask's development server (Werkzeug); Flask's docs: 'do not use it in production'",
    ("manage.py", "runserver"): "Django's development server; Django's docs: 'DO NOT USE THIS SERVER IN A PRODUCTION SETTING'",
    ("django-admin", "runserver"): "Django's development server",
    ("fastapi", "dev"): "fastapi dev runs uvicorn with --reload on localhost, for development",
    ("uvicorn", "--reload"): "uvicorn's auto-reload watches files and runs one process, for development",
    ("gunicorn", "--reload"): "gunicorn's --reload restarts workers on code changes, for development",
    ("granian", "--reload"): "Granian's --reload watches files, for development",
    ("hypercorn", "--reload"): "Hypercorn's --reload watches files, for development",
    ("sanic", "--dev"): "Sanic's development mode (debug + auto-reload)",
    ("sanic", "--debug"): "Sanic's debug mode",
    ("sanic", "--reload"): "Sanic's auto-reload",
    ("litestar", "--reload"): "litestar run --reload watches files, for development",
    ("sbt", "run"): "sbt run is Play's development mode (recompiles on request); production is the staged app",
    ("sbt", "~run"): "sbt ~run is Play's development mode with file watching",
    ("sbt-launch.jar", "run"): "sbt run (through the launcher jar) is Play's development mode",
    ("mvn", "exec:java"): "runs the classes inside Maven's JVM, not the packaged application",
    ("mvn", "spring-boot:run"): "Spring Boot's development run from Maven, not the packaged jar",
    ("gradle", "bootRun"): "Spring Boot's development run from Gradle, not the packaged jar",
    ("go", "run"): "go run compiles into a temporary folder on every start; production runs the built binary",
    ("cargo", "run"): "cargo run builds on start (debug profile unless told); production runs the built binary",
    ("node", "--watch"): "node --watch restarts on file changes, for development",
    ("bun", "--watch"): "bun --watch restarts on file changes, for development",
    ("bun", "--hot"): "bun --hot reloads modules in place, for development",
    ("deno", "--watch"): "deno --watch restarts on file changes, for development",
    ("nodemon", None): "nodemon restarts on file changes, for development",
    ("ts-node-dev", None): "ts-node-dev restarts on file changes, for development",
    ("tsx", "watch"): "tsx watch restarts on file changes, for development",
}

# variable -> (a pattern of values that turns development mode on, why).
DEV_ENV = {
    "FLASK_DEBUG": (r"^(1|true|yes|on)$", "Flask's debug mode (reloader and interactive debugger)"),
    "FLASK_ENV": (r"^development$", "Flask's development environment"),
    "NODE_ENV": (r"^development$", "Express and other Node frameworks skip production caching in development"),
    "UVICORN_RELOAD": (r"^(1|true|yes|on)$", "uvicorn's auto-reload"),
    "GRANIAN_RELOAD": (r"^(1|true|yes|on)$", "Granian's auto-reload"),
    "DJANGO_DEBUG": (r"^(1|true|yes|on)$", "Django's DEBUG mode (settings read from the environment)"),
}

# A pattern in a source file the contestant runs -> why it is development mode.
DEV_SOURCE = {
    r"\bdebug\s*=\s*True\b": "a framework's debug mode (Flask, Sanic, Starlette, Litestar: tracebacks to clients, reloaders)",
    r"\b(?:auto_reload|use_reloader|reload)\s*=\s*True\b": "an auto-reloader, for development",
    r"^\s*DEBUG\s*=\s*True\b": "Django's DEBUG setting, which Django's deployment checklist says must be off in production",
    r"\brun_simple\s*\(": "Werkzeug's development server",
    r"\bwsgiref\.simple_server\b|\bfrom\s+wsgiref\.simple_server\b": "the standard library's reference WSGI server, "
                                                                     "not meant for production",
}
SOURCE_SUFFIXES = {".py", ".js", ".mjs", ".cjs", ".ts", ".go", ".rs", ".java", ".scala", ".rb", ".erl", ".conf", ".sbt"}
SKIPPED_FOLDERS = {"node_modules", "target", "__pycache__", ".git"}
SIBLING = re.compile(r"(?:\{dir\}/)?\.\./([A-Za-z0-9_.-]+)")  # {dir}/../NAME or ../NAME


def _is_program(word, program):
    return word == program or word.endswith("/" + program)


def dev_command_matches(argv):
    """The DEV_COMMANDS entries (program, word) that `argv` matches."""
    return [(program, later) for program, later in DEV_COMMANDS
            if any(_is_program(word, program) and (later is None or later in argv[i + 1:])
                   for i, word in enumerate(argv))]


def dev_command_problems(argv):
    return [f"{program}{' ' + later if later else ''}: {DEV_COMMANDS[program, later]}"
            for program, later in dev_command_matches(argv)]


def dev_env_problems(env):
    return [f"{var}={env[var]}: {why}" for var, (pattern, why) in DEV_ENV.items()
            if var in env and re.match(pattern, str(env[var]).strip(), re.IGNORECASE)]


def dev_source_problems(text):
    return [why for pattern, why in DEV_SOURCE.items() if re.search(pattern, text, re.MULTILINE)]


def _manifest(name):
    return tomllib.loads((CONTESTANTS / name / "contestant.toml").read_text())


def _commands(manifest):
    start = manifest["start"]
    return [start["command"]] + ([start["echo_command"]] if "echo_command" in start else [])


def _source_files(name, manifest):
    """The contestant's own source files and those of the folders beside it that its start fields name."""
    start = manifest["start"]
    words = [w for command in _commands(manifest) for w in command] + [str(v) for v in start.get("env", {}).values()]
    folders = {CONTESTANTS / name} | {CONTESTANTS / m for w in words for m in SIBLING.findall(w)
                                      if (CONTESTANTS / m).is_dir()}
    for folder in sorted(folders):
        for path in sorted(folder.rglob("*")):
            if path.suffix in SOURCE_SUFFIXES and path.is_file() and \
                    not SKIPPED_FOLDERS & set(path.relative_to(folder).parts):
                yield path


@pytest.mark.parametrize("name", NAMES)
def test_start_commands_use_a_production_server(name):
    manifest = _manifest(name)
    problems = [f"{' '.join(cmd)}: {p}" for cmd in _commands(manifest) for p in dev_command_problems(cmd)]
    problems += dev_env_problems(manifest["start"].get("env", {}))
    assert not problems, f"{name} starts a development server:\n" + "\n".join(problems)


@pytest.mark.parametrize("name", NAMES)
def test_served_code_turns_on_no_development_mode(name):
    files = list(_source_files(name, _manifest(name)))
    assert files, f"{name}: no source files found to check"
    problems = [f"{path.relative_to(REPO)}: {why}" for path in files
                for why in dev_source_problems(path.read_text(errors="replace"))]
    assert not problems, f"{name} runs code in development mode:\n" + "\n".join(problems)


# A real development command line for each DEV_COMMANDS entry.
DEV_EXAMPLES = [
    ["{env_dir}/venv/bin/flask", "--app", "app", "run", "--port", "{port}"],
    ["{python}", "-m", "flask", "run"],
    ["{python}", "manage.py", "runserver", "{host}:{port}"],
    ["{env_dir}/venv/bin/django-admin", "runserver"],
    ["{env_dir}/venv/bin/fastapi", "dev", "app.py"],
    ["{env_dir}/venv/bin/uvicorn", "app:app", "--reload"],
    ["{env_dir}/venv/bin/gunicorn", "--reload", "app:app"],
    ["{env_dir}/venv/bin/granian", "--interface", "asgi", "--reload", "app:app"],
    ["hypercorn", "--reload", "app:app"],
    ["{env_dir}/venv/bin/sanic", "server:app", "--dev"],
    ["sanic", "server:app", "--debug"],
    ["sanic", "server:app", "--reload"],
    ["litestar", "run", "--reload"],
    ["sbt", "run"],
    ["sbt", "~run"],
    ["java", "-jar", "{build_dir}/sbt-launch.jar", "run"],
    ["mvn", "-q", "exec:java"],
    ["mvn", "spring-boot:run"],
    ["gradle", "bootRun"],
    ["go", "run", "."],
    ["cargo", "run", "--release"],
    ["node", "--watch", "server.js"],
    ["bun", "--watch", "server.ts"],
    ["bun", "--hot", "server.ts"],
    ["deno", "run", "--watch", "server.ts"],
    ["npx", "nodemon", "server.js"],
    ["ts-node-dev", "server.ts"],
    ["npx", "tsx", "watch", "server.ts"],
]


@pytest.mark.parametrize("argv", DEV_EXAMPLES)
def test_the_checks_catch_each_development_setup(argv):
    """Each example is caught, by exactly one entry (the one written for it)."""
    assert len(dev_command_matches(argv)) == 1, (argv, dev_command_matches(argv))


def test_each_dev_command_entry_has_an_example():
    """No entry is dead: each one catches at least one of the examples."""
    caught = {entry for argv in DEV_EXAMPLES for entry in dev_command_matches(argv)}
    assert caught == set(DEV_COMMANDS), f"entries without an example: {set(DEV_COMMANDS) - caught}"


@pytest.mark.parametrize("argv", [
    ["{env_dir}/venv/bin/uvicorn", "app:app", "--workers", "{workers}", "--no-access-log"],
    ["{env_dir}/venv/bin/gunicorn", "--workers", "{workers}", "flask_app:app"],
    ["{build_dir}/server", "--port", "{port}"],
    ["node", "server.js", "--port", "{port}"],
    ["{python}", "server.py", "--port", "{port}"],
])
def test_the_checks_pass_production_commands(argv):
    assert dev_command_problems(argv) == []


@pytest.mark.parametrize("env, bad", [
    ({"FLASK_DEBUG": "1"}, True), ({"FLASK_DEBUG": "0"}, False), ({"NODE_ENV": "development"}, True),
    ({"NODE_ENV": "production"}, False), ({"UVICORN_RELOAD": "true"}, True), ({"GRANIAN_RELOAD": "1"}, True),
    ({"FLASK_ENV": "development"}, True), ({"DJANGO_DEBUG": "yes"}, True), ({"PYTHONPATH": "{dir}/.."}, False),
])
def test_the_environment_check(env, bad):
    assert bool(dev_env_problems(env)) is bad


@pytest.mark.parametrize("text, bad", [
    ("app.run(host=h, port=p, debug=True)", True),
    ("app.run(host=h, port=p, workers=2, access_log=False)", False),
    ("uvicorn.run(app, reload=True)", True),
    ("app.run(use_reloader=True)", True),
    ("DEBUG = True\n", True),
    ("DEBUG = False\n", False),
    ("from werkzeug.serving import run_simple\nrun_simple('0', 80, app)", True),
    ("from wsgiref.simple_server import make_server", True),
    ("Litestar(route_handlers=[h], debug=False)", False),
])
def test_the_source_check(text, bad):
    assert bool(dev_source_problems(text)) is bad
