"""Fumarole's one import root: `fumarole.daemon`, `fumarole.store` and `fumarole.api`.

The repository keeps its top-level folders (daemon/, store/, api/); this package names them
under `fumarole` through symbolic links (fumarole/daemon -> ../daemon, and so on), so that an
installed Fumarole puts one top-level package, `fumarole`, into site-packages and never collides
with another distribution's `daemon` (python-daemon's import name) or `api`. Wheels carry copies
of the linked folders (setuptools follows the links); tests/deploy/test_install_beside.py proves
it by installing the wheel beside python-daemon.
"""
