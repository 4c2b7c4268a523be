#!/usr/bin/python3
"""install_wheel.py ROOT WHEEL...: installs wheels under ROOT (a package's folder, e.g.
debian/python3-deepinfer) the way pybuild's pyproject plugin does, with Debian's python3-installer:
modules in /usr/lib/python3/dist-packages, scripts in /usr/bin."""

import sys

from installer import install
from installer.destinations import SchemeDictionaryDestination
from installer.sources import WheelFile

if len(sys.argv) < 3:
    sys.exit("usage: install_wheel.py ROOT WHEEL...")
root = sys.argv[1]
modules = root + "/usr/lib/python3/dist-packages"
scheme = {"platlib": modules, "purelib": modules, "scripts": root + "/usr/bin", "data": root + "/usr"}
for wheel in sys.argv[2:]:
    with WheelFile.open(wheel) as source:
        install(source, SchemeDictionaryDestination(scheme, interpreter="/usr/bin/python3", script_kind="posix"), {})
