"""The command line the manifests pass: --port, and where the contestant takes them, --workers and --static-dir."""
import argparse
import os


def parse_args(description, *, workers=True, static_dir=True):
    parser = argparse.ArgumentParser(description=description)
    parser.add_argument("--port", type=int, required=True)
    if workers:
        parser.add_argument("--workers", type=int, default=1)
    if static_dir:
        parser.add_argument("--static-dir", required=True)
    args = parser.parse_args()
    if workers and args.workers < 1:
        parser.error(f"--workers must be >= 1, got {args.workers}")
    if static_dir and not os.path.isdir(args.static_dir):
        parser.error(f"--static-dir {args.static_dir!r} is not a directory; pass the folder holding the static file set")
    return args
