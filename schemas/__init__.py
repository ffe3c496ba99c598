"""Generated JSON Schema files shipped as package data."""
