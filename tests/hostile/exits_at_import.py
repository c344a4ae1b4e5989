"""Ends its process with status 0 as soon as it is imported."""
import os

os._exit(0)
