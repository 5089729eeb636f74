"""`netarena new NAME --language L --scenarios S`: a new contestant folder from python/netarena/templates/L/.

Each template is a commented contestant.toml and a minimal server in that language that uses its standard
library only (nothing to download, so the first install is quick), passing `netarena verify` as written.
In the template files, __NAME__ is the contestant's name, __SCENARIOS__ the TOML list of claimed scenarios,
__UNSUPPORTED__ the reasons for the others, and __ECHO__ starts the echo_command line (commented out
unless echo is claimed, as the manifest rules require).
"""

from __future__ import annotations

import re
import shutil
import tempfile
from importlib import resources
from pathlib import Path

from .config import NAME_PATTERN, SCENARIOS, SERVICE_SCENARIOS, load_manifest
from .contestants import MANIFEST_NAME
from .errors import ConfigError, did_you_mean
from .scenarios import registry

# The scenarios a template can serve on its own: those that need a backing service (a database) need a driver
# the standard-library templates do not have (docs/services.md says how to add one).
SELF_CONTAINED = tuple(s for s in SCENARIOS if s not in SERVICE_SCENARIOS)

# The self-contained scenarios but those reading the static set (static), where serving files by hand would make
# the template long.
WITHOUT_FILES = tuple(s for s in SELF_CONTAINED if not registry.get(s).static_set)
# The scenarios each template's server implements (a new self-contained scenario needs a handler in each of
# python/netarena/templates/*/); --scenarios may claim any of them.
TEMPLATES: dict[str, tuple[str, ...]] = {
    "python": SELF_CONTAINED,
    "node": SELF_CONTAINED,
    "go": SELF_CONTAINED,
    "rust": WITHOUT_FILES,
    "java": WITHOUT_FILES,
    "ruby": WITHOUT_FILES,
    "erlang": WITHOUT_FILES,
}
DEFAULT_SCENARIOS = ("hello",)


def template_dir(language: str) -> Path:
    return Path(str(resources.files("netarena") / "templates" / language))


def _unsupported(scenario: str, language: str) -> str:
    if scenario in TEMPLATES[language]:
        return f"not claimed yet: the {language} template serves it; add '{scenario}' to scenarios to verify it"
    return f"not implemented by the {language} template: implement it (docs/scenarios.md), then claim it"


def create(name: str, language: str, scenarios: list[str], contestants_dir: Path) -> Path:
    """Write contestants_dir/name from the language's template; ConfigError (nothing written) on bad input."""
    if not re.match(NAME_PATTERN, name):
        raise ConfigError(f"{name!r} is not a contestant name: lowercase letters, digits and '-', starting with a "
                          "letter or digit (e.g. my-server)", path="NAME")
    if language not in TEMPLATES:
        raise ConfigError(f"unknown language {language!r} (one of: {', '.join(TEMPLATES)})", path="--language",
                          hint=did_you_mean(language, TEMPLATES))
    if not scenarios:
        raise ConfigError("claim at least one scenario", path="--scenarios", hint="e.g. --scenarios hello,echo")
    for scenario in scenarios:
        if scenario not in SCENARIOS:
            raise ConfigError(f"unknown scenario '{scenario}' (catalog: {', '.join(SCENARIOS)})", path="--scenarios",
                              hint=did_you_mean(scenario, SCENARIOS))
        if scenario not in TEMPLATES[language]:
            raise ConfigError(f"the {language} template does not implement {scenario} (it has: "
                              f"{', '.join(TEMPLATES[language])}); scaffold without it and add it yourself",
                              path="--scenarios")
    if len(set(scenarios)) != len(scenarios):
        raise ConfigError("a scenario is listed twice", path="--scenarios")
    target = contestants_dir / name
    if target.exists():
        raise ConfigError(f"{target} already exists; choose another name or remove it", path="NAME")
    values = {
        "__NAME__": name,
        "__SCENARIOS__": "[" + ", ".join(f'"{s}"' for s in scenarios) + "]",
        # A scenario needing a service may be left out without a reason (it needs a driver, not a refusal).
        "__UNSUPPORTED__": "\n".join(f'{s} = "{_unsupported(s, language)}"' for s in SELF_CONTAINED
                                     if s not in scenarios),
        "__ECHO__": "" if any(not registry.get(s).is_http for s in scenarios) else
                    "# claim " + " or ".join(f'"{s}"' for s in SELF_CONTAINED if not registry.get(s).is_http)
                    + " in scenarios to use: ",
    }
    # Written and validated under a hidden folder, then moved into place: a failure leaves nothing behind.
    staging_root = Path(tempfile.mkdtemp(prefix=".netarena-new-", dir=contestants_dir))
    staging = staging_root / name
    try:
        shutil.copytree(template_dir(language), staging,
                        ignore=shutil.ignore_patterns("__pycache__", "*.pyc"))
        for path in staging.rglob("*"):
            if path.is_file():
                text = path.read_text()
                for key, value in values.items():
                    text = text.replace(key, value)
                path.write_text(text)
        load_manifest(staging / MANIFEST_NAME)  # a template that does not validate is a bug here, not the user's
        staging.rename(target)
    finally:
        shutil.rmtree(staging_root, ignore_errors=True)
    return target


def next_steps(target: Path, name: str, contestants_dir_option: str) -> str:
    return (f"wrote {target}\n"
            "next:\n"
            f"  netarena verify {name}{contestants_dir_option}    # install, start, check every claimed scenario, stop\n"
            f"  edit {target / MANIFEST_NAME} (framework, version, notes) and the server; verify again\n"
            f"  netarena run --only {name}{contestants_dir_option}    # measure it (suites/quick.toml), then "
            "netarena show / report")
