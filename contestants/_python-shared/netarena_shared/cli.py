"""The command line the manifests pass: --host, --port, and where the contestant takes them, --workers, --threads
and --static-dir."""
import argparse
import os


def parse_args(description, *, workers=True, static_dir=True, threads=False):
    parser = argparse.ArgumentParser(description=description)
    parser.add_argument("--host", default="127.0.0.1", help="address to listen on (0.0.0.0: every address)")
    parser.add_argument("--port", type=int, required=True)
    if workers:
        parser.add_argument("--workers", type=int, default=1)
    if static_dir:
        parser.add_argument("--static-dir", required=True)
    if threads:
        parser.add_argument("--threads", type=int, default=0, help="thread-pool size; 0: a thread per connection")
    args = parser.parse_args()
    if threads and args.threads < 0:
        parser.error(f"--threads must be >= 0 (0: a thread per connection), got {args.threads}")
    if workers and args.workers < 1:
        parser.error(f"--workers must be >= 1, got {args.workers}")
    if static_dir and not os.path.isdir(args.static_dir):
        parser.error(f"--static-dir {args.static_dir!r} is not a directory; pass the folder holding the static file set")
    return args
