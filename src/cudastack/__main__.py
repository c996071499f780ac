from cudastack.cli import entry

entry()
