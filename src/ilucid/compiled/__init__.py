"""The compiled core (``make native``, mypyc): ``guard`` decides, once per process and
before any other ilucid module is imported, whether its extension modules or their
Python sources run; ``manifest.json`` (written by ``tools/build_native.py``, last)
is what it decides from. Imports no other ilucid module, so that it can run first."""
