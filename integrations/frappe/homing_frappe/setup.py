# For benches that install apps with setuptools (Frappe 13/14); newer ones
# read pyproject.toml.
from setuptools import find_packages, setup

from homing_frappe import __version__ as version

setup(
	name="homing_frappe",
	version=version,
	description="Publish Frappe document events to Homing without losing any",
	author="Homing",
	packages=find_packages(),
	zip_safe=False,
	include_package_data=True,
	install_requires=[],
)
