# All metadata lives in pyproject.toml; this file only names the cffi module.
from setuptools import setup

setup(cffi_modules=["src/fpmcore/replay/_native_build.py:ffibuilder"])
