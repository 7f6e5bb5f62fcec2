#!/bin/sh
# The runtime stage's install steps: a virtual environment at PREFIX holding ilucid's
# wheel (with EXTRAS) and its dependencies, then a check that it starts and that the
# libraries with native parts load.
#
#   install-runtime.sh PREFIX WHEEL [EXTRAS]
#
# WHEEL is an ilucid-*.whl file or a folder holding exactly one. PREFIX is made with
# $PYTHON -m venv (default python3) unless it already is a virtual environment. pip's
# own settings (PIP_INDEX_URL, PIP_NO_CACHE_DIR, PIP_FIND_LINKS...) apply.
#
# deploy/container/Containerfile runs it (PREFIX /opt/ilucid, EXTRAS kubernetes); a
# bare-metal site can run the same (docs/deploy.md), and tests/deploy/test_container.py
# runs it into a fresh virtual environment where no image can be built.
set -eu

if [ $# -lt 2 ] || [ $# -gt 3 ]; then
    echo "usage: $0 PREFIX WHEEL [EXTRAS]" >&2
    exit 2
fi
prefix=$1
wheel=$2
extras=${3:-}

if [ -d "$wheel" ]; then
    set -- "$wheel"/ilucid-*.whl
    if [ $# -ne 1 ] || [ ! -f "$1" ]; then
        echo "$0: $wheel: expected exactly one ilucid-*.whl, found: $*" >&2
        exit 2
    fi
    wheel=$1
elif [ ! -f "$wheel" ]; then
    echo "$0: $wheel: no such wheel" >&2
    exit 2
fi

if [ ! -x "$prefix/bin/python" ]; then
    "${PYTHON:-python3}" -m venv "$prefix"
fi
"$prefix/bin/python" -m pip install --disable-pip-version-check "$wheel${extras:+[$extras]}"

# the service's modules, and lightgbm (the duration model: needs the system's libgomp.so.1)
"$prefix/bin/python" -c 'import ilucid.service.api, ilucid.estimators.duration, lightgbm'
"$prefix/bin/ilucid" --version
