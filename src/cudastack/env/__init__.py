"""What is installed: interpreter, site directories, distributions and version files."""
