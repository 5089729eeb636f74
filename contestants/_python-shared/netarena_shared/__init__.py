"""Plumbing shared by the Python contestants (not a contestant: the leading underscore of
contestants/_python-shared keeps it out of discovery).

Only code that was identical across contestants lives here: the pre-fork supervisor, the command
line every contestant accepts, the prebuilt /bytes bodies, the plain WSGI app that eventlet.wsgi
and gevent.pywsgi both serve, and TechEmpower's database scenarios (world.py: the queries-parameter clamp and
row rules for every Python contestant; pg.py: the asyncpg pool and queries for the asyncio ones). Handlers written the way each framework's users write them stay in the
contestant's own folder. Manifests put this folder on the path with
`[start.env] PYTHONPATH = "{dir}/../_python-shared"`; nothing here is installed, so a change here
needs no reinstall (the orchestrator's install stamps hash only the contestant's own folder).
"""
