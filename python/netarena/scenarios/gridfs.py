"""gridfs: files of the static set read from the database's GridFS bucket (docs/scenarios.md, services.md)."""

from __future__ import annotations

from typing import Annotated

from pydantic import Field

from ..fixtures import (GRIDFS_DEFAULT_FILES, GRIDFS_FOLDER, GRIDFS_MISSING_FILE, GRIDFS_VERIFY_FILES,
                        gridfs_file_names)
from .checks import FETCH_MAX_BODY_BYTES, _expect
from .load import static_set_load
from .registry import Scenario
from .static import check_files

DEFAULT_GRIDFS_PATH = "img/00000.jpg"


class GridFS(Scenario):
    """GET /gridfs/{path} answers 200 with the static set's file at path as the mongo service's GridFS bucket
    holds it (the first `gridfs_files` of img/, loaded before the level), and 404 for a file it does not hold;
    suite `gridfs_path` names one file or "img/" (a file of the bucket at random per request)."""

    name = "gridfs"
    order = 80
    service = "mongo"
    static_set = True
    nagle_path = "/gridfs/img/00000.jpg"
    # The static set's img/ files the bucket holds (the first N; the database's cost grows with N, see
    # docs/scenarios.md) and what each request asks for: one file ("img/00042.jpg") or "img/" (a random one of
    # the N per request, in the closed or the open loop, as static_path).
    params = {"gridfs_files": (Annotated[int, Field(ge=3, le=10_000)] | None, None),  # >= the files verified
              "gridfs_path": (str | None, None)}

    def check_entry(self, entry, fail):
        if entry.gridfs_path is None:
            return
        files = entry.gridfs_files or GRIDFS_DEFAULT_FILES
        # The folder (a random file per request, from a --urls list) goes with the closed loop (siege's) and the
        # open loop alike.
        if entry.gridfs_path != GRIDFS_FOLDER and entry.gridfs_path not in gridfs_file_names(files):
            fail("gridfs_path", f"\"{entry.gridfs_path}\" is not in the bucket: give \"{GRIDFS_FOLDER}\" or one of "
                 f"img/00000.jpg to img/{files - 1:05d}.jpg (the first gridfs_files = {files} files of the static set)")

    def level_params(self, measure):
        return [(("gridfs_files", measure.gridfs_files or GRIDFS_DEFAULT_FILES),
                 ("gridfs_path", measure.gridfs_path or DEFAULT_GRIDFS_PATH))]

    def ensure_fixture(self, running, level, static_dir, say):
        from ..fixtures import gridfs_fixture_intact, load_gridfs_fixture

        files = level.param("gridfs_files")
        if (running.fixture.get("gridfs", {}).get("files") != files or
                gridfs_fixture_intact(running.url, static_dir, files)):
            # Loaded when a gridfs level first needs it (and again when its file count differs, the
            # service was restarted, or a contestant changed the bucket): thousands of inserts.
            step = max(1, files // 10)
            say(f"loading {files} files into GridFS ...")
            running.fixture["gridfs"] = load_gridfs_fixture(
                running.url, static_dir, files,
                lambda done, total: done % step == 0 and say(f"GridFS fixture: {done}/{total} files"))
            say(f"GridFS fixture: {files} files loaded in {running.fixture['gridfs']['load_s']:.1f} s")

    def load(self, level, base, static_dir, http_args):
        # The same files as static, from the database's bucket.
        return static_set_load(base, "gridfs", level.param("gridfs_path", DEFAULT_GRIDFS_PATH), static_dir, http_args,
                               level.param("gridfs_files"))

    def check_responses(self, http, static_dir):
        check_files(http, "gridfs", static_dir, GRIDFS_VERIFY_FILES)

        def absent(status, headers, body, _):
            _expect(status == 404, f"status {status} for a file the bucket does not hold, expected 404")
        http.run(f"/gridfs/{GRIDFS_MISSING_FILE}", absent, FETCH_MAX_BODY_BYTES - 1)


SCENARIO = GridFS()
