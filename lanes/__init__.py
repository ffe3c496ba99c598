"""Role profiles shipped as package data (see README.md here)."""
