"""Homing for Frappe: publish document events to Homing without losing any."""

__version__ = "0.1.0"
